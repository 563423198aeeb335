"""Tool approvals: a call of a tool that ``requires_approval`` waits for a person before it runs.

The loop (``agentcore.loop``) checks the call's arguments, asks its ``ApprovalGate`` and waits; a
person answers through ``approve(tool_call_id, args=None)`` or ``deny(tool_call_id, reason="")`` on
the ``Agent`` (plain calls) or the ``DurableAgent`` (Updates). Each runtime gives the gate its way of
waiting: in-process an asyncio event, in a workflow ``workflow.wait_condition`` (no activity in
flight, no workflow task held while a person thinks). The gate is plain data plus asyncio, so the
same code runs in both.

A decision is final: deciding a call again the same way changes nothing (retries are safe), deciding
it otherwise is refused (``APPROVAL_ALREADY_RESOLVED``), as is deciding a call nobody waits for
(``APPROVAL_NOT_FOUND``) or approving with arguments the tool's schema refuses (``INVALID_PARAMETERS``).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from .errors import (
    ApprovalAlreadyResolvedError,
    ApprovalNotFoundError,
    InvalidParametersError,
)
from .events import ApprovalDecisionKind
from .messages import WireModel
from .runtime import AbortSignal
from .tool_exec import edited_arguments_problem
from .tools import AgentTool, ToolSpec

__all__ = [
    "APPROVAL_DECISION_CUSTOM_TYPE",
    "APPROVAL_REQUEST_CUSTOM_TYPE",
    "STEERED_REASON",
    "ApprovalDecision",
    "ApprovalGate",
    "ApprovalWaitSetAside",
    "PendingApproval",
    "WaitUntil",
]

# Custom session entries (no format change): the file records each request and each decision, so a
# conversation recovered from it asks again for a call left undecided.
APPROVAL_REQUEST_CUSTOM_TYPE = "tool_approval_request"
APPROVAL_DECISION_CUSTOM_TYPE = "tool_approval_decision"
# Why calls waiting for approval are denied when the user sends a steering message instead.
STEERED_REASON = "the user sent a new message instead"
# Decided calls remembered, so a repeated decision is recognised (bounded like the seen request ids).
RESOLVED_KEPT = 2_000


class ApprovalWaitSetAside(Exception):  # noqa: N818 (not an error: a run set aside)
    """Raised by a workflow's wait (never in-process) when the conversation continues as new while
    every call of the batch waits: the run ends here, and the next run asks for them again."""


class PendingApproval(WireModel):
    """A tool call waiting for a person. Times are milliseconds since the epoch; ``expires_at`` is
    None when the tool sets no ``approval_timeout_seconds``. ``session_id`` names the conversation
    that waits when it is not the one asked (a sub-agent's call shown in its parent's list)."""

    tool_call_id: str
    tool_name: str
    arguments: Any = None
    requested_at: int
    expires_at: int | None = None
    session_id: str | None = None


class ApprovalDecision(WireModel):
    decision: ApprovalDecisionKind
    # The arguments the call runs with (edited), or ran with; None when it does not run.
    args: Any = None
    reason: str = ""


# wait_until(predicate, timeout_seconds) -> whether the predicate held (False: the time ran out).
WaitUntil = Callable[[Callable[[], bool], "float | None"], Awaitable[bool]]


class _Waiting:
    def __init__(self, pending: PendingApproval, tool: AgentTool | ToolSpec) -> None:
        self.pending = pending
        self.tool = tool
        self.decision: ApprovalDecision | None = None


class ApprovalGate:
    """The calls of one conversation that wait for a person, and the decisions that release them.

    ``on_requested`` / ``on_resolved`` tell the owner (the workflow records session entries and
    updates its search attribute; they must not await); ``persist`` then writes the request down
    before the wait begins. ``wait_until`` is the runtime's wait; the default one is asyncio's,
    woken by every decision and by the run's abort."""

    def __init__(
        self,
        *,
        wait_until: WaitUntil | None = None,
        on_requested: Callable[[PendingApproval], None] | None = None,
        on_resolved: Callable[[PendingApproval, ApprovalDecision], None] | None = None,
        restored: list[PendingApproval] | None = None,
        persist: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._waiting: dict[str, _Waiting] = {}
        self._resolved: OrderedDict[str, ApprovalDecision] = OrderedDict()
        # Requests a previous run made (recovered from a session file, or carried across
        # continue-as-new): asked again, they keep their time and expiry.
        self._restored: dict[str, PendingApproval] = {p.tool_call_id: p for p in restored or ()}
        self._wait_until = wait_until or self._wait_in_process
        self._on_requested = on_requested
        self._on_resolved = on_resolved
        self._persist = persist
        self._changed: asyncio.Event | None = None
        # Sub-agents' calls (``agentcore.subagents``): shown in this list with their session id and
        # decided through it. In-process a child's gate is attached while it runs (``add_child``);
        # durably a child workflow reports its list (``set_child_pending``) and a decision taken
        # here is sent on to it (``forward(session_id, tool_call_id, decision)``).
        self._children: dict[str, ApprovalGate] = {}
        self._remote: dict[str, list[PendingApproval]] = {}
        self.forward: Callable[[str, str, ApprovalDecision], None] | None = None
        self._listeners: list[Callable[[], None]] = []

    # ---------------------------------------------------------------------------- people's side

    def pending(self) -> list[PendingApproval]:
        """The calls waiting now, oldest first (restored ones not yet asked again included)."""
        waiting = [w.pending for w in self._waiting.values() if w.decision is None]
        asked = {p.tool_call_id for p in waiting}
        own = [*(p for p in self._restored.values() if p.tool_call_id not in asked), *waiting]
        return [*own, *self._childrens_pending()]

    def is_waiting(self) -> bool:
        return (
            any(w.decision is None for w in self._waiting.values())
            or any(child.is_waiting() for child in self._children.values())
            or any(self._remote.values())
        )

    def check(self, tool_call_id: str, decision: ApprovalDecision) -> bool:
        """Raise the typed refusal of ``decision`` for ``tool_call_id``, else return whether it is
        new (False: the call was decided that way already, and deciding again changes nothing)."""
        holder = self._holder(tool_call_id)
        if isinstance(holder, ApprovalGate):
            return holder.check(tool_call_id, decision)
        if holder is not None:
            return True  # a durable sub-agent's call: its own conversation checks the decision
        waiting = self._waiting.get(tool_call_id)
        if waiting is None or waiting.decision is not None:
            done = self._resolved.get(tool_call_id) or (waiting.decision if waiting else None)
            if done is None:
                raise ApprovalNotFoundError(f"no tool call {tool_call_id!r} is waiting for approval")
            if _same(done, decision):
                return False
            raise ApprovalAlreadyResolvedError(
                f"tool call {tool_call_id!r} was {done.decision} already; it cannot be {decision.decision} now"
            )
        if decision.decision == "edited":
            problem = edited_arguments_problem(waiting.tool, decision.args)
            if problem is not None:
                raise InvalidParametersError(problem)
        return True

    def approve(self, tool_call_id: str, args: Any = None) -> None:
        """Let the call run, with ``args`` instead of the model's when given (checked against the
        tool's parameters first)."""
        self.decide(tool_call_id, approval(args))

    def deny(self, tool_call_id: str, reason: str = "") -> None:
        """Refuse the call: its result is a ``TOOL_DENIED`` error carrying ``reason`` to the model."""
        self.decide(tool_call_id, ApprovalDecision(decision="denied", reason=reason))

    def decide(self, tool_call_id: str, decision: ApprovalDecision) -> None:
        holder = self._holder(tool_call_id)
        if isinstance(holder, ApprovalGate):
            holder.decide(tool_call_id, decision)
            return
        if holder is not None:
            if self.forward is not None:
                self.forward(holder, tool_call_id, decision)
            return
        if self.check(tool_call_id, decision):
            self._resolve(self._waiting[tool_call_id], decision)

    def deny_all(self, reason: str) -> None:
        """Deny every waiting call (a steering message arrived: the user said something else)."""
        for waiting in list(self._waiting.values()):
            if waiting.decision is None:
                self._resolve(waiting, ApprovalDecision(decision="denied", reason=reason))
        # A sub-agent's waiting calls too: the run they hold up will take the message next.
        for child in list(self._children.values()):
            child.deny_all(reason)
        for session_id, listed in self._remote.items():
            for pending in listed:
                if self.forward is not None:
                    self.forward(
                        session_id, pending.tool_call_id, ApprovalDecision(decision="denied", reason=reason)
                    )

    # ------------------------------------------------------------------------- sub-agents' calls

    def add_child(self, session_id: str, child: ApprovalGate) -> Callable[[], None]:
        """Show an in-process sub-agent's waiting calls here while it runs; returns the detach."""
        self._children[session_id] = child

        def detach() -> None:
            if self._children.get(session_id) is child:
                del self._children[session_id]

        return detach

    def set_child_pending(self, session_id: str, pending: list[PendingApproval]) -> None:
        """A durable sub-agent's waiting calls (its descendants' included), as it reported them."""
        if pending:
            self._remote[session_id] = list(pending)
        elif self._remote.pop(session_id, None) is None:
            return
        self._changed_now()

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` whenever the waiting calls change (a sub-agent reports to its caller)."""
        self._listeners.append(listener)

    def _childrens_pending(self) -> list[PendingApproval]:
        found: list[PendingApproval] = []
        for session_id, child in self._children.items():
            found.extend(
                p if p.session_id else p.model_copy(update={"session_id": session_id})
                for p in child.pending()
            )
        for listed in self._remote.values():
            found.extend(listed)
        return found

    def _knows(self, tool_call_id: str) -> bool:
        return (
            tool_call_id in self._waiting or tool_call_id in self._resolved or tool_call_id in self._restored
        )

    def _holder(self, tool_call_id: str) -> ApprovalGate | str | None:
        """The sub-agent that holds ``tool_call_id`` (its gate, or a durable one's session id), or
        None when the call is this conversation's own or unknown. Own calls come first."""
        if self._knows(tool_call_id):
            return None
        for child in self._children.values():
            if child._knows(tool_call_id) or child._holder(tool_call_id) is not None:
                return child
        for session_id, listed in self._remote.items():
            if any(p.tool_call_id == tool_call_id for p in listed):
                return session_id
        return None

    def _changed_now(self) -> None:
        for listener in list(self._listeners):
            listener()

    # ------------------------------------------------------------------------------ loop's side

    async def request(
        self,
        tool: AgentTool | ToolSpec,
        tool_call_id: str,
        arguments: Any,
        clock: Callable[[], int],
        signal: AbortSignal,
        emit_requested: Callable[[PendingApproval], None],
    ) -> ApprovalDecision:
        """Ask for ``tool_call_id`` and wait for the decision, the timeout or the abort
        (``clock``: the runtime's time in ms)."""
        now_ms = clock()
        restored = self._restored.pop(tool_call_id, None)
        timeout = tool.approval_timeout_seconds
        if restored is not None:
            pending = restored.model_copy(update={"arguments": arguments})
        else:
            expires_at = None if timeout is None else now_ms + round(timeout * 1000)
            pending = PendingApproval(
                tool_call_id=tool_call_id,
                tool_name=tool.name,
                arguments=arguments,
                requested_at=now_ms,
                expires_at=expires_at,
            )
        waiting = _Waiting(pending, tool)
        self._waiting[tool_call_id] = waiting
        emit_requested(pending)
        if self._on_requested is not None:
            self._on_requested(pending)
        self._changed_now()
        if self._persist is not None:
            await self._persist()
        remaining = None if pending.expires_at is None else max(0.0, (pending.expires_at - clock()) / 1000)
        remove = signal.add_listener(self._notify)
        try:
            decided = await self._wait_until(
                lambda: waiting.decision is not None or signal.aborted, remaining
            )
        finally:
            remove()
        if waiting.decision is None:
            kind: ApprovalDecisionKind = "expired" if not decided and not signal.aborted else "aborted"
            self._resolve(waiting, ApprovalDecision(decision=kind))
        del self._waiting[tool_call_id]
        assert waiting.decision is not None
        return waiting.decision

    def _resolve(self, waiting: _Waiting, decision: ApprovalDecision) -> None:
        waiting.decision = decision
        self._resolved[waiting.pending.tool_call_id] = decision
        while len(self._resolved) > RESOLVED_KEPT:
            self._resolved.popitem(last=False)
        if self._on_resolved is not None:
            self._on_resolved(waiting.pending, decision)
        self._changed_now()
        self._notify()

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()

    async def _wait_in_process(self, predicate: Callable[[], bool], timeout: float | None) -> bool:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        if self._changed is None:
            self._changed = asyncio.Event()
        while not predicate():
            self._changed.clear()
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return False
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                return predicate()
        return True


def approval(args: Any = None) -> ApprovalDecision:
    """An approval, as given (``args`` None) or with edited arguments."""
    if args is None:
        return ApprovalDecision(decision="approved")
    return ApprovalDecision(decision="edited", args=args)


def _same(done: ApprovalDecision, decision: ApprovalDecision) -> bool:
    if done.decision in ("approved", "edited") and decision.decision in ("approved", "edited"):
        return decision.args is None or decision.args == done.args
    return done.decision == decision.decision == "denied"


def request_entry_data(pending: PendingApproval) -> dict[str, Any]:
    return pending.model_dump(mode="json", exclude_none=True)


def decision_entry_data(pending: PendingApproval, decision: ApprovalDecision) -> dict[str, Any]:
    return {"tool_call_id": pending.tool_call_id, **decision.model_dump(mode="json")}


def undecided_requests(entries: list[Any]) -> list[PendingApproval]:
    """The approval requests among ``entries`` (a session path's custom entries, in order) that no
    decision follows: what a conversation recovered from its file asks again."""
    requests: dict[str, PendingApproval] = {}
    for entry in entries:
        custom_type = getattr(entry, "custom_type", None)
        data = getattr(entry, "data", None)
        if not isinstance(data, dict):
            continue
        if custom_type == APPROVAL_REQUEST_CUSTOM_TYPE:
            try:
                pending = PendingApproval.model_validate(data)
            except ValueError:
                continue
            requests[pending.tool_call_id] = pending
        elif custom_type == APPROVAL_DECISION_CUSTOM_TYPE:
            requests.pop(str(data.get("tool_call_id")), None)
    return list(requests.values())
