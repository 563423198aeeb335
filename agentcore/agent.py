"""``Agent``: the stateful in-process facade over the loop (SPEC-6.1), pi's ``Agent`` in Python.

It owns the transcript and the queues, runs ``agent_loop`` one run at a time, folds every event into
its ``AgentState`` (the reducer below) and hands events to subscribers, awaited in order, before the
next event is processed: a listener that is slow to persist a message holds the run back instead of
racing it.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from .agent_input import PromptInput, drain, in_process_tools, prompt_messages, queued_message
from .approvals import STEERED_REASON, ApprovalGate, PendingApproval
from .compaction import CompactionSettings, compact_messages
from .errors import (
    RATE_LIMITED,
    AgentBusyError,
    InvalidMessageRoleError,
    RateLimitError,
    WakeupLimitError,
    WakeupNotFoundError,
)
from .events import (
    AgentEndEvent,
    AgentEvent,
    CompactionReason,
    MessageEndEvent,
    MessageStartEvent,
    ToolExecutionEndEvent,
    TurnEndEvent,
    WakeupCancelledEvent,
    WakeupFiredEvent,
)
from .inprocess import InProcessRuntime
from .loop import (
    AgentContext,
    AgentLoopConfig,
    agent_loop,
    agent_loop_continue,
    failed_message,
    skipping_first_poll,
)
from .messages import (
    AssistantMessage,
    ImageContent,
    Message,
    ToolCall,
    parse_message,
)
from .model import Model, QueueMode, ThinkingLevel, parse_thinking_level
from .protocol import ConversationLimits, Idle, within_last_minute
from .providers.errors import is_context_overflow
from .runtime import AbortSignal, StreamFn, ToolUpdate
from .state import AgentOptions, AgentState
from .subagents import SubagentCall, SubagentPlace
from .tools import AgentTool, AgentToolResult, ToolSpec
from .wakeups import (
    Cancelled,
    Wakeup,
    WakeupId,
    check_note,
    due_time,
    is_wakeup_tool,
    lateness,
    plan_tool_wakeup,
    scheduled_event,
    subagent_refusal,
    wakeup_message,
)

__all__ = ["Agent", "Listener"]

logger = logging.getLogger(__name__)

Listener = Callable[[AgentEvent, AbortSignal], "None | Awaitable[None]"]

_BUSY = "Agent is already processing a prompt. Use steer() or follow_up() to queue messages, or wait for it to finish."


class Agent:
    """An agent with a conversation. ``Agent(AgentOptions(...))`` or ``Agent(model=..., tools=[...])``.

    As a durable conversation does, it takes ``limits`` (SPEC-9.1: messages held and per minute,
    concurrent tool calls) and ``compaction`` (when to summarise the older part of a long context),
    and activates tools a tool result names (``added_tool_names``) from ``available_tools``.
    """

    def __init__(
        self,
        options: AgentOptions | None = None,
        /,
        *,
        limits: ConversationLimits | None = None,
        compaction: CompactionSettings | None = None,
        available_tools: Sequence[AgentTool] = (),
        **fields: Any,
    ) -> None:
        if options is None:
            options = AgentOptions(**fields)
        elif fields:
            raise TypeError("pass either an AgentOptions or keyword fields, not both")
        self._options = options
        self.limits = limits or ConversationLimits()
        self.compaction = compaction or CompactionSettings()
        self.available_tools: list[AgentTool] = list(available_tools)
        # When messages were accepted (ms), for the per-minute limit.
        self._recent_message_times: list[int] = []
        self._state = AgentState(
            system_prompt=options.system_prompt,
            model=options.model,
            thinking_level=options.thinking_level,
            tools=in_process_tools(options.tools),
            messages=list(options.messages),
        )
        self.steering_mode: QueueMode = options.steering_mode
        self.follow_up_mode: QueueMode = options.follow_up_mode
        self.tool_execution = options.tool_execution
        self.stream_fn: StreamFn | None = options.stream_fn
        self._runtime = InProcessRuntime(None)
        self._listeners: list[Listener] = []
        self._steering_queue: list[Message] = []
        self._follow_up_queue: list[Message] = []
        self._signal: AbortSignal | None = None
        self._approvals = ApprovalGate()
        # A sub-agent's place below the agent whose tool runs it (``nested``); this one is top-level.
        self._place = SubagentPlace()
        self._idle = asyncio.Event()
        self._idle.set()
        # Wake-ups: asyncio timers, gone with the process (the durable runtime's are workflow timers).
        self._wakeups: dict[str, Wakeup] = {}
        self._wakeup_timers: dict[str, asyncio.Task[None]] = {}
        # Wake-ups the model's ``wakeup_tool`` calls scheduled, announced after the call's end event.
        self._tool_wakeups: dict[str, Wakeup] = {}
        self._notifying: asyncio.Task[None] | None = None

    # -------------------------------------------------------------------------------- state

    def get_state(self) -> AgentState:
        """A snapshot: changing it does not change the agent."""
        return self._state.model_copy(
            update={
                "tools": list(self._state.tools),
                "messages": list(self._state.messages),
                "pending_tool_calls": set(self._state.pending_tool_calls),
                "wakeups": sorted(self._wakeups.values(), key=lambda wakeup: wakeup.due_at),
                "pending_approvals": self._approvals.pending(),
            }
        )

    @property
    def is_streaming(self) -> bool:
        return self._state.is_streaming

    @property
    def system_prompt(self) -> str:
        return self._state.system_prompt

    @system_prompt.setter
    def system_prompt(self, value: str) -> None:
        self._state.system_prompt = value

    @property
    def model(self) -> Model:
        return self._state.model

    @model.setter
    def model(self, value: Model) -> None:
        self._state.model = value

    @property
    def thinking_level(self) -> ThinkingLevel:
        return self._state.thinking_level

    @thinking_level.setter
    def thinking_level(self, value: ThinkingLevel | str) -> None:
        self._state.thinking_level = parse_thinking_level(value)

    @property
    def tools(self) -> list[AgentTool | ToolSpec]:
        return list(self._state.tools)

    @tools.setter
    def tools(self, value: Sequence[AgentTool | ToolSpec]) -> None:
        self._state.tools = in_process_tools(value)

    @property
    def messages(self) -> list[Message]:
        return list(self._state.messages)

    @messages.setter
    def messages(self, value: Sequence[Message | dict[str, Any]]) -> None:
        self._state.messages = [parse_message(message) for message in value]

    # ----------------------------------------------------------------------------- commands

    async def prompt(
        self, input: PromptInput, images: Sequence[ImageContent | dict[str, Any]] | None = None
    ) -> None:
        """Start a run with new user input and return when it ends. Raises ``AgentBusyError`` if a
        run is active (queue with ``steer``/``follow_up`` instead)."""
        if self._state.is_streaming:
            raise AgentBusyError(_BUSY)
        messages = prompt_messages(input, images, self._runtime.now_ms())
        self._check_limits(len(messages))
        self._count_messages(len(messages))
        await self._run(messages)

    async def run(
        self, input: PromptInput, images: Sequence[ImageContent | dict[str, Any]] | None = None
    ) -> Idle:
        """``prompt``, answered with the run's messages, the answer last (``Idle.messages``, from
        ``Idle.start``): the same call as ``DurableAgent.run``. (A context compacted during the run
        holds fewer messages: then those from the compaction's summary on.)"""
        start = len(self._state.messages)
        await self.prompt(input, images)
        messages = self._state.messages
        start = min(start, len(messages))
        return Idle(id="", message_count=len(messages), messages=list(messages[start:]), start=start)

    async def continue_(self) -> None:
        """Continue from the transcript as it stands (pi's ``continue``).

        After a user message or tool result the model answers it. After an assistant message there is
        nothing to answer unless messages are queued: steering first, then follow-ups.
        """
        if self._state.is_streaming:
            raise AgentBusyError(_BUSY)
        if not self._state.messages:
            raise InvalidMessageRoleError("No messages to continue from")
        last_is_assistant = self._state.messages[-1].role == "assistant"
        if last_is_assistant and not self.has_queued_messages():
            raise InvalidMessageRoleError("Cannot continue from message role: assistant")
        # A run adds at least its answer (SPEC-9.1, as a durable conversation refuses it).
        self._check_limits(1)
        if last_is_assistant:
            queued = drain(self._steering_queue, self.steering_mode)
            if queued:
                # These steering messages are the prompt; polling steering again at once would
                # pull the next queued one into the same turn, against one-at-a-time.
                await self._run(queued, skip_initial_steering=True)
                return
            queued = drain(self._follow_up_queue, self.follow_up_mode)
            if queued:
                await self._run(queued)
                return
            raise InvalidMessageRoleError("Cannot continue from message role: assistant")
        await self._run(None)

    def steer(self, message: str | Message | dict[str, Any]) -> None:
        """Queue a message for the running agent; it is delivered after the current turn's tools.
        Tool calls waiting for approval are denied: the user said something else instead. Raises
        ``RateLimitError`` over a SPEC-9.1 limit; nothing is then queued (nor denied)."""
        queued = queued_message(message, self._runtime.now_ms())
        self._check_limits(1)
        self._steering_queue.append(queued)
        self._count_messages(1)
        self._approvals.deny_all(STEERED_REASON)

    def follow_up(self, message: str | Message | dict[str, Any]) -> None:
        """Queue a message for when the agent would otherwise stop.

        Raises ``RateLimitError`` over a SPEC-9.1 limit; nothing is then queued."""
        queued = queued_message(message, self._runtime.now_ms())
        self._check_limits(1)
        self._follow_up_queue.append(queued)
        self._count_messages(1)

    def clear_steering_queue(self) -> None:
        self._steering_queue.clear()

    def clear_follow_up_queue(self) -> None:
        self._follow_up_queue.clear()

    def clear_all_queues(self) -> None:
        self.clear_steering_queue()
        self.clear_follow_up_queue()

    def has_queued_messages(self) -> bool:
        return bool(self._steering_queue or self._follow_up_queue)

    def pending_approvals(self) -> list[PendingApproval]:
        """Tool calls waiting for a person (tools with ``requires_approval``), oldest first."""
        return self._approvals.pending()

    def approve(self, tool_call_id: str, args: dict[str, Any] | None = None) -> None:
        """Let a waiting tool call run; with ``args`` it runs with those instead of the model's.

        Raises ``ApprovalNotFoundError`` (no such call waits), ``ApprovalAlreadyResolvedError`` (it
        was decided otherwise) or ``InvalidParametersError`` (``args`` fail the tool's parameters).
        Approving again the same way is a no-op."""
        self._approvals.approve(tool_call_id, args)

    def deny(self, tool_call_id: str, reason: str = "") -> None:
        """Refuse a waiting tool call: its result is a ``TOOL_DENIED`` error the model reads, with
        ``reason``. Raises as ``approve`` does."""
        self._approvals.deny(tool_call_id, reason)

    def abort(self) -> None:
        """Stop the active run: the model call ends with ``stop_reason="aborted"`` (partial text kept),
        running tools get ``EXECUTION_ABORTED`` results."""
        if self._signal is not None:
            self._signal.abort()

    async def wait_for_idle(self) -> None:
        """Return once no run is active and every listener of its ``agent_end`` has finished."""
        await self._idle.wait()

    def reset(self) -> None:
        """Forget the conversation, the queues and any error. Refused while a run is active."""
        if self._state.is_streaming:
            raise AgentBusyError(
                "Cannot reset while the agent is running; abort() and wait_for_idle() first."
            )
        self._state.messages = []
        self._state.streaming_message = None
        self._state.pending_tool_calls = set()
        self._state.error_message = None
        self.clear_all_queues()
        for wakeup_id in list(self._wakeups):
            self._cancel_wakeup(wakeup_id, "reset")

    # ----------------------------------------------------------------------------- wake-ups

    def schedule_wakeup(
        self, note: str, *, at: datetime | None = None, after: timedelta | None = None
    ) -> WakeupId:
        """Run again at ``at`` (a datetime; naive means local time) or ``after`` a while, with a user
        message carrying ``note``; taken as a follow-up if a run is going then. Returns its id
        (awaitable too, like the durable runtime's). Refuses a time not in the future
        (``WakeupInPastError``) and more than ``limits.max_pending_wakeups`` pending.

        In-process a wake-up is an asyncio timer: it needs the event loop running and is lost with
        the process. A durable conversation's survives restarts."""
        now = datetime.now(UTC)
        due = due_time(now, at, after)
        check_note(note)
        if len(self._wakeups) >= self.limits.max_pending_wakeups:
            raise WakeupLimitError(
                f"{len(self._wakeups)} wake-ups are pending; the limit is {self.limits.max_pending_wakeups}"
            )
        wakeup = Wakeup(id=uuid.uuid4().hex, note=note, due_at=due, scheduled_at=now)
        self._hold_wakeup(wakeup)
        self._notify(scheduled_event(wakeup))
        return WakeupId(wakeup.id)

    def cancel_wakeup(self, wakeup_id: str) -> Cancelled:
        """Cancel a pending wake-up; ``WakeupNotFoundError`` if none has that id (awaitable, like the
        durable runtime's)."""
        if wakeup_id not in self._wakeups:
            raise WakeupNotFoundError(f"no pending wake-up with id {wakeup_id!r}")
        self._cancel_wakeup(wakeup_id, "cancelled")
        return Cancelled()

    def _hold_wakeup(self, wakeup: Wakeup) -> None:
        self._wakeups[wakeup.id] = wakeup
        self._wakeup_timers[wakeup.id] = asyncio.get_running_loop().create_task(
            self._wake_at(wakeup), name=f"wake-up {wakeup.id}"
        )

    def _cancel_wakeup(self, wakeup_id: str, reason: str) -> None:
        wakeup = self._wakeups.pop(wakeup_id)
        self._wakeup_timers.pop(wakeup_id).cancel()
        self._notify(
            WakeupCancelledEvent(id=wakeup.id, note=wakeup.note, due_at=wakeup.due_at, reason=reason)
        )

    async def _wake_at(self, wakeup: Wakeup) -> None:
        await asyncio.sleep(max(0.0, (wakeup.due_at - datetime.now(UTC)).total_seconds()))
        # As durably: past the per-minute rate the note waits for the window; a full conversation
        # cancels it, saying why (SPEC-9.1).
        while (refusal := self._limit_refusal(1)) is not None:
            if self._held() + 1 > self.limits.max_messages:
                self._cancel_wakeup(wakeup.id, f"{RATE_LIMITED}: {refusal}")
                return
            window = within_last_minute(self._recent_message_times, self._runtime.now_ms())
            await asyncio.sleep(max(0.001, (window[0] + 60_000 - self._runtime.now_ms()) / 1000))
        del self._wakeups[wakeup.id], self._wakeup_timers[wakeup.id]
        fired_at = datetime.now(UTC)
        message = wakeup_message(wakeup, fired_at)
        fired = WakeupFiredEvent(
            id=wakeup.id, note=wakeup.note, due_at=wakeup.due_at, late_seconds=lateness(wakeup, fired_at)
        )
        if self._state.is_streaming:
            # As the durable runtime does: the event, then the message queued for this run.
            self._notify(fired)
            self._follow_up_queue.append(message)
            self._count_messages(1)
            return
        if self._notifying is not None:
            await asyncio.gather(self._notifying, return_exceptions=True)
        await self._dispatch(fired)
        if self._state.is_streaming:  # a prompt came while the listeners ran
            self._follow_up_queue.append(message)
        else:
            await self._run([message])
        self._count_messages(1)

    def _wakeup_tool_call(self, tool: AgentTool | ToolSpec, call: ToolCall) -> AgentToolResult:
        if self._place.depth > 0:
            return subagent_refusal(tool)
        wakeup, result = plan_tool_wakeup(
            tool,
            call,
            now=datetime.now(UTC),
            new_id=uuid.uuid4().hex,
            pending=len(self._wakeups),
            max_pending=self.limits.max_pending_wakeups,
        )
        if wakeup is not None:
            self._hold_wakeup(wakeup)
            self._tool_wakeups[call.id] = wakeup
        return result

    def _notify(self, event: AgentEvent) -> None:
        """Hand an event that happened outside the run's loop to the listeners, after the ones before
        it (a plain call cannot await them)."""
        previous = self._notifying

        async def deliver() -> None:
            if previous is not None:
                await asyncio.gather(previous, return_exceptions=True)
            await self._dispatch(event)

        self._notifying = asyncio.get_running_loop().create_task(deliver())

    async def _dispatch(self, event: AgentEvent) -> None:
        try:
            await self._process(event, self._signal or AbortSignal())
        except Exception:  # outside a run there is no run to fail
            logger.exception("listener failed on %s", event.type)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event, signal)`` for every event (sync or async; awaited in order).
        Returns a function that unsubscribes."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    # ------------------------------------------------------------------------------ sub-agents

    @property
    def place(self) -> SubagentPlace:
        """Where this agent runs among sub-agents (``SubagentPlace``): top-level unless a tool of
        another agent made it (``nested``)."""
        return self._place

    @property
    def approval_gate(self) -> ApprovalGate:
        """The gate this agent's calls that need a person wait at (a sub-agent's joins its caller's)."""
        return self._approvals

    def nested(self, options: AgentOptions, place: SubagentPlace) -> Agent:
        """The agent a sub-agent tool of this one runs (``subagent_tool``): it starts from its task
        alone, and calls models with this agent's stream function and keys unless ``options`` name
        their own."""
        child = Agent(
            options.model_copy(
                update={
                    "messages": [],
                    "stream_fn": options.stream_fn or self.stream_fn,
                    "get_api_key": options.get_api_key or self._options.get_api_key,
                }
            )
        )
        child._place = place
        return child

    # -------------------------------------------------------------------------------- a run

    async def _run(self, prompts: list[Message] | None, *, skip_initial_steering: bool = False) -> None:
        # Everything up to the first await happens synchronously, so two prompts racing in the same
        # event loop cannot both pass the busy check.
        signal = AbortSignal()
        self._signal = signal
        self._idle.clear()
        state = self._state
        state.is_streaming = True
        state.streaming_message = None
        state.error_message = None

        def steering() -> list[Message]:
            return drain(self._steering_queue, self.steering_mode)

        def follow_ups() -> list[Message]:
            return drain(self._follow_up_queue, self.follow_up_mode)

        options = self._options
        context = AgentContext(
            system_prompt=state.system_prompt, messages=list(state.messages), tools=list(state.tools)
        )
        config = AgentLoopConfig(
            model=state.model,
            thinking_level=state.thinking_level,
            tool_execution=self.tool_execution,
            convert_to_llm=options.convert_to_llm,
            transform_context=options.transform_context,
            get_steering_messages=skipping_first_poll(steering) if skip_initial_steering else steering,
            get_follow_up_messages=follow_ups,
            get_api_key=options.get_api_key,
            max_tokens=options.max_tokens,
            temperature=options.temperature,
            runtime=_AgentRuntime(self.stream_fn, self),
            max_concurrent_tools=self.limits.max_concurrent_tools,
            compact_context=self._compact_context,
            recover_from_overflow=self._recover_from_overflow,
            activate_tools=self._activate_tools,
            approvals=self._approvals,
        )
        try:
            if prompts is None:
                events = agent_loop_continue(context, config, signal)
            else:
                events = agent_loop(prompts, context, config, signal)
            async with contextlib.aclosing(events):
                async for event in events:
                    await self._process(event, signal)
        except Exception as exc:  # a hook or listener failed: end the run the way a provider failure does
            logger.exception("agent run failed")
            await self._fail_run(exc, signal)
        finally:
            state.is_streaming = False
            state.streaming_message = None
            state.pending_tool_calls = set()
            self._signal = None
            self._idle.set()

    async def _compact_context(
        self,
        messages: list[Message],
        signal: AbortSignal,
        emit: Callable[[AgentEvent], None],
        reason: CompactionReason = "threshold",
    ) -> list[Message] | None:
        """The loop's auto-compaction: summarise with this agent's model and stream function."""
        model = self._state.model
        get_api_key = self._options.get_api_key
        api_key = get_api_key(model.provider) if get_api_key is not None else None
        if inspect.isawaitable(api_key):
            api_key = await api_key
        runtime = InProcessRuntime(self.stream_fn)
        compacted = await compact_messages(
            messages,
            model,
            runtime.stream,
            emit,
            new_id=runtime.new_id,
            now_ms=runtime.now_ms,
            settings=self.compaction,
            signal=signal,
            api_key=api_key,
            reason=reason,
        )
        if compacted is not None:
            self._state.messages = list(compacted)
        return compacted

    async def _recover_from_overflow(
        self,
        failed: AssistantMessage,
        messages: list[Message],
        signal: AbortSignal,
        emit: Callable[[AgentEvent], None],
    ) -> list[Message] | None:
        """A context overflow is compacted away (reason ``overflow``) and the call made again, once,
        whether or not the compaction could shorten the context (as a durable conversation does)."""
        if not self.compaction.enabled or not is_context_overflow(failed):
            return None
        compacted = await self._compact_context(messages, signal, emit, "overflow")
        return compacted if compacted is not None else messages

    def _activate_tools(self, names: list[str]) -> list[AgentTool]:
        known = {tool.name: tool for tool in self.available_tools}
        activated = [known[name] for name in names if name in known]
        self._state.tools = [*self._state.tools, *activated]
        return activated

    def _check_limits(self, incoming: int) -> None:
        """RATE_LIMITED (SPEC-9.1) unless ``incoming`` more messages fit; queued messages count as held
        (each becomes a message of the conversation)."""
        refusal = self._limit_refusal(incoming)
        if refusal is not None:
            raise RateLimitError(refusal)

    def _limit_refusal(self, incoming: int) -> str | None:
        return self.limits.refusal(self._held(), self._recent_message_times, self._runtime.now_ms(), incoming)

    def _held(self) -> int:
        return len(self._state.messages) + len(self._steering_queue) + len(self._follow_up_queue)

    def _count_messages(self, count: int) -> None:
        now = self._runtime.now_ms()
        self._recent_message_times = [*within_last_minute(self._recent_message_times, now), *[now] * count]

    async def _fail_run(self, exc: Exception, signal: AbortSignal) -> None:
        message = failed_message(
            self._state.model, str(exc) or type(exc).__name__, signal, self._runtime.now_ms()
        )
        for event in (
            MessageStartEvent(message=message),
            MessageEndEvent(message=message),
            TurnEndEvent(message=message, tool_results=[]),
            AgentEndEvent(messages=[message]),
        ):
            try:
                await self._process(event, signal)
            except Exception:
                logger.exception("listener failed while reporting a failed run")

    async def _process(self, event: AgentEvent, signal: AbortSignal) -> None:
        self._state.apply(event)
        for listener in list(self._listeners):
            result = listener(event, signal)
            if inspect.isawaitable(result):
                await result
        if isinstance(event, ToolExecutionEndEvent) and event.tool_call_id in self._tool_wakeups:
            await self._process(scheduled_event(self._tool_wakeups.pop(event.tool_call_id)), signal)


class _AgentRuntime(InProcessRuntime):
    """The in-process runtime of an ``Agent``'s runs. A ``wakeup_tool`` call and a sub-agent tool's
    call are the agent's to carry out, as the workflow does durably (in the workflow, and as a
    child workflow): the sub-agent runs under this agent, which its ``execute`` learns here. Every
    other call runs its tool."""

    def __init__(self, stream_fn: StreamFn | None, agent: Agent) -> None:
        super().__init__(stream_fn)
        self._agent = agent

    async def run_tool(
        self, tool: AgentTool | ToolSpec, call: ToolCall, signal: AbortSignal, on_update: ToolUpdate
    ) -> AgentToolResult:
        if is_wakeup_tool(tool):
            return self._agent._wakeup_tool_call(tool, call)
        if isinstance(tool, AgentTool) and isinstance(tool.execute, SubagentCall):
            tool = tool.model_copy(update={"execute": tool.execute.under(self._agent)})
        return await super().run_tool(tool, call, signal, on_update)
