"""The agent loop's ``Runtime`` inside a workflow: model calls and tool calls are activities.

Clock and ids come from ``workflow.now()`` / ``workflow.uuid4()``, so a replay makes the same ids and
takes the same path. Abort cancels the in-flight activity with ``WAIT_CANCELLATION_COMPLETED``: the
activity hands back its partial message (``stop_reason="aborted"``) instead of it being lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
from collections.abc import AsyncIterator, Awaitable
from datetime import timedelta
from typing import Any, Literal, NamedTuple, TypeVar

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
        SESSION_LOCKED,
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
    from agentcore.messages import AssistantMessage, TextContent, ThinkingContent, ToolCall
    from agentcore.model import Model
    from agentcore.protocol import (
        ConversationInput,
        StreamInput,
        StreamResult,
        ToolAttemptResult,
        ToolCallInput,
    )
    from agentcore.runtime import AbortSignal, LlmContext, StreamOptions, ToolUpdate
    from agentcore.tool_exec import aborted_result, check_arguments_by_schema, error_result
    from agentcore.tools import AgentTool, AgentToolResult, ToolSpec
    from agentcore.wakeups import is_wakeup_tool

from . import policies
from .state import new_id, now_ms
from .subagents import run_subagent
from .tree import TreeHandlers

T = TypeVar("T")

LLM_ACTIVITY = "llm.stream"  # don't rename: recorded in histories
TOOL_ACTIVITY = "tools.execute"  # don't rename: recorded in histories


class ResultEntry(NamedTuple):
    message: AssistantMessage
    entry_id: str
    written: bool


class TemporalRuntime:
    def __init__(self, conversation: TreeHandlers, conversation_input: ConversationInput) -> None:
        self.conversation = conversation
        # The last llm.stream call's message and entry id, and whether the activity wrote it (a
        # remote one did: the workflow must not queue it a second time; a local one did not).
        self.result_entry: ResultEntry | None = None
        # Whether the last llm.stream call ended before its first publish tick (see ``_call_locally``);
        # None: no call made yet. It crosses continue-as-new.
        self.last_call_quick: bool | None = conversation_input.last_model_call_quick
        # The model call in flight (its result entry id) and the newest attempt whose deltas were
        # taken (``takes_events_of``).
        self.model_call: str | None = None
        self.model_call_attempt = 0
        # Tools whose call in this run was handed off by its local attempt: their calls run remotely.
        self.slow_tools: set[str] = set()
        # What local attempts spent of ``policies.LOCAL_TASK_BUDGET`` (seconds) since the run began
        # (its abort signal) or the last remote call returned (see ``_local_left``).
        self.local_signal: AbortSignal | None = None
        self.local_spent = 0.0
        # A remote tool call ended since the last model call (its result came in a task of its own).
        self.remote_tool_ended = False
        # Set when a local activity's result came in a later workflow task than the one it started
        # in: that task's number, and the history's length when the result came (see ``task``).
        self.late_local: tuple[int, int] | None = None
        # Local activities the workflow awaits: while one runs its workflow task stays open, so
        # nothing the workflow answers leaves the worker (``ConversationState._release_events``).
        self.locals_running = 0
        # Local tool attempts side by side: a number for each, in the order they started, and the
        # numbers of those whose results the workflow has not taken yet (``_in_start_order``).
        self.local_started = 0
        self.local_untaken: set[int] = set()

    def now_ms(self) -> int:
        return now_ms()

    def takes_events_of(self, call_id: str, attempt: int) -> bool:
        """Whether a batch of a model call's deltas goes to subscribers: only the call in flight's,
        from its newest attempt so far. A batch that arrives late (an attempt the server gave up on
        during a network cut, or a call that has ended) would show text the answer does not hold."""
        if call_id != self.model_call or attempt < self.model_call_attempt:
            return False
        self.model_call_attempt = attempt
        return True

    def new_id(self) -> str:
        return new_id()

    def task(self) -> int:
        """The running workflow task's number (the history's length in it), as a replay counts it.

        A local activity's result may reach the workflow in a later task than the one the activity
        started in (a query came meanwhile, and the worker completed the task to answer it), but a
        replay always hands it back in the task it started in. Until the next task begins, what
        follows such a result counts as still in the task the activity started in, so every choice
        made from the task the workflow is in (which session entries are committed, whether a run
        outlasted its first task) is the same live and on replay."""
        length = workflow.info().get_current_history_length()
        late = self.late_local
        return late[0] if late is not None and late[1] == length else length

    async def local(self, handle: workflow.ActivityHandle[T]) -> T:
        """A local activity's result (see ``task``)."""
        started = self.task()
        self.locals_running += 1
        try:
            return await handle
        finally:
            self.locals_running -= 1
            length = workflow.info().get_current_history_length()
            if length != started:
                self.late_local = (started, length)

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
                await conversation.compact("overflow", will_retry=True, signal=signal)
                if signal is not None and signal.aborted:
                    yield _stream_error(partial, "aborted", "Request was aborted")
                    return
                result, entry = await self._call_model(model, context, options, compact_on_overflow=False)
        except FailureError as err:  # an ActivityError, or a local attempt's failure as it came
            aborted = isinstance(_cause(err), CancelledError)
            yield _stream_error(partial, "aborted" if aborted else "error", _describe_failure(err))
            return
        finally:
            self.model_call = None  # its deltas from now on are late
        message = result.message
        self.result_entry = entry
        shown = conversation.streamed_message(deltas_only=True)
        if shown is None or _visible(shown) != _visible(message):
            # Subscribers end with exactly the answer, whatever path the call took. Nothing shown:
            # the call finished before the activity's first publish, and the deltas come from the
            # final message instead (one per block, without an extra signal per model call). Other
            # text shown (an attempt cut off in a network fault, whose retry found the answer stored,
            # or a batch of deltas lost): void it with ``llm_retry``, as a retry would, then the same.
            if shown is not None:
                conversation._publish(
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
        """One ``llm.stream`` call; raises ``ActivityError`` when it finally fails.

        A call expected to be quick runs as a local activity first: in the worker that holds the
        conversation, inside its workflow task, with no server round trip. If it has not ended after
        one publish interval, the worker keeps it running and hands it to a remote activity, which
        streams its deltas and can be aborted (``StreamResult.handoff``). A local attempt writes to
        the session only entries earlier workflow tasks made, not its result: the task it runs in
        may be lost and run again (see ``Transcript.split_committed``); the rest is written by the
        next call, or by ``session.append`` once the run ends.
        """
        conversation = self.conversation
        transcript = conversation.transcript
        entries = list(transcript.unwritten)
        result_entry_id = self.new_id()
        if self.remote_tool_ended:  # (the batch's tools have all ended: the point is the same on replay)
            self.local_spent, self.remote_tool_ended = 0.0, False
        local = self._call_locally(options.signal)
        written, pending = transcript.split_committed() if local else (entries, [])
        activity_input = StreamInput(
            session_id=conversation.session_id,
            model=model,
            system_prompt=context.system_prompt,
            thinking_level=options.thinking_level,
            tool_names=[tool.name for tool in context.tools],
            entries=written,
            pending_entries=pending,
            leaf_id=transcript.leaf_id,
            result_entry_id=result_entry_id,
            max_tokens=options.max_tokens,
            temperature=options.temperature,
            create=conversation.session_create(),
            compact_on_overflow=compact_on_overflow and conversation.config.compaction.enabled,
            speed_unknown=self.last_call_quick is None,
        )
        signal: AbortSignal | None = options.signal
        self.model_call, self.model_call_attempt = result_entry_id, 0
        local_result = None
        if local:
            spent = self.local_spent
            local_result = await self._call_local(
                activity_input.model_copy(update={"local_wait_seconds": self._local_wait()}), signal
            )
            if isinstance(local_result, StreamResult):
                self._spend(spent, local_result.local_seconds)
        if isinstance(local_result, StreamResult) and not local_result.handoff:
            result, quick, result_written = local_result, True, False
        else:
            prior_attempts = 0
            if isinstance(local_result, FailureError):
                prior_attempts = await self._after_local_failure(local_result, signal)
            if local:  # the remote activity writes them all (this task is in the history by then)
                written = entries
                activity_input = activity_input.model_copy(
                    update={"entries": entries, "pending_entries": [], "prior_attempts": prior_attempts}
                )
            result = await self._call_remote(activity_input, signal)
            # A call handed off was slow; one the local attempt declined is judged as a remote one.
            declined = isinstance(local_result, StreamResult) and local_result.declined
            quick = (not local or declined) and result.deltas_published == 0
            result_written = True
        transcript.mark_written(written)
        conversation.session_created = True
        self.last_call_quick = quick
        return result, ResultEntry(result.message, result_entry_id, result_written)

    def _call_locally(self, signal: AbortSignal | None) -> bool:
        """Whether the next model call starts as a local activity (see ``_call_model``): unless the
        last one was slow, or this task's local budget is spent (``_local_left``). A conversation's
        first call starts local too, but its attempt makes the
        call only if the worker's last call to that model was quick (``StreamInput.speed_unknown``):
        a real model's first call goes remote at once, not after a handoff."""
        if not self.conversation.limits.local_model_calls or self.last_call_quick is False:
            return False
        return self._local_left(signal)

    def _local_left(self, signal: AbortSignal | None) -> bool:
        """Whether enough of the local-attempt budget (``policies.LOCAL_TASK_BUDGET``) is left for one
        more local attempt: a model call, its tools and the next model call may run locally in one
        workflow task, but together they hold it at most one publish interval. The budget is counted
        along the run, not by workflow task (a local attempt's result may come in the next task, and
        in the same one on replay): it starts anew with each run (its abort signal), after each remote
        model call, and at the model call after a remote tool call (their results always come in a
        task of their own; tools may run side by side, so the next model call is the point where
        every one of a batch has ended, on replay as when it ran)."""
        if signal is not self.local_signal:
            self.local_signal, self.local_spent = signal, 0.0
        left = policies.LOCAL_TASK_BUDGET - timedelta(seconds=self.local_spent)
        return left >= policies.LOCAL_ATTEMPT_MIN

    def _local_wait(self) -> float | None:
        """The next local attempt's wait: None (the worker's publish interval) when none was spent,
        else what the earlier ones left."""
        if self.local_spent == 0.0:
            return None
        return policies.LOCAL_TASK_BUDGET.total_seconds() - self.local_spent

    def _spend(self, before: float, seconds: float) -> None:
        """Count a local attempt that started when ``before`` was spent and ran ``seconds``. Attempts
        that ran side by side (a batch of tool calls) held the task together, for the longest."""
        self.local_spent = max(self.local_spent, before + seconds)

    async def _call_local(
        self, activity_input: StreamInput, signal: AbortSignal | None
    ) -> StreamResult | FailureError:
        """The local attempt: its result (maybe a handoff), or how it failed (a remote call retries)."""
        conversation = self.conversation
        model = activity_input.model
        handle = workflow.start_local_activity(
            LLM_ACTIVITY,
            activity_input,
            result_type=StreamResult,
            start_to_close_timeout=timedelta(seconds=conversation.limits.llm_timeout_seconds),
            retry_policy=policies.LOCAL_LLM_ATTEMPT,
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            summary=f"llm {model.provider}/{model.id}",
        )
        remove = signal.add_listener(handle.cancel) if signal is not None else None
        try:
            return await self.local(handle)
        except FailureError as err:
            # A local activity's failure may come unwrapped (not as an ActivityError).
            if isinstance(_cause(err), CancelledError):
                raise
            return err
        finally:
            if remove is not None:
                remove()

    async def _after_local_failure(self, error: FailureError, signal: AbortSignal | None) -> int:
        """How many attempts the failed local one counts for; waits out its retry delay first.

        A busy session file is not the call's failure (the remote attempt waits for the file). A
        failure retrying cannot fix is the call's outcome, as a remote attempt's would be. Any other
        counts as the call's first attempt: the remote one comes after the delay the provider asked
        for (or the retry policy's first interval), as Temporal's retry would have, not at once.
        """
        cause = _cause(error)
        failure = cause if isinstance(cause, ApplicationError) else None
        if failure is not None and failure.type == SESSION_LOCKED:
            return 0
        if failure is not None and (
            failure.non_retryable or failure.type in policies.NON_RETRYABLE_SESSION_ERRORS
        ):
            raise error
        opts = policies.llm_call(self.conversation.limits)
        delay = (failure.next_retry_delay if failure is not None else None) or opts.retry.initial_interval
        with contextlib.suppress(asyncio.TimeoutError):
            await workflow.wait_condition(lambda: signal is not None and signal.aborted, timeout=delay)
        return 1

    async def _call_remote(self, activity_input: StreamInput, signal: AbortSignal | None) -> StreamResult:
        conversation = self.conversation
        model = activity_input.model
        opts = policies.llm_call(conversation.limits, activity_input.prior_attempts)
        handle = _start_cancellable(
            LLM_ACTIVITY, activity_input, StreamResult, opts, f"llm {model.provider}/{model.id}"
        )
        remove = signal.add_listener(handle.cancel) if signal is not None else None
        try:
            result: StreamResult = await handle
            return result
        finally:
            self.local_spent = 0.0  # (see ``_local_left``)
            if remove is not None:
                remove()

    async def run_tool(
        self, tool: AgentTool | ToolSpec, call: ToolCall, signal: AbortSignal, on_update: ToolUpdate
    ) -> AgentToolResult:
        # A remote tool activity publishes its ``on_update`` progress itself (``activity_events``); a
        # local attempt hands it back with the result.
        spec = tool if isinstance(tool, ToolSpec) else tool.spec()
        if signal.aborted:
            return aborted_result(call.name)
        if is_wakeup_tool(spec):
            # Carried out by the workflow itself: a timer, no activity (``wakeups.py``).
            return self.conversation._wakeup_tool_call(spec, call)
        # Bad arguments are refused here, at once, as in-process: no activity for a call that
        # cannot run, and its end event comes before the batch's other calls end.
        refused = check_arguments_by_schema(spec, call)
        if refused is not None:
            return refused
        if spec.subagent is not None:
            return await run_subagent(self.conversation, spec, call, signal)
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
        # A quick retry-safe tool runs as a local activity first, inside this workflow task, for one
        # publish interval at most; one still running is handed to the remote activity below, which
        # takes it over where it runs. Every other call is a remote activity with heartbeats: an abort
        # cancels it at once, and the conversation answers get_state and takes steering while it runs.
        handed_off = False
        if self._tool_locally(spec, signal):
            local_result = await self._run_tool_locally(tool_input, opts, summary, signal, on_update)
            if local_result is not None:
                return local_result
            handed_off = spec.name in self.slow_tools
        handle = _start_cancellable(TOOL_ACTIVITY, tool_input, AgentToolResult, opts, summary)
        remove = signal.add_listener(handle.cancel)
        try:
            result: AgentToolResult = await handle
            return result
        except ActivityError as err:
            if isinstance(err.cause, CancelledError):
                if handed_off:  # aborted before the remote activity took the call over: stop it
                    await self._stop_handed_off(tool_input, opts, summary)
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
            self.remote_tool_ended = True

    def _tool_locally(self, spec: ToolSpec, signal: AbortSignal) -> bool:
        """Whether a tool call starts as a local activity: a retry-safe tool (the attempt may run
        again, when its workflow task is lost) whose call in this run was not handed off yet, with
        enough of this task's local budget left (see ``_local_left``). A tool's first call is tried
        locally too: the most it costs is one publish interval of this task and a handoff."""
        return (
            self.conversation.limits.local_tool_calls
            and spec.retry_safe
            and spec.name not in self.slow_tools
            and self._local_left(signal)
        )

    async def _run_tool_locally(
        self,
        tool_input: ToolCallInput,
        opts: policies.ActivityOptions,
        summary: str,
        signal: AbortSignal,
        on_update: ToolUpdate,
    ) -> AgentToolResult | None:
        """The local attempt at a tool call: its result (its progress published first), or None when
        the remote activity is to take the call over (a handoff) or make it (the attempt failed)."""
        spent = self.local_spent
        handle = workflow.start_local_activity(
            TOOL_ACTIVITY,
            tool_input.model_copy(update={"local_wait_seconds": self._local_wait()}),
            result_type=ToolAttemptResult,
            start_to_close_timeout=opts.start_to_close,
            retry_policy=policies.LOCAL_TOOL_ATTEMPT,
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            summary=summary,
        )
        remove = signal.add_listener(handle.cancel)
        number = self.local_started
        self.local_started += 1
        self.local_untaken.add(number)
        try:
            attempt: ToolAttemptResult = await self._in_start_order(number, self.local(handle))
        except FailureError as err:
            if isinstance(_cause(err), CancelledError):
                return aborted_result(tool_input.tool_name)
            return None  # the remote activity runs the call, as a retry would
        finally:
            remove()
        self._spend(spent, attempt.local_seconds)
        if attempt.handoff or attempt.result is None:
            self.slow_tools.add(tool_input.tool_name)
            return None
        for partial in attempt.updates:
            on_update(partial)
        return attempt.result

    async def _in_start_order(self, number: int, result: Awaitable[T]) -> T:
        """The result of local tool attempt ``number``, once those started before it were taken.

        Live, the results of attempts side by side come as they end; a replay hands them back in
        the order they started. Taken in that order, what each call does next (a handoff's remote
        activity, its events) comes in the same order both ways: otherwise two handed-off calls
        could swap activities, and each would get the other's result on replay."""
        try:
            return await result
        finally:
            await workflow.wait_condition(lambda: min(self.local_untaken) == number)
            self.local_untaken.discard(number)

    async def _stop_handed_off(
        self, tool_input: ToolCallInput, opts: policies.ActivityOptions, summary: str
    ) -> None:
        """Stop a handed-off tool that its remote activity never took over (the abort cancelled that
        activity before it started): a local attempt that finds it in this worker and aborts it."""
        with contextlib.suppress(FailureError):
            await self.local(
                workflow.start_local_activity(
                    TOOL_ACTIVITY,
                    tool_input.model_copy(update={"stop": True}),
                    result_type=ToolAttemptResult,
                    start_to_close_timeout=opts.start_to_close,
                    retry_policy=policies.LOCAL_TOOL_ATTEMPT,
                    summary=summary,
                )
            )


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
    """What failed: an ActivityError's cause, or a local activity's failure as it came (unwrapped)."""
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
