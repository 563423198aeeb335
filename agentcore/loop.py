"""The agent loop (SPEC-6.2), pi's semantics, written once for both runtimes.

Everything nondeterministic comes from ``config.runtime``: the clock (``now_ms``), model calls
(``stream``) and tool calls (``run_tool``). Inside a Temporal workflow that runtime is backed by
``workflow.now()`` and activities, so this module must stay replay-safe: no wall clock, no random ids,
no threads, only asyncio primitives that the workflow's deterministic event loop schedules.

One run::

    agent_start, turn_start, (message_start, message_end) per prompt
    repeat while the assistant calls tools or messages are pending:
        [turn_start], pending steering/follow-up messages
        [compaction_start, compaction_end]                       when the context has grown too large
        message_start, message_update*, message_end            the assistant's response
        tool_execution_start/update/end per call                 end events in completion order
        (message_start, message_end) per tool result             in the order the model asked: each
                                                                 after its end event in a sequential
                                                                 batch, after the whole batch in a
                                                                 parallel one
        turn_end(message, tool_results)
        poll steering (unless aborted: then queued messages stay queued for the next run)
    poll follow-ups when the agent would otherwise stop
    agent_end(new messages)
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .approvals import ApprovalGate, PendingApproval
from .errors import (
    APPROVAL_TIMEOUT,
    EXECUTION_ERROR,
    TOOL_CALL_TRUNCATED,
    TOOL_DENIED,
    TOOL_NOT_FOUND,
    InvalidMessageRoleError,
)
from .events import (
    AgentEndEvent,
    AgentEvent,
    AgentStartEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ToolApprovalRequestedEvent,
    ToolApprovalResolvedEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    TurnEndEvent,
    TurnStartEvent,
    delta_payload,
)
from .inprocess import InProcessRuntime
from .messages import (
    AssistantContent,
    AssistantMessage,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
)
from .model import Model, ThinkingLevel, ToolExecutionMode
from .runtime import AbortSignal, LlmContext, Runtime, StreamFn, StreamOptions
from .state import MAX_CONCURRENT_TOOL_CALLS, ConvertToLlm, GetApiKey, TransformContext
from .tool_exec import aborted_result, check_arguments, error_result
from .tools import AgentTool, AgentToolResult, ToolSpec

__all__ = [
    "AgentContext",
    "AgentLoopConfig",
    "agent_loop",
    "agent_loop_continue",
    "agent_loop_resume",
    "default_convert_to_llm",
    "failed_message",
    "skipping_first_poll",
    "stream_assistant_response",
]

GetMessages = Callable[[], "Sequence[Message] | Awaitable[Sequence[Message]]"]
EmitEvent = Callable[[AgentEvent], None]
# compact_context(messages, signal, emit): compact the context before a model call when it has grown
# too large, emitting compaction_start / compaction_end; returns the messages to go on with, or None.
CompactContext = Callable[[list[Message], AbortSignal, EmitEvent], "Awaitable[Sequence[Message] | None]"]
# recover_from_overflow(failed, messages, signal, emit): after a model call failed with ``failed``: when
# that is a context overflow, compact the context (emitting compaction_start / compaction_end) and
# return the messages to make the call again on, once (pi's rule); None: the failure stands.
RecoverFromOverflow = Callable[
    [AssistantMessage, list[Message], AbortSignal, EmitEvent], "Awaitable[Sequence[Message] | None]"
]
# activate_tools(names): the tools (of those named by tool results' ``added_tool_names``, not yet
# active) that the caller knows and has activated; the next model call sees them.
ActivateTools = Callable[
    [list[str]], "Sequence[AgentTool | ToolSpec] | Awaitable[Sequence[AgentTool | ToolSpec]]"
]
ShouldStopAfterTurn = Callable[[AssistantMessage, list[ToolResultMessage]], "bool | Awaitable[bool]"]
Emit = Callable[[AgentEvent], "None | Awaitable[None]"]

_T = TypeVar("_T")
_LLM_ROLES = frozenset({"user", "assistant", "toolResult"})


@dataclass
class AgentContext:
    """What a run starts from. The loop works on a copy of ``messages``; the caller learns about new
    messages from the events (``message_end``) or from ``agent_end.messages``."""

    system_prompt: str = ""
    messages: list[Message] = field(default_factory=list)
    tools: list[AgentTool | ToolSpec] = field(default_factory=list)


@dataclass
class AgentLoopConfig:
    """How a run calls the model and schedules tools, plus pi's hooks (sync or async callables)."""

    model: Model
    thinking_level: ThinkingLevel = ThinkingLevel.OFF
    tool_execution: ToolExecutionMode = ToolExecutionMode.PARALLEL
    # Both run before every model call: transform_context(messages, signal) on agent messages (prune,
    # inject), then convert_to_llm(messages) down to what the provider understands.
    convert_to_llm: ConvertToLlm | None = None
    transform_context: TransformContext | None = None
    # Queue drains: polled at the start and after each turn (steering), and when the agent would
    # stop (follow-ups). One-at-a-time vs all is the caller's policy.
    get_steering_messages: GetMessages | None = None
    get_follow_up_messages: GetMessages | None = None
    runtime: Runtime | None = None
    get_api_key: GetApiKey | None = None
    api_key: str | None = field(default=None, repr=False)
    max_tokens: int | None = None
    temperature: float | None = None
    session_id: str | None = None
    max_concurrent_tools: int = MAX_CONCURRENT_TOOL_CALLS
    should_stop_after_turn: ShouldStopAfterTurn | None = None
    compact_context: CompactContext | None = None
    recover_from_overflow: RecoverFromOverflow | None = None
    activate_tools: ActivateTools | None = None
    # Where calls of tools that ``requires_approval`` wait for a person (the caller's, so that it can
    # take decisions); None: a gate of the run's own, which only a timeout or the abort releases.
    approvals: ApprovalGate | None = None


