"""``DurableAgent``: a durable conversation, with the in-process ``Agent``'s methods; each is a
Temporal update, signal or query on the conversation's workflow (sent through ``calls``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.client import WorkflowHandle, WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode

from ..approvals import PendingApproval
from ..errors import AgentNotFoundError, EncryptionKeyError, NamespaceNotFoundError, NoWorkerError
from ..events import AgentEvent, CompactionEndEvent
from ..messages import ImageContent, UserMessage
from ..model import Model, ThinkingLevel, parse_thinking_level
from ..protocol import (
    UPDATE_CLEAR_QUEUES,
    UPDATE_FOLLOW_UP,
    UPDATE_STEER,
    AbortRequest,
    Accepted,
    ApprovalsState,
    ApproveRequest,
    BranchRequest,
    BranchResult,
    ClearQueuesRequest,
    CommandRequest,
    CompactRequest,
    DenyRequest,
    DurableState,
    Idle,
    IdleRequest,
    LabelRequest,
    MessagesPage,
    MessagesQuery,
    PromptRequest,
    QueuedMessage,
    QueueName,
    QueuesState,
    SessionNameRequest,
    SetModelRequest,
    SetSystemPromptRequest,
    SetThinkingLevelRequest,
    SetToolsRequest,
)
from ..schedules import (
    UPDATE_ADD_SCHEDULE,
    UPDATE_DELETE_SCHEDULE,
    AddScheduleRequest,
    DeleteScheduleRequest,
    RecurringMessage,
    check_schedule,
    parse_every,
)
from ..session import SessionStats
from ..tools import AgentTool, ToolSpec
from ..wakeups import CancelWakeupRequest, ScheduleWakeupRequest, Wakeup, aware, check_note, due_time
from .calls import CallerOfConversations, ConversationCalls, refusals_waited
from .events import RECONNECT_TIMEOUT, EventStream, Listener
from .requests import PromptInput, new_id, tool_names, user_messages

# How long ``terminate`` waits for a conversation to name its schedules: a worker that runs it answers
# in milliseconds; one that does not (none running, or its tasks failing) must not stop a terminate.
TERMINATE_ASK_SECONDS = 5.0


class DurableAgent:
    """A durable conversation, with the in-process ``Agent``'s methods."""

    def __init__(self, agents: CallerOfConversations, handle: WorkflowHandle[Any, Any]) -> None:
        self.agents = agents
        self.client = agents.client
        self.handle = handle
        self.session_id = handle.id
        self._calls = ConversationCalls(agents.worker_watch, handle)
        self._events = EventStream(self._calls)

    # ------------------------------------------------------------------------------- commands

    async def prompt(
        self, value: PromptInput, images: Sequence[ImageContent] | None = None, *, id: str | None = None
    ) -> Accepted:
        """Start a run. Returns once accepted (not when the run ends: ``wait_for_idle`` for that).

        ``id`` makes the call idempotent: a repeat with the same id is applied once."""
        messages = user_messages(value, images)
        request_id = id or new_id()
        return await self._calls.update("prompt", PromptRequest(id=request_id, messages=messages), request_id)

    async def run(
        self,
        value: PromptInput,
        images: Sequence[ImageContent] | None = None,
        *,
        id: str | None = None,
        timeout: float | None = None,
    ) -> Idle:
        """Start a run and wait for its end: one update where ``prompt`` + ``wait_for_idle`` are two.
        Returns the run's messages, its answer last (``Idle.messages`` from ``Idle.start``, within
        the answer's budget; ``get_messages`` pages on).

        Returned as soon as the run ends, as a subscriber sees ``agent_end``: the run is in the
        conversation's history by then, and its entries reach the session file within a second
        or with the next run (``wait_for_idle`` waits for the file as well).

        ``id`` makes the call idempotent: a repeat is applied once (one that reaches the
        conversation after it continued as new returns ``status="duplicate"`` and no messages).
        Raises ``AgentBusyError`` if a run is active, and ``TimeoutError`` when ``timeout`` (seconds)
        passes first (the run goes on)."""
        messages = user_messages(value, images)
        request_id = id or new_id()
        request = PromptRequest(id=request_id, messages=messages)
        return await self._waiting(
            self._calls.update(
                "prompt_and_wait", request, request_id, Idle, refused_for=refusals_waited(timeout)
            ),
            timeout,
        )

    async def continue_(self, *, id: str | None = None) -> Accepted:
        """Continue from the transcript as it stands (the in-process ``Agent.continue_``); returns once
        accepted. ``id`` makes the call idempotent."""
        request_id = id or new_id()
        return await self._calls.update("continue", CommandRequest(id=request_id), request_id)

    async def reset(self, *, id: str | None = None) -> Accepted:
        """Forget the conversation, the queues and any error; pending wake-ups and schedules are
        cancelled (refused while a run is active). The session file keeps every entry."""
        request_id = id or new_id()
        return await self._calls.update("reset", CommandRequest(id=request_id), request_id)

    async def set_model(self, model: Model) -> Accepted:
        """Use ``model`` from the next model call on."""
        request_id = new_id()
        return await self._calls.update("set_model", SetModelRequest(id=request_id, model=model), request_id)

    async def set_thinking_level(self, level: ThinkingLevel | str) -> Accepted:
        """Set the thinking level (a ``ThinkingLevel`` or its name) from the next model call on."""
        request_id = new_id()
        request = SetThinkingLevelRequest(id=request_id, thinking_level=parse_thinking_level(level))
        return await self._calls.update("set_thinking_level", request, request_id)

    async def set_tools(self, tools: Sequence[AgentTool | ToolSpec | str]) -> Accepted:
        """Offer these tools (by name: the workers' registry holds them) from the next model call on."""
        request_id = new_id()
        return await self._calls.update(
            "set_tools", SetToolsRequest(id=request_id, tools=tool_names(tools)), request_id
        )

    async def set_system_prompt(self, system_prompt: str) -> Accepted:
        """Use ``system_prompt`` from the next model call on."""
        request_id = new_id()
        request = SetSystemPromptRequest(id=request_id, system_prompt=system_prompt)
        return await self._calls.update("set_system_prompt", request, request_id)

    async def compact(self, instructions: str | None = None, *, id: str | None = None) -> CompactionEndEvent:
        """Summarise the older part of the conversation now (refused while a run is active)."""
        request_id = id or new_id()
        request = CompactRequest(id=request_id, instructions=instructions)
        return await self._calls.update("compact", request, request_id, CompactionEndEvent)

    async def branch(
        self,
        target_entry_id: str | None,
        *,
        summary: str | None = None,
        summarize: bool = False,
        instructions: str | None = None,
    ) -> BranchResult:
        """Go back to an earlier entry (``get_messages().entry_ids`` names them; None: the start).

        The abandoned branch stays in the session file; ``summary`` (or ``summarize=True``, which asks
        the model) records what was learned there so the conversation keeps it."""
        request_id = new_id()
        request = BranchRequest(
            id=request_id,
            target_entry_id=target_entry_id,
            summary=summary,
            summarize=summarize,
            instructions=instructions,
        )
        return await self._calls.update("branch", request, request_id, BranchResult)

    async def set_label(self, entry_id: str, label: str | None) -> Accepted:
        """Name an entry (a bookmark); an empty or None label clears it."""
        request_id = new_id()
        return await self._calls.update(
            "set_label", LabelRequest(id=request_id, target_entry_id=entry_id, label=label), request_id
        )

    async def set_session_name(self, name: str) -> Accepted:
        """Name the session (an entry of its session file)."""
        request_id = new_id()
        return await self._calls.update(
            "set_session_name", SessionNameRequest(id=request_id, name=name), request_id
        )

    async def steer(self, message: str | UserMessage, *, id: str | None = None) -> str:
        """Queue a steering message (taken after the current turn); returns its id.

        Raises ``RateLimitError`` over a SPEC-9.1 limit; nothing is then queued or recorded."""
        item = QueuedMessage(id=id or new_id(), message=user_messages(message)[0])
        await self._calls.update(UPDATE_STEER, item, item.id)
        return item.id

    async def follow_up(self, message: str | UserMessage, *, id: str | None = None) -> str:
        """Queue a follow-up (taken when the agent would otherwise stop); returns its id.

        Raises ``RateLimitError`` over a SPEC-9.1 limit; nothing is then queued or recorded."""
        item = QueuedMessage(id=id or new_id(), message=user_messages(message)[0])
        await self._calls.update(UPDATE_FOLLOW_UP, item, item.id)
        return item.id

    async def approve(self, tool_call_id: str, args: dict[str, Any] | None = None) -> Accepted:
        """Let a tool call waiting for approval run; with ``args`` it runs with those instead.

        Refused before anything is written: ``ApprovalNotFoundError`` (no such call waits),
        ``ApprovalAlreadyResolvedError`` (decided otherwise), ``InvalidParametersError`` (``args``
        fail the tool's schema). Approving again the same way answers ``status="duplicate"``."""
        holder = await self._sub_agent_holding(tool_call_id)
        if holder is not None:
            return await holder.approve(tool_call_id, args)
        request_id = new_id()
        request = ApproveRequest(id=request_id, tool_call_id=tool_call_id, args=args)
        return await self._calls.update("approve", request, request_id)

    async def deny(self, tool_call_id: str, reason: str = "") -> Accepted:
        """Refuse a tool call waiting for approval: its result is a ``TOOL_DENIED`` error the model
        reads, with ``reason``. Refused as ``approve`` is."""
        holder = await self._sub_agent_holding(tool_call_id)
        if holder is not None:
            return await holder.deny(tool_call_id, reason)
        request_id = new_id()
        request = DenyRequest(id=request_id, tool_call_id=tool_call_id, reason=reason)
        return await self._calls.update("deny", request, request_id)

    async def _sub_agent_holding(self, tool_call_id: str) -> DurableAgent | None:
        """The sub-agent conversation whose call ``tool_call_id`` is (as this conversation lists it),
        or None when it is this one's own: a decision goes to the conversation that waits, whose
        Update checks it (the edited arguments against its tool's schema) and answers."""
        pending = await self.pending_approvals()
        if any(p.tool_call_id == tool_call_id and p.session_id in (None, self.session_id) for p in pending):
            return None
        for p in pending:
            if p.tool_call_id == tool_call_id and p.session_id:
                return DurableAgent(self.agents, self.client.get_workflow_handle(p.session_id))
        return None

    async def pending_approvals(self) -> list[PendingApproval]:
        """The tool calls waiting for a person, oldest first: this conversation's own, then its
        sub-agents' (``session_id`` names the sub-agent's conversation; approve and deny route there)."""
        return (await self._calls.query("get_approvals", None, ApprovalsState)).pending

    async def abort(self, reason: str | None = None) -> None:
        """Stop the active run (a signal: it cannot be refused); the partial answer is kept. The
        signals this handle's listeners hold for the run fire at once."""
        await self._calls.signal("abort", AbortRequest(id=new_id(), reason=reason))
        self._events.abort_runs(reason)

    async def wait_for_idle(self, timeout: float | None = None, *, since: int | None = None) -> Idle:
        """Wait until no run is active and every entry is in the session file.

        ``since``: a message index (``prompt``'s ``Accepted.message_count``); the result then holds the
        messages from there on (``Idle.messages``, from ``Idle.start``; within the answer's budget,
        ``get_messages`` pages on), the run's answer last: no ``get_state`` needed to read it.
        Raises ``TimeoutError`` when ``timeout`` (seconds) passes first; the conversation goes on.
        While the conversation's workflow task keeps failing, the server refuses the call: it is sent
        again until ``timeout``, and without one for a minute, then ``WorkflowTaskFailingError``."""
        request_id = new_id()
        request = IdleRequest(id=request_id, since=since)
        return await self._waiting(
            self._calls.update(
                "wait_for_idle", request, request_id, Idle, refused_for=refusals_waited(timeout)
            ),
            timeout,
        )

    async def _waiting(self, waiting: Awaitable[Idle], timeout: float | None) -> Idle:
        if not timeout:
            return await waiting
        task = asyncio.ensure_future(waiting)
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if task in done:
            return task.result()
        task.cancel()
        # The cancelled update call ends with the SDK's own error: the caller asked for a timeout.
        await asyncio.gather(task, return_exceptions=True)
        raise TimeoutError(f"{self.session_id!r} was not idle after {timeout} s")

    async def schedule_wakeup(
        self, note: str, *, at: datetime | None = None, after: timedelta | None = None
    ) -> str:
        """Run the conversation again at ``at`` (a datetime; naive means local time) or ``after`` a
        while, with a user message carrying ``note`` (a follow-up if a run is going then). Returns
        the wake-up's id. A workflow timer: it survives worker restarts and continue-as-new, and one
        that came due while no worker ran fires (once) when one is back. Refused: a time not in the
        future (``WakeupInPastError``), more than ``limits.max_pending_wakeups`` pending."""
        due_time(datetime.now(UTC), at, after)  # refused here first: no round trip for a bad call
        request_id = new_id()
        request = ScheduleWakeupRequest(
            id=request_id,
            note=check_note(note),
            due_at=aware(at) if at is not None else None,
            # Relative to the workflow's clock, not this process's.
            delay_seconds=after.total_seconds() if after is not None else None,
        )
        wakeup = await self._calls.update("schedule_wakeup", request, request_id, Wakeup)
        return wakeup.id

    async def cancel_wakeup(self, wakeup_id: str) -> None:
        """Cancel a pending wake-up; ``WakeupNotFoundError`` if none has that id."""
        request_id = new_id()
        await self._calls.update(
            "cancel_wakeup", CancelWakeupRequest(id=request_id, wakeup_id=wakeup_id), request_id
        )

    async def schedule(
        self, text: str, *, every: timedelta | str | None = None, cron: str | None = None
    ) -> RecurringMessage:
        """Send ``text`` to this conversation ``every`` interval (a timedelta, or ``"1h"``, ``"15m"``)
        or on a ``cron`` expression, through a Temporal Schedule the conversation makes (visible and
        pausable in the Web UI; overlapping runs skipped, a missed one caught up within a minute). Each
        message runs the conversation as a fired wake-up does. ``reset`` deletes the conversation's
        schedules; a schedule whose conversation is gone deletes itself when it next fires."""
        interval = parse_every(every) if isinstance(every, str) else every
        request = AddScheduleRequest(
            id=f"{self.session_id}.schedule.{new_id()[:8]}",
            text=text,
            every_seconds=interval.total_seconds() if interval is not None else None,
            cron=cron,
        )
        check_schedule(request)
        return await self._calls.update(UPDATE_ADD_SCHEDULE, request, request.id, RecurringMessage)

    async def list_schedules(self) -> list[RecurringMessage]:
        """This conversation's schedules (``describe`` their Temporal Schedule for the next times)."""
        return (await self.get_state()).schedules

    async def delete_schedule(self, schedule_id: str) -> None:
        """Delete one of this conversation's schedules; ``ScheduleNotFoundError`` if it has no such one."""
        request_id = new_id()
        request = DeleteScheduleRequest(id=request_id, schedule_id=schedule_id)
        await self._calls.update(UPDATE_DELETE_SCHEDULE, request, request_id)

    async def terminate(self, reason: str | None = None) -> None:
        """End the conversation for good, deleting its schedules first (its session file stays:
        ``AgentClient.recover`` starts it again). To stop a turn, ``abort`` instead.

        A conversation that cannot say which schedules it has (no worker runs it, or its workflow
        tasks fail) is terminated all the same after ``TERMINATE_ASK_SECONDS``; its schedules then
        delete themselves when they next fire."""
        ask = timedelta(seconds=TERMINATE_ASK_SECONDS)
        try:
            schedules = (await self._calls.query("get_state", None, DurableState, ask)).schedules
        except (AgentNotFoundError, NamespaceNotFoundError):
            raise
        except (RPCError, WorkflowQueryFailedError, EncryptionKeyError, NoWorkerError):
            schedules = []
        for item in schedules:
            try:
                await self.client.get_schedule_handle(item.id).delete()
            except RPCError as err:
                if err.status != RPCStatusCode.NOT_FOUND:
                    raise
        try:
            await self.handle.terminate(reason=reason or "terminated")
        except RPCError as err:
            raise self._calls.map_rpc(err) from None

    # ------------------------------------------------------------------------------- queries

    async def get_state(self) -> DurableState:
        """The conversation's state as its workflow holds it (a query)."""
        return await self._calls.query("get_state", None, DurableState)

    async def get_messages(self, start: int = 0, end: int | None = None) -> MessagesPage:
        """The messages ``start`` to ``end`` (a page, within the answer's budget), with their entry ids."""
        return await self._calls.query("get_messages", MessagesQuery(start=start, end=end), MessagesPage)

    async def get_session_stats(self) -> SessionStats:
        """The session's statistics (messages, tokens, cost)."""
        return await self._calls.query("get_session_stats", None, SessionStats)

    async def get_queues(self) -> QueuesState:
        """The queued steering and follow-up messages."""
        return await self._calls.query("get_queues", None, QueuesState)

    async def clear_queues(self, queue: QueueName = "all", *, id: str | None = None) -> QueuesState:
        """Empty the ``"steering"`` or ``"follow_up"`` queue, or ``"all"``; returns the messages it
        removed. Nothing is written to the session file (queued messages are not in it yet)."""
        request_id = id or new_id()
        return await self._calls.update(
            UPDATE_CLEAR_QUEUES, ClearQueuesRequest(id=request_id, queue=queue), request_id, QueuesState
        )

    async def clear_steering_queue(self) -> QueuesState:
        """Empty the steering queue; returns the messages it removed."""
        return await self.clear_queues("steering")

    async def clear_follow_up_queue(self) -> QueuesState:
        """Empty the follow-up queue; returns the messages it removed."""
        return await self.clear_queues("follow_up")

    async def clear_all_queues(self) -> QueuesState:
        """Empty both queues; returns the messages they held."""
        return await self.clear_queues("all")

    async def has_queued_messages(self) -> bool:
        """Whether a steering or follow-up message is queued."""
        queues = await self.get_queues()
        return bool(queues.steering or queues.follow_up)

    # ------------------------------------------------------------------------------- events

    def events(
        self,
        from_offset: int = 0,
        *,
        poll_cooldown: timedelta = timedelta(0),
        reconnect_timeout: timedelta | None = RECONNECT_TIMEOUT,
    ) -> AsyncIterator[tuple[int, AgentEvent]]:
        """Every event from ``from_offset`` on, with its offset, following continue-as-new.

        Resume after a disconnect by passing the last offset seen plus one: nothing is lost or repeated
        (as long as the offset is still retained by the workflow: older ones are skipped, with a
        warning). The iterator does that itself when a poll fails on the way (the server restarting or overloaded: unavailable, timed out): it
        polls again from the next offset, backing off, until ``reconnect_timeout`` passes without a
        poll getting through (None: forever); then the last error is raised.

        ``poll_cooldown`` is the pause before the next long-poll once caught up. None by default: a
        pause delays the event published just after it, and a turn's publishes come further apart
        than any useful pause, so it batches nothing (bench/log/004-subscriber-poll-cooldown.md: one
        conversation's tool turn p50 / p99 100 / 180 ms with 20 ms, 84 / 113 ms with none; burst
        throughput the same)."""
        return self._events.events(
            from_offset, poll_cooldown=poll_cooldown, reconnect_timeout=reconnect_timeout
        )

    async def event_offset(self) -> int:
        """The offset the next event will have: ``events`` or ``subscribe`` from it to see only what
        comes next."""
        return await self._events.offset()

    async def subscribe(self, listener: Listener, *, from_offset: int | None = None) -> Callable[[], None]:
        """Call ``listener(event, signal)`` for every event from now on (or ``from_offset``), in order.

        Returns the unsubscribe function. Listeners may be sync or async. A listener that raises is
        logged and goes on receiving events: it observes the conversation from afar and cannot fail
        its run (the in-process ``Agent``'s listeners run inside the run, and fail it)."""
        return await self._events.subscribe(listener, from_offset=from_offset)

    async def close(self) -> None:
        """Stop every subscription of this handle."""
        await self._events.close()
