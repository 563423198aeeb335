"""How the conversation shows outside: its search attributes (the index) and its current details.

Each upsert is a history event and a visibility write: the index is upserted only when a value
changed, a quick run (one that ends in the workflow task it started in) goes straight to its idle
upsert, and a run whose entries wait for the deferred flush goes idle with the flush.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import NamedTuple

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agentcore.approvals import PendingApproval
    from agentcore.search_attributes import AGENT_COST_USD, AGENT_MESSAGE_COUNT, AGENT_MODEL, AGENT_STATUS
    from agentcore.temporal.search_attributes import search_attribute_keys
    from agentcore.wakeups import Wakeup


class IndexValues(NamedTuple):
    """The conversation's search attributes: status, model (``provider/id``), message count, cost."""

    status: str
    model: str
    message_count: int
    cost: float


@dataclass
class Details:
    """What the workflow's current details say (the Web UI shows them)."""

    values: IndexValues
    error_message: str | None = None
    steering: int = 0
    follow_up: int = 0
    # One line per sub-agent the run waits for.
    subagents: list[str] = field(default_factory=list)
    wakeups: list[Wakeup] = field(default_factory=list)
    # Calls waiting for a person (shown while a run goes on).
    approvals: list[PendingApproval] = field(default_factory=list)

    def render(self) -> str:
        status, model, count, cost = self.values
        lines = [f"**{status}** · `{model}` · {count} messages · ${cost:.4f}"]
        if self.error_message:
            lines.append(f"error: {self.error_message}")
        if self.steering or self.follow_up:
            lines.append(f"queued: {self.steering} steering, {self.follow_up} follow-up")
        lines.extend(self.subagents)
        if self.wakeups:
            lines.append(
                f"next wake-up {self.wakeups[0].due_at:%Y-%m-%d %H:%M:%S} UTC · {len(self.wakeups)} pending"
            )
        for pending in self.approvals:
            since = datetime.fromtimestamp(pending.requested_at / 1000, UTC)
            lines.append(
                f"waiting for approval: `{pending.tool_name}` (call `{pending.tool_call_id}`) "
                f"since {since:%Y-%m-%d %H:%M:%S} UTC"
            )
        return "\n\n".join(lines)


def upsert_search_attributes(values: IndexValues) -> None:
    """The index's default seam: one ``workflow.upsert_search_attributes`` of all four values."""
    keys = search_attribute_keys()
    workflow.upsert_search_attributes(
        [
            keys[AGENT_STATUS].value_set(values.status),
            keys[AGENT_MODEL].value_set(values.model),
            keys[AGENT_MESSAGE_COUNT].value_set(values.message_count),
            keys[AGENT_COST_USD].value_set(values.cost),
        ]
    )


class Visibility:
    def __init__(
        self,
        enabled: bool,
        *,
        upsert: Callable[[IndexValues], None] = upsert_search_attributes,
        set_details: Callable[[str], None] = workflow.set_current_details,
    ) -> None:
        # Whether the namespace has agentcore's search attributes (a child conversation gets them too).
        self._enabled = enabled
        self._upsert = upsert
        self._set_details = set_details
        self._indexed: IndexValues | None = None
        # A run not yet indexed as running, and the history length when it started: it is indexed as
        # running only if it outlasts that workflow task (``running_due``).
        self._run_unindexed = False
        self._run_started_at = 0
        # The idle upsert waits for the deferred flush.
        self._deferred = False

    @property
    def enabled(self) -> bool:
        return self._enabled

    @property
    def deferred(self) -> bool:
        return self._deferred

    @property
    def run_started_at(self) -> int:
        """The history length when the current (or last) run started."""
        return self._run_started_at

    def run_started(self, task: int) -> None:
        self._run_unindexed = True
        self._run_started_at = task

    def running_due(self, task: Callable[[], int]) -> bool:
        """Whether the run going on outlasted the workflow task it started in (``task``: the current
        one's number, asked only while a run waits to be indexed), unindexed yet."""
        return self._run_unindexed and task() > self._run_started_at

    def run_indexed(self) -> None:
        """The run is indexed now (as running, or idle at its end): no running upsert is due for it."""
        self._run_unindexed = False

    def defer(self) -> None:
        """Index the run's end with the deferred flush, not now."""
        self._deferred = True

    def index(self, values: IndexValues) -> None:
        """Keep the conversation findable in the UI: status, model, message count, cost."""
        self._deferred = False
        if not self._enabled or values == self._indexed:
            return
        self._indexed = values
        self._upsert(values)

    def show(self, details: Details) -> None:
        self._set_details(details.render())