def skipping_first_poll(get_messages: GetMessages) -> GetMessages:
    """``get_messages`` whose first poll finds nothing: pi's rule for a run whose prompt is steering
    taken from the queue (``continue_`` after an assistant message). Polling at once would pull the
    next queued message into the same turn, against one-at-a-time."""
    skipped = False

    def poll() -> Sequence[Message] | Awaitable[Sequence[Message]]:
        nonlocal skipped
        if not skipped:
            skipped = True
            return []
        return get_messages()

    return poll


def default_convert_to_llm(messages: list[Message]) -> list[Message]:
    """Keep what a model understands: user, assistant and tool result messages."""
    return [message for message in messages if message.role in _LLM_ROLES]


def agent_loop(
    prompts: Sequence[Message],
    context: AgentContext,
    config: AgentLoopConfig,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
) -> AsyncGenerator[AgentEvent, None]:
    """Run the agent on new ``prompts`` after ``context``; yields every event of the run.

    ``stream_fn`` is used only when ``config.runtime`` is None (then an ``InProcessRuntime`` runs it).
    """
    return _Run(context, config, signal, stream_fn).events(list(prompts))


def agent_loop_continue(
    context: AgentContext,
    config: AgentLoopConfig,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
) -> AsyncGenerator[AgentEvent, None]:
    """Run the agent from ``context`` as it stands (after a tool result, or a user message already in it).

    Raises ``InvalidMessageRoleError`` at once (not on first iteration) when there is nothing to
    answer: an empty context, or one that ends with an assistant message.
    """
    if not context.messages:
        raise InvalidMessageRoleError("Cannot continue: no messages in context")
    if context.messages[-1].role == "assistant":
        raise InvalidMessageRoleError("Cannot continue from message role: assistant")
    return _Run(context, config, signal, stream_fn).events(None)


