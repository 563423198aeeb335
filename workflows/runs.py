"""The conversation's runs: the one asked for, the one going on, and how it stands.

A run is asked for (a prompt, a continue, a fired wake-up), taken by the main loop, and ends; a
compaction or a branch holds the conversation meanwhile as a run does (the conversation is busy).
Continuing as new, the conversation takes no new run (``rolling_over``); a run set aside while its
tool calls wait for a person hands them to the next run (``set_aside``).
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agentcore.approvals import PendingApproval
    from agentcore.protocol import PendingRun
    from agentcore.runtime import AbortSignal
    from agentcore.search_attributes import AWAITING_APPROVAL


class Runs:
    def __init__(
        self, pending: PendingRun | None = None, count: int = 0, error_message: str | None = None
    ) -> None:
        self._pending = pending
        self._count = count
        self._error_message = error_message
        self._running = False
        # The run's (or a manual compaction's) abort; None while neither goes on.
        self._abort: AbortSignal | None = None
        # Why the parent aborted this sub-agent's run (it may come before the run starts).
        self._parent_abort_reason: str | None = None
        self._compacting = False
        self._rolling_over = False
        self._initialized = False
        # The tool calls going on, and the calls of the current batch that ended.
        self._tool_calls: set[str] = set()
        self._batch_ended: set[str] = set()
        # Calls waiting for a person that the next run (after continue-as-new) asks again.
        self._set_aside: list[PendingApproval] = []

    @property
    def pending(self) -> PendingRun | None:
        """The run asked for and not yet started."""
        return self._pending

    @property
    def running(self) -> bool:
        return self._running

    @property
    def count(self) -> int:
        return self._count

    @property
    def error_message(self) -> str | None:
        return self._error_message

    @property
    def abort_signal(self) -> AbortSignal | None:
        return self._abort

    @property
    def compacting(self) -> bool:
        return self._compacting

    @property
    def rolling_over(self) -> bool:
        return self._rolling_over

    @property
    def initialized(self) -> bool:
        return self._initialized

    @property
    def tool_calls(self) -> set[str]:
        """The tool calls going on (a copy)."""
        return set(self._tool_calls)

    @property
    def batch_ended(self) -> bool:
        """Whether a call of the current batch ended."""
        return bool(self._batch_ended)

    @property
    def set_aside(self) -> list[PendingApproval]:
        return list(self._set_aside)

    @property
    def busy(self) -> bool:
        return self._running or self._compacting or self._pending is not None

    def request(self, run: PendingRun) -> None:
        self._pending = run

    def ready(self) -> None:
        """The conversation took up what it was handed (tools described, wake-ups held)."""
        self._initialized = True

    def roll_over(self) -> None:
        """Continuing as new: no new run is taken here (the client sends it to the next run)."""
        self._rolling_over = True

    def note_error(self, message: str | None) -> None:
        """What went wrong last (``get_state``'s ``error_message``); None clears it."""
        self._error_message = message

    def start(self) -> AbortSignal:
        """Take the pending run: it goes on now, with an abort of its own."""
        self._pending = None
        self._running = True
        self._abort = AbortSignal()
        if self._parent_abort_reason is not None:
            self._abort.abort(self._parent_abort_reason)
        self._error_message = None
        self._count += 1
        return self._abort

    def end(self) -> None:
        self._running = False
        self._abort = None
        self._tool_calls.clear()

    def abort(self, reason: str) -> bool:
        """Abort the run (or manual compaction) going on; whether one was."""
        if self._abort is None:
            return False
        self._abort.abort(reason)
        return True

    def abort_from_parent(self, reason: str) -> bool:
        """The parent aborted this sub-agent: its run, or the next one before it starts."""
        self._parent_abort_reason = reason
        return self.abort(reason)

    def status(self, awaiting_approval: bool) -> str:
        if self._abort is not None and self._abort.aborted:
            return "aborting"
        if self._running and awaiting_approval:
            return AWAITING_APPROVAL
        return "running" if self._running else "idle"

    def start_compaction(self, *, abortable: bool) -> AbortSignal | None:
        """A compaction or a branch holds the conversation; ``abort`` stops a manual compaction as
        it stops a run."""
        self._compacting = True
        if not abortable:
            return None
        self._abort = signal = AbortSignal()
        return signal

    def end_compaction(self, signal: AbortSignal | None = None) -> None:
        self._compacting = False
        if signal is not None and self._abort is signal:
            self._abort = None

    def batch_began(self) -> None:
        """An assistant message ended: a new batch of calls begins, if it asks for any."""
        self._batch_ended.clear()

    def tool_started(self, tool_call_id: str) -> None:
        self._tool_calls.add(tool_call_id)

    def tool_ended(self, tool_call_id: str) -> None:
        self._tool_calls.discard(tool_call_id)
        self._batch_ended.add(tool_call_id)

    def set_aside_for_approvals(self, pending: list[PendingApproval]) -> None:
        """The run ended while every call of its batch waits for a person: the next run (after
        continue-as-new) resumes them."""
        self._set_aside = list(pending)
        self._pending = PendingRun(id=f"resume-{self._count}", kind="resume")
