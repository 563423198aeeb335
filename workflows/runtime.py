"""The agent loop's ``Runtime`` inside a workflow: model calls and tool calls are activities.

Clock and ids come from ``workflow.now()`` / ``workflow.uuid4()``, so a replay makes the same ids and
takes the same path. Abort cancels the in-flight activity with ``WAIT_CANCELLATION_COMPLETED``: the
activity hands back its partial message (``stop_reason="aborted"``) instead of it being lost.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import AsyncIterator
from typing import Any, Literal, NamedTuple, Protocol, TypeVar

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    FailureError,
    RetryState,
    TimeoutError,
)

with workflow.unsafe.imports_passed_through():
    import orjson

    from agentcore.errors import (
        EXECUTION_ERROR,
        EXECUTION_TIMEOUT,
        OUTCOME_UNKNOWN,
        TOOL_UNAVAILABLE,
    )
    from agentcore.events import (
        LlmRetryEvent,
        StreamDone,
        StreamError,
        StreamEvent,
        StreamStart,
        TextDelta,
        TextEnd,
        TextStart,
        ThinkingDelta,
        ThinkingEnd,
        ThinkingStart,
        ToolCallDelta,
        ToolCallEnd,
        ToolCallStart,
    )
    from agentcore.messages import AssistantMessage, Message, TextContent, ThinkingContent, ToolCall
    from agentcore.model import Model
    from agentcore.protocol import (
        ConversationLimits,
        SessionCreate,
        StreamInput,
        StreamResult,
        ToolCallInput,
    )
    from agentcore.runtime import AbortSignal, LlmContext, StreamOptions, ToolUpdate
    from agentcore.tool_exec import aborted_result, check_arguments_by_schema, error_result
    from agentcore.tools import AgentTool, AgentToolResult, ToolSpec
    from agentcore.transcript import Transcript
    from agentcore.wakeups import is_wakeup_tool

from . import policies
from .shared import new_id, now_ms

T = TypeVar("T")

LLM_ACTIVITY = "llm.stream"  # don't rename: recorded in histories
TOOL_ACTIVITY = "tools.execute"  # don't rename: recorded in histories


class ResultEntry(NamedTuple):
    message: AssistantMessage
    entry_id: str


class Conversation(Protocol):
    """What the loop's runtime needs from the conversation it runs in (the workflow provides it)."""

    @property
    def session_id(self) -> str: ...

    @property
    def limits(self) -> ConversationLimits: ...

    @property
    def transcript(self) -> Transcript: ...

    def session_create(self) -> SessionCreate | None:
        """How a model call's activity creates the session file, until one has."""
        ...

    def session_written(self) -> None:
        """An activity wrote the entries it was given: the session file exists."""
        ...

    def compaction_enabled(self) -> bool: ...

    async def compact_for_overflow(self, signal: AbortSignal | None) -> None:
        """Compact the context a model call overflowed (the call is retried once)."""
        ...

    def streamed_message(self, *, deltas_only: bool = False) -> AssistantMessage | None:
        """What subscribers were shown of the message being streamed, if anything."""
        ...

    def publish(self, event: LlmRetryEvent) -> None:
        """An event for subscribers, in order with the loop's."""
        ...

    def wakeup_tool_call(self, spec: ToolSpec, call: ToolCall) -> AgentToolResult:
        """A ``wakeup_tool`` call: a timer of the workflow's own, no activity."""
        ...

    async def run_subagent(self, spec: ToolSpec, call: ToolCall, signal: AbortSignal) -> AgentToolResult:
        """A sub-agent tool's call: a child conversation."""
        ...