def agent_loop_resume(
    context: AgentContext,
    config: AgentLoopConfig,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
) -> AsyncGenerator[AgentEvent, None]:
    """Run the tool calls of the context's last assistant message (none answered yet), then go on
    as a run does: how a conversation recovered while its calls waited for approval asks again."""
    last = context.messages[-1] if context.messages else None
    if not isinstance(last, AssistantMessage) or not last.tool_calls:
        raise InvalidMessageRoleError("Cannot resume: the last message is not an assistant's tool calls")
    return _Run(context, config, signal, stream_fn).events(None, resume=last)


async def stream_assistant_response(
    context: AgentContext,
    config: AgentLoopConfig,
    signal: AbortSignal | None = None,
    emit: Emit | None = None,
    stream_fn: StreamFn | None = None,
) -> AssistantMessage:
    """One model call: ``emit`` gets message_start/update/end; the final message is appended to
    ``context.messages`` and returned. Never raises for provider failures (see the run docs)."""
    run = _Run(context, config, signal, stream_fn)
    final: AssistantMessage | None = None
    async for event in run.stream_response():
        if emit is not None:
            await _maybe_await(emit(event))
        if isinstance(event, MessageEndEvent) and isinstance(event.message, AssistantMessage):
            final = event.message
    assert final is not None  # stream_response always ends with message_end
    context.messages.append(final)
    return final


def failed_message(
    model: Model,
    error_message: str,
    signal: AbortSignal,
    timestamp: int,
    content: Sequence[AssistantContent] = (),
) -> AssistantMessage:
    """pi's synthetic assistant message for a run that failed by exception instead of by result:
    ``stop_reason`` is "aborted" when the signal fired (the exception is then a symptom of the
    abort), else "error"."""
    return AssistantMessage(
        content=list(content),
        api=model.api,
        provider=model.provider,
        model=model.id,
        stop_reason="aborted" if signal.aborted else "error",
        error_message=error_message,
        timestamp=timestamp,
    )


async def _maybe_await(value: _T | Awaitable[_T]) -> _T:
    if inspect.isawaitable(value):
        return await value
    return value


@dataclass
class _Batch:
    results: list[ToolResultMessage] = field(default_factory=list)
    terminate: bool = False


class _Run:
    """One run's mutable state. Not reused across runs."""

    def __init__(
        self,
        context: AgentContext,
        config: AgentLoopConfig,
        signal: AbortSignal | None,
        stream_fn: StreamFn | None,
    ) -> None:
        self.config = config
        self.runtime: Runtime = config.runtime if config.runtime is not None else InProcessRuntime(stream_fn)
        self.signal = signal if signal is not None else AbortSignal()
        self.system_prompt = context.system_prompt
        self.messages: list[Message] = list(context.messages)
        self.tools = list(context.tools)
        self.new_messages: list[Message] = []
        self._tool_specs: list[ToolSpec] | None = None
        self._approvals = config.approvals
        self._compacted = False  # whether the last compaction gave messages to go on with

    # ------------------------------------------------------------------------------------- turns

    async def events(
        self, prompts: list[Message] | None, resume: AssistantMessage | None = None
    ) -> AsyncGenerator[AgentEvent, None]:
        yield AgentStartEvent()
        yield TurnStartEvent()
        for prompt in prompts or ():
            for event in self._add_message(prompt):
                yield event
        async for event in self._turns(resume):
            yield event

    def _add_message(self, message: Message) -> tuple[AgentEvent, AgentEvent]:
        self.messages.append(message)
        self.new_messages.append(message)
        return MessageStartEvent(message=message), MessageEndEvent(message=message)

    async def _turns(self, resume: AssistantMessage | None = None) -> AsyncIterator[AgentEvent]:
        first_turn = True
        pending = [] if resume is not None else await self._poll(self.config.get_steering_messages)
        while True:
            has_more_tool_calls = True
            while has_more_tool_calls or pending:
                if first_turn:
                    first_turn = False
                else:
                    yield TurnStartEvent()
                for message in pending:
                    for event in self._add_message(message):
                        yield event
                pending = []

                if resume is not None:
                    assistant = resume
                    resume = None  # its tool calls run now; the message is in the context already
                else:
                    answers: list[AssistantMessage] = []
                    async for event in self._answer(answers):
                        yield event
                    assistant = answers[0]

                if assistant.stop_reason in ("error", "aborted"):
                    yield TurnEndEvent(message=assistant, tool_results=[])
                    yield AgentEndEvent(messages=self.new_messages)
                    return

                batch = _Batch()
                has_more_tool_calls = bool(assistant.tool_calls)
                if has_more_tool_calls:
                    async for event in self._tool_batch(assistant, batch):
                        yield event
                    self.messages.extend(batch.results)
                    self.new_messages.extend(batch.results)
                    has_more_tool_calls = not batch.terminate
                    await self._activate_added_tools(batch.results)
                yield TurnEndEvent(message=assistant, tool_results=batch.results)

                stop = self.config.should_stop_after_turn
                if stop is not None and await _maybe_await(stop(assistant, batch.results)):
                    yield AgentEndEvent(messages=self.new_messages)
                    return
                pending = await self._poll(self.config.get_steering_messages)

            pending = await self._poll(self.config.get_follow_up_messages)
            if not pending:
                break
        yield AgentEndEvent(messages=self.new_messages)

    async def _answer(self, answers: list[AssistantMessage]) -> AsyncIterator[AgentEvent]:
        """The model's next answer (compacting the context first if asked to): its events, then the
        message appended to the context and to ``answers``."""
        if self.config.compact_context is not None and not self.signal.aborted:
            async for event in self._compact(self.config.compact_context):
                yield event
        assistant: AssistantMessage | None = None
        async for event in self.stream_response():
            yield event
            if isinstance(event, MessageEndEvent) and isinstance(event.message, AssistantMessage):
                assistant = event.message
        assert assistant is not None
        self.messages.append(assistant)
        self.new_messages.append(assistant)
        answers.append(assistant)

    async def _poll(self, getter: GetMessages | None) -> list[Message]:
        # pi checks the abort before it polls: an aborted run must not take queued messages it will
        # never answer; they stay queued for the next ``continue_`` or ``prompt``.
        if getter is None or self.signal.aborted:
            return []
        return list(await _maybe_await(getter()) or ())

    async def _compact(self, compact: CompactContext) -> AsyncIterator[AgentEvent]:
        async for event in self._compacting(lambda emit: compact(list(self.messages), self.signal, emit)):
            yield event

    async def _compacting(
        self, compact: Callable[[EmitEvent], Awaitable[Sequence[Message] | None]]
    ) -> AsyncIterator[AgentEvent]:
        """The compaction's events as it runs; the run goes on from the messages it returns, if any."""
        compacted: list[Sequence[Message] | None] = [None]

        async def work(emit: EmitEvent) -> None:
            compacted[0] = await compact(emit)

        async for event in _while_running(work):
            yield event
        self._compacted = compacted[0] is not None
        if compacted[0] is not None:
            self.messages = list(compacted[0])

    async def _activate_added_tools(self, results: list[ToolResultMessage]) -> None:
        """SPEC-3.2 ``added_tool_names``: tools a result names become available from the next call on."""
        if self.config.activate_tools is None:
            return
        active = {tool.name for tool in self.tools}
        wanted = list(
            dict.fromkeys(
                name for result in results for name in result.added_tool_names or () if name not in active
            )
        )
        if not wanted:
            return
        activated = await _maybe_await(self.config.activate_tools(wanted))
        added = [tool for tool in activated or () if tool.name not in active]
        if added:
            self.tools.extend(added)
            self._tool_specs = None

    # ------------------------------------------------------------------------------ model calls

    async def stream_response(self) -> AsyncIterator[AgentEvent]:
        """message_start, message_update*, message_end for one model call; the last event is always
        a ``message_end`` carrying the final ``AssistantMessage``."""
        if self.signal.aborted:
            # Already aborted (e.g. during the tool batch): don't call the model at all, in any
            # runtime, so the in-process and durable transcripts agree exactly.
            aborted = self._failure("Request was aborted", None)
            yield MessageStartEvent(message=aborted)
            yield MessageEndEvent(message=aborted)
            return
        started = False
        final: AssistantMessage | None = None
        for attempt in range(2):
            async for event in self._stream_once(started):
                if isinstance(event, AssistantMessage):
                    final = event
                else:
                    started = started or isinstance(event, MessageStartEvent)
                    yield event
            assert final is not None
            recover = self.config.recover_from_overflow
            if attempt or recover is None or final.stop_reason != "error" or self.signal.aborted:
                break
            # A context overflow is compacted, then the call made once more on the smaller context
            # (its events continue the same message, as a durable conversation's do).
            recovering = functools.partial(recover, final, list(self.messages), self.signal)
            async for event in self._compacting(recovering):
                yield event
            if not self._compacted:
                break  # not an overflow: the failure stands
            if self.signal.aborted:
                final = self._failure("Request was aborted", None)
                break
        if not started:
            yield MessageStartEvent(message=final)
        yield MessageEndEvent(message=final)

    async def _stream_once(self, started: bool) -> AsyncIterator[AgentEvent | AssistantMessage]:
        """One model call's message_start / message_update events (message_start unless ``started``),
        then its final message."""
        partial: AssistantMessage | None = None
        final: AssistantMessage | None = None
        stream: AsyncIterator[Any] | None = None
        try:
            context = await self._llm_context()
            options = StreamOptions(
                thinking_level=self.config.thinking_level,
                api_key=await self._api_key(),
                max_tokens=self.config.max_tokens,
                temperature=self.config.temperature,
                session_id=self.config.session_id,
                signal=self.signal,
            )
            stream = self.runtime.stream(self.config.model, context, options)
            async for event in stream:
                if final is not None:
                    continue  # nothing may follow done/error; drain so the provider finishes cleanly
                if event.type == "done":
                    final = event.message
                elif event.type == "error":
                    final = event.error
                    if final.stop_reason not in ("error", "aborted"):
                        final = final.model_copy(update={"stop_reason": event.reason})
                else:
                    partial = event.partial
                    if not started:
                        started = True
                        yield MessageStartEvent(message=event.partial)
                    if event.type != "start":
                        yield MessageUpdateEvent(
                            assistant_message_event=delta_payload(event), message=event.partial
                        )
            if final is None:
                final = self._failure("the model stream ended without a done or error event", partial)
        except Exception as exc:
            final = self._failure(str(exc) or type(exc).__name__, partial)
        finally:
            # The consumer stopped early (closed this generator at a yield): let the provider clean
            # up. A stream still inside a step of its own was not stopped by the consumer: the run
            # was closed from outside, by Python's garbage collector, which closes each generator on
            # its own (a worker that stops leaves its cached workflows to it); it cannot be closed
            # from here ("aclose(): asynchronous generator is already running").
            aclose = getattr(stream, "aclose", None)
            if final is None and aclose is not None and not getattr(stream, "ag_running", False):
                await aclose()
        yield final

    def _failure(self, error_message: str, partial: AssistantMessage | None) -> AssistantMessage:
        # Streamed text and thinking are kept (the user saw them); a half-streamed tool call is not.
        kept = (
            [block for block in partial.content if isinstance(block, TextContent | ThinkingContent)]
            if partial
            else []
        )
        return failed_message(
            self.config.model, error_message, self.signal, self.runtime.now_ms(), content=kept
        )

    async def _llm_context(self) -> LlmContext:
        messages = self.messages
        if self.config.transform_context is not None:
            messages = list(await _maybe_await(self.config.transform_context(list(messages), self.signal)))
        convert = self.config.convert_to_llm or default_convert_to_llm
        llm_messages = list(await _maybe_await(convert(messages)))
        if self._tool_specs is None:
            self._tool_specs = [tool.spec() if isinstance(tool, AgentTool) else tool for tool in self.tools]
        # model_construct: the messages are validated already; re-validating the whole transcript on
        # every turn would make each turn cost O(conversation).
        return LlmContext.model_construct(
            system_prompt=self.system_prompt, messages=llm_messages, tools=list(self._tool_specs)
        )

    async def _api_key(self) -> str | None:
        if self.config.get_api_key is not None:
            key = await _maybe_await(self.config.get_api_key(self.config.model.provider))
            if key:
                return key
        return self.config.api_key

    # ------------------------------------------------------------------------------------ tools

    async def _tool_batch(self, assistant: AssistantMessage, batch: _Batch) -> AsyncIterator[AgentEvent]:
        calls = assistant.tool_calls
        tools = {tool.name: tool for tool in self.tools}
        sequential = self.config.tool_execution == ToolExecutionMode.SEQUENTIAL or any(
            (tool := tools.get(call.name)) is not None and tool.execution_mode == ToolExecutionMode.SEQUENTIAL
            for call in calls
        )
        outcomes: list[tuple[AgentToolResult, ToolResultMessage] | None] = [None] * len(calls)
        truncated = assistant.stop_reason == "length"
        gate = asyncio.Semaphore(max(1, self.config.max_concurrent_tools))

        async def run_call(index: int, call: ToolCall, emit: EmitEvent) -> None:
            emit(ToolExecutionStartEvent(tool_call_id=call.id, tool_name=call.name, args=call.arguments))
            result = await self._execute_call(call, tools.get(call.name), truncated, emit)
            outcomes[index] = (result, self._result_message(call, result))
            emit(
                ToolExecutionEndEvent(
                    tool_call_id=call.id, tool_name=call.name, result=result, is_error=result.is_error
                )
            )

        if sequential:
            # pi: a call's result message follows its end event at once, and the next call starts
            # only after both were handled, so the state holds result 0 before tool 1 runs.
            for index, call in enumerate(calls):
                async for event in _while_running(functools.partial(run_call, index, call)):
                    yield event
                outcome = outcomes[index]
                assert outcome is not None
                for event in (MessageStartEvent(message=outcome[1]), MessageEndEvent(message=outcome[1])):
                    yield event
        else:

            async def gated(index: int, call: ToolCall, emit: EmitEvent) -> None:
                async with gate:
                    await run_call(index, call, emit)

            async def run_all(emit: EmitEvent) -> None:
                await asyncio.gather(*(gated(index, call, emit) for index, call in enumerate(calls)))

            # end events in completion order, result messages after the batch in the order asked
            async for event in _while_running(run_all):
                yield event
            for outcome in outcomes:
                assert outcome is not None
                for event in (MessageStartEvent(message=outcome[1]), MessageEndEvent(message=outcome[1])):
                    yield event
        batch.results = [outcome[1] for outcome in outcomes if outcome is not None]
        batch.terminate = all(outcome is not None and outcome[0].terminate for outcome in outcomes)

    def _result_message(self, call: ToolCall, result: AgentToolResult) -> ToolResultMessage:
        return ToolResultMessage(
            tool_call_id=call.id,
            tool_name=call.name,
            content=result.content,
            details=result.details,
            usage=result.usage,
            added_tool_names=result.added_tool_names,
            is_error=result.is_error,
            timestamp=self.runtime.now_ms(),
        )

    async def _execute_call(
        self,
        call: ToolCall,
        tool: AgentTool | ToolSpec | None,
        truncated: bool,
        emit: EmitEvent,
    ) -> AgentToolResult:
        if truncated:
            return error_result(
                TOOL_CALL_TRUNCATED,
                f'Tool call "{call.name}" was not executed: the response hit the output token limit, so '
                "its arguments may be incomplete. Make the call again with shorter arguments, or split the work.",
            )
        if tool is None:
            available = ", ".join(sorted(t.name for t in self.tools)) or "none"
            return error_result(
                TOOL_NOT_FOUND,
                f'Tool "{call.name}" not found. Available tools: {available}.',
                tool_name=call.name,
            )
        if self.signal.aborted:
            return aborted_result(call.name)
        if tool.requires_approval:
            approved = await self._await_approval(call, tool, emit)
            if isinstance(approved, AgentToolResult):
                return approved
            call = approved

        settled = False

        def on_update(partial: AgentToolResult) -> None:
            if not settled:
                emit(
                    ToolExecutionUpdateEvent(
                        tool_call_id=call.id, tool_name=call.name, args=call.arguments, partial_result=partial
                    )
                )

        # The runtime honours the signal itself (the in-process pipeline races it; the Temporal
        # runtime cancels the activity and waits for its answer), so the loop simply awaits it.
        try:
            result = await self.runtime.run_tool(tool, call, self.signal, on_update)
        except Exception as exc:  # a runtime broke its never-raise contract; the run must go on
            result = error_result(EXECUTION_ERROR, f'Tool "{call.name}" failed: {exc}')
        finally:
            settled = True
        return result

    async def _await_approval(
        self, call: ToolCall, tool: AgentTool | ToolSpec, emit: EmitEvent
    ) -> ToolCall | AgentToolResult:
        """Check the call's arguments, ask a person, wait: the call to run (its arguments maybe
        edited), or the result of a call that will not run (invalid, denied, expired, aborted)."""
        refused = check_arguments(tool, call)
        if refused is not None:
            return refused  # nobody is asked to approve a call that cannot run
        if self._approvals is None:
            self._approvals = ApprovalGate()

        def requested(pending: PendingApproval) -> None:
            emit(
                ToolApprovalRequestedEvent(
                    tool_call_id=call.id,
                    tool_name=call.name,
                    args=call.arguments,
                    expires_at=pending.expires_at,
                )
            )

        decision = await self._approvals.request(
            tool, call.id, call.arguments, self.runtime.now_ms, self.signal, requested
        )
        kind = decision.decision
        runs_with = call.arguments if kind == "approved" else decision.args
        emit(
            ToolApprovalResolvedEvent(
                tool_call_id=call.id, decision=kind, args=runs_with, reason=decision.reason
            )
        )
        if kind == "approved":
            return call
        if kind == "edited":
            return call.model_copy(update={"arguments": decision.args})
        if kind == "denied":
            why = f": {decision.reason}" if decision.reason else "."
            return error_result(
                TOOL_DENIED, f'Tool "{call.name}" was denied by the user{why}', reason=decision.reason
            )
        if kind == "expired":
            return error_result(
                APPROVAL_TIMEOUT,
                f'Tool "{call.name}" was not approved within {tool.approval_timeout_seconds:g} s, so it did not run.',
                timeout_seconds=tool.approval_timeout_seconds,
            )
        return aborted_result(call.name)


async def _while_running(work: Callable[[EmitEvent], Awaitable[None]]) -> AsyncIterator[AgentEvent]:
    """Run ``work(emit)`` and yield what it emits as it happens, until it ends.

    Events come from concurrently running code (tool calls, a compaction); one queue keeps them in
    the order they happened (so ``tool_execution_end`` follows completion order), and None marks
    the end. Asyncio primitives only: inside a workflow its deterministic event loop schedules them.
    """
    queue: asyncio.Queue[AgentEvent | None] = asyncio.Queue()

    async def run() -> None:
        try:
            await work(queue.put_nowait)
        finally:
            queue.put_nowait(None)

    runner = asyncio.ensure_future(run())
    try:
        while (event := await queue.get()) is not None:
            yield event
        await runner  # surfaces a failure in ``work`` instead of hiding it behind missing results
    finally:
        if not runner.done():
            runner.cancel()