class TemporalRuntime:
    def __init__(self, conversation: Conversation) -> None:
        self.conversation = conversation
        # The last llm.stream call's message and entry id: the activity wrote it, so the workflow
        # must not queue it a second time (``written_as``).
        self._result_entry: ResultEntry | None = None
        # The model call in flight (its result entry id) and the newest attempt whose deltas were
        # taken (``takes_events_of``).
        self._model_call: str | None = None
        self._model_call_attempt = 0

    def now_ms(self) -> int:
        return now_ms()

    def takes_events_of(self, call_id: str, attempt: int) -> bool:
        """Whether a batch of a model call's deltas goes to subscribers: only the call in flight's,
        from its newest attempt so far. A batch that arrives late (an attempt the server gave up on
        during a network cut, or a call that has ended) would show text the answer does not hold."""
        if call_id != self._model_call or attempt < self._model_call_attempt:
            return False
        self._model_call_attempt = attempt
        return True

    def written_as(self, message: Message) -> str | None:
        """The entry id the last model call's activity wrote ``message`` under, once (None for any
        other message: the workflow queues it for writing)."""
        result = self._result_entry
        if result is None or result.message is not message:
            return None
        self._result_entry = None
        return result.entry_id

    def new_id(self) -> str:
        return new_id()

    def task(self) -> int:
        """The running workflow task's number: the history's length in it, the same live and on
        replay (every call is a regular activity, whose result comes in a task of its own)."""
        return workflow.info().get_current_history_length()

    async def stream(
        self, model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[StreamEvent]:
        conversation = self.conversation
        partial = AssistantMessage(
            api=model.api, provider=model.provider, model=model.id, timestamp=self.now_ms()
        )
        yield StreamStart(partial=partial)
        signal: AbortSignal | None = options.signal
        if signal is not None and signal.aborted:
            yield _stream_error(partial, "aborted", "Request was aborted")
            return
        try:
            result, entry = await self._call_model(model, context, options, compact_on_overflow=True)
            if result.overflow:
                # pi's rule: a context overflow is compacted away and the call retried, once.
                await conversation.compact_for_overflow(signal)
                if signal is not None and signal.aborted:
                    yield _stream_error(partial, "aborted", "Request was aborted")
                    return
                result, entry = await self._call_model(model, context, options, compact_on_overflow=False)
        except ActivityError as err:
            aborted = isinstance(_cause(err), CancelledError)
            yield _stream_error(partial, "aborted" if aborted else "error", _describe_failure(err))
            return
        finally:
            self._model_call = None  # its deltas from now on are late
        message = result.message
        self._result_entry = entry
        shown = conversation.streamed_message(deltas_only=True)
        if shown is None or _visible(shown) != _visible(message):
            # Subscribers end with exactly the answer, whatever path the call took. Nothing shown:
            # the call finished before the activity's first publish, and the deltas come from the
            # final message instead (one per block, without an extra signal per model call). Other
            # text shown (an attempt cut off in a network fault, whose retry found the answer stored,
            # or a batch of deltas lost): void it with ``llm_retry``, as a retry would, then the same.
            if shown is not None:
                conversation.publish(
                    LlmRetryEvent(
                        attempt=max(2, result.attempt),
                        error_message="the streamed text was cut off; the answer follows whole",
                    )
                )
            for event in _block_events(message):
                yield event
        if message.stop_reason in ("error", "aborted"):
            yield StreamError(reason=message.stop_reason, error=message)
        else:
            yield StreamDone(reason=message.stop_reason, message=message)

    async def _call_model(
        self, model: Model, context: LlmContext, options: StreamOptions, *, compact_on_overflow: bool
    ) -> tuple[StreamResult, ResultEntry]:
        """One ``llm.stream`` call, a regular activity; raises ``ActivityError`` when it finally fails.

        The activity writes the entries the session lacks and its result (``StreamInput.entries``).
        No call runs as a local activity: a local activity's result can reach the workflow in a
        later task than a replay hands it back in (a query came meanwhile), and an update or signal
        taken in that task then replays in another order (docs/versioning.md)."""
        conversation = self.conversation
        transcript = conversation.transcript
        entries = list(transcript.unwritten)
        result_entry_id = self.new_id()
        activity_input = StreamInput(
            session_id=conversation.session_id,
            model=model,
            system_prompt=context.system_prompt,
            thinking_level=options.thinking_level,
            tool_names=[tool.name for tool in context.tools],
            entries=entries,
            leaf_id=transcript.leaf_id,
            result_entry_id=result_entry_id,
            max_tokens=options.max_tokens,
            temperature=options.temperature,
            create=conversation.session_create(),
            compact_on_overflow=compact_on_overflow and conversation.compaction_enabled(),
        )
        self._model_call, self._model_call_attempt = result_entry_id, 0
        handle = _start_cancellable(
            LLM_ACTIVITY,
            activity_input,
            StreamResult,
            policies.llm_call(conversation.limits),
            f"llm {model.provider}/{model.id}",
        )
        signal = options.signal
        remove = signal.add_listener(handle.cancel) if signal is not None else None
        try:
            result: StreamResult = await handle
        finally:
            if remove is not None:
                remove()
        transcript.mark_written(entries)
        conversation.session_written()
        return result, ResultEntry(result.message, result_entry_id)

    async def run_tool(
        self, tool: AgentTool | ToolSpec, call: ToolCall, signal: AbortSignal, on_update: ToolUpdate
    ) -> AgentToolResult:
        # The tool activity publishes its ``on_update`` progress itself (``activity_events``).
        spec = tool if isinstance(tool, ToolSpec) else tool.spec()
        if signal.aborted:
            return aborted_result(call.name)
        if is_wakeup_tool(spec):
            # Carried out by the workflow itself: a timer, no activity (``wakeups.py``).
            return self.conversation.wakeup_tool_call(spec, call)
        # Bad arguments are refused here, at once, as in-process: no activity for a call that
        # cannot run, and its end event comes before the batch's other calls end.
        refused = check_arguments_by_schema(spec, call)
        if refused is not None:
            return refused
        if spec.subagent is not None:
            return await self.conversation.run_subagent(spec, call, signal)
        limits = self.conversation.limits
        opts = policies.tool_call(limits, spec.timeout_seconds, spec.retry_safe)
        tool_input = ToolCallInput(
            session_id=self.conversation.session_id,
            tool_name=call.name,
            tool_call_id=call.id,
            arguments=call.arguments,
            retry_safe=spec.retry_safe,
            timeout_seconds=spec.timeout_seconds,
        )
        summary = f"tool {call.name} {_digest(call.arguments)}"
        # A remote activity with heartbeats: an abort cancels it at once, and the conversation
        # answers get_state and takes steering while it runs.
        handle = _start_cancellable(TOOL_ACTIVITY, tool_input, AgentToolResult, opts, summary)
        remove = signal.add_listener(handle.cancel)
        try:
            result: AgentToolResult = await handle
            return result
        except ActivityError as err:
            if isinstance(err.cause, CancelledError):
                return aborted_result(call.name)
            if isinstance(err.cause, ApplicationError) and err.cause.type == TOOL_UNAVAILABLE:
                # The tool's server stayed down through every attempt (``ToolUnavailableError``): the
                # same result as in-process.
                return error_result(TOOL_UNAVAILABLE, err.cause.message)
            if not spec.retry_safe:
                return error_result(
                    OUTCOME_UNKNOWN,
                    f'Tool "{call.name}" was interrupted ({_describe_failure(err)}) and is not safe to run '
                    "again: its outcome is unknown. Check its effect before retrying.",
                )
            if isinstance(err.cause, TimeoutError):
                return error_result(
                    EXECUTION_TIMEOUT, f'Tool "{call.name}" timed out: {_describe_failure(err)}'
                )
            return error_result(EXECUTION_ERROR, f'Tool "{call.name}" failed: {_describe_failure(err)}')
        finally:
            remove()


def _start_cancellable(
    name: str, arg: Any, result_type: type[T], opts: policies.ActivityOptions, summary: str
) -> workflow.ActivityHandle[T]:
    """A heartbeating activity that an abort cancels; it hands back what it has (its partial message,
    an aborted tool result) instead of being cut off: ``WAIT_CANCELLATION_COMPLETED``."""
    return workflow.start_activity(
        name,
        arg,
        result_type=result_type,
        start_to_close_timeout=opts.start_to_close,
        heartbeat_timeout=opts.heartbeat,
        retry_policy=opts.retry,
        cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        summary=summary,
    )


def messages_built_by_the_activity(messages: list[Any]) -> list[Any]:
    """The workflow's ``convert_to_llm``. A model call's activity builds its messages from the session
    file (``StreamInput`` names the entries it lacks), so the context the loop hands ``stream`` needs
    none; filtering the whole transcript on every model call made each call cost O(conversation)."""
    return []


def _stream_error(partial: AssistantMessage, reason: Literal["error", "aborted"], text: str) -> StreamError:
    message = partial.model_copy(update={"stop_reason": reason, "error_message": text})
    return StreamError(reason=reason, error=message)


# A provider error's closing verdict (``agentcore.providers.errors.ProviderFailure.describe``).
_RETRYABLE_VERDICT = re.compile(r"\(retryable(; retry after [^)]*)?\)$")


def _cause(err: FailureError) -> BaseException | None:
    """What failed: an ActivityError's cause."""
    return err.cause if isinstance(err, ActivityError) else err


def _describe_failure(err: FailureError) -> str:
    cause = _cause(err)
    if isinstance(cause, ApplicationError):
        if isinstance(err, ActivityError) and err.retry_state == RetryState.MAXIMUM_ATTEMPTS_REACHED:
            # The provider said "retryable" of the last attempt; there will be no other.
            return _RETRYABLE_VERDICT.sub("(retryable, but every attempt failed)", cause.message)
        return cause.message
    if isinstance(cause, TimeoutError):
        return f"activity timed out ({cause.type.name if cause.type else 'timeout'})"
    if isinstance(cause, CancelledError):
        return "Request was aborted"
    return str(cause or err)


def _digest(arguments: object) -> str:
    raw = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS)
    text = raw.decode()
    if len(text) <= 60:
        return text
    return f"{text[:48]}… #{hashlib.sha1(raw).hexdigest()[:8]}"


def _visible(message: AssistantMessage) -> list[tuple[Any, ...]]:
    """What a subscriber shows of a message: its blocks' text, thinking and tool calls."""
    blocks: list[tuple[Any, ...]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            blocks.append(("text", block.text))
        elif isinstance(block, ThinkingContent):
            blocks.append(("thinking", block.thinking))
        else:
            blocks.append(("toolCall", block.id, block.name, block.arguments))
    return blocks


def _block_events(message: AssistantMessage) -> list[StreamEvent]:
    events: list[StreamEvent] = []
    for index, block in enumerate(message.content):
        if isinstance(block, TextContent):
            events.append(TextStart(content_index=index, partial=message))
            if block.text:
                events.append(TextDelta(content_index=index, delta=block.text, partial=message))
            events.append(TextEnd(content_index=index, content=block.text, partial=message))
        elif isinstance(block, ThinkingContent):
            events.append(ThinkingStart(content_index=index, partial=message))
            if block.thinking:
                events.append(ThinkingDelta(content_index=index, delta=block.thinking, partial=message))
            events.append(ThinkingEnd(content_index=index, content=block.thinking, partial=message))
        else:
            events.append(ToolCallStart(content_index=index, partial=message))
            events.append(
                ToolCallDelta(
                    content_index=index, delta=orjson.dumps(block.arguments).decode(), partial=message
                )
            )
            events.append(ToolCallEnd(content_index=index, tool_call=block, partial=message))
    return events
