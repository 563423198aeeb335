"""What a worker tells an operator about each model and tool call: a span and metrics.

``AgentObserver`` is a Temporal worker interceptor (``create_worker`` installs it when tracing or
metrics are on). Around each ``llm.stream`` activity it records a ``chat {model}`` span and counts
the call, its tokens and cost; around each ``tools.execute`` an ``execute_tool {name}`` span and the
call's outcome. The spans follow the OpenTelemetry GenAI semantic conventions. Under agentcore's
tracing interceptor (``agentcore.temporal.tracing``, which runs first: the client's interceptors
come before the worker's) that span is the activity's own, made there in place of Temporal's
``RunActivity`` and filled in here; under Temporal's plain ``OpenTelemetryInterceptor`` (or the older
``TracingInterceptor``) it is a child of
``RunActivity``.

Everything is read from the activity's input and result, so neither the activities nor the workflow
know about it. Runs are counted where they begin, when the workflow accepts a ``prompt`` or
``continue`` update: the workflow interceptor calls out of the sandbox (an extern function) only
when the workflow is not replaying, so a replay after a restart counts nothing twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import orjson
import temporalio.workflow
from temporalio import activity
from temporalio.common import SearchAttributeKey
from temporalio.exceptions import ApplicationError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    HandleUpdateInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from ..errors import EXECUTION_ABORTED
from ..messages import AssistantMessage, TextContent
from ..protocol import StreamInput, StreamResult, ToolCallInput
from ..runtime import LlmContext
from ..tools import AgentToolResult
from . import genai
from .metrics import AgentMetrics

if TYPE_CHECKING:
    from opentelemetry.trace import Span, SpanKind, Tracer

# Set around a ``llm.stream`` call by ``AgentObserver`` (for a span's captured input) and called by the
# activity with the context the model is about to be sent, rebuilt from the session file. It lives
# here, below the activities, so the activity reads it without this module importing the activities.
model_context_seen: ContextVar[Callable[[LlmContext], None] | None] = ContextVar(
    "agentcore_model_context_seen", default=None
)

MODEL_CALL_ACTIVITY = "llm.stream"
TOOL_CALL_ACTIVITY = "tools.execute"
RUN_UPDATES = frozenset({"prompt", "continue"})
SESSION_ID_ATTRIBUTE = "agentcore.session.id"
_RUN_STARTED_EXTERN = "agentcore_run_started"
# The model a run uses, as the workflow indexes it (agentcore.search_attributes).
_MODEL_SEARCH_ATTRIBUTE = SearchAttributeKey.for_keyword("AgentModel")


# Context key under which agentcore's tracing interceptor puts the span it made for a model or tool
# activity: the observer fills that span in instead of making a child of it.
ACTIVITY_SPAN_KEY = "agentcore.activity-span"


def model_label(provider: str, model_id: str) -> str:
    return f"{provider}/{model_id}"


def genai_span(activity_type: str, args: Sequence[Any]) -> tuple[str, SpanKind] | None:
    """Name and kind of the GenAI span for an activity: ``chat {model}`` (a client call) for a
    model call, ``execute_tool {name}`` for a tool call; None for any other activity."""
    from opentelemetry.trace import SpanKind

    if activity_type == MODEL_CALL_ACTIVITY and args and isinstance(args[0], StreamInput):
        return f"chat {args[0].model.id}", SpanKind.CLIENT
    if activity_type == TOOL_CALL_ACTIVITY and args and isinstance(args[0], ToolCallInput):
        return f"execute_tool {args[0].tool_name}", SpanKind.INTERNAL
    return None


class AgentObserver(Interceptor):
    """Spans (when ``tracer`` is given) and metrics (when ``metrics`` is) for model and tool calls."""

    def __init__(
        self,
        *,
        metrics: AgentMetrics | None = None,
        tracer: Tracer | None = None,
        capture_content: bool = False,
    ) -> None:
        self.metrics = metrics
        self.tracer = tracer
        self.capture_content = capture_content

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ObservedActivity(next, self)

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        if self.metrics is None:
            return None
        input.unsafe_extern_functions[_RUN_STARTED_EXTERN] = self._run_started
        return _RunCounter

    def _run_started(self, model: str) -> None:
        if self.metrics is not None:
            self.metrics.runs.labels(model).inc()

    @contextlib.contextmanager
    def span(self, input: ExecuteActivityInput, attributes: dict[str, Any]) -> Iterator[Span | None]:
        if self.tracer is None:
            yield None
            return
        from opentelemetry import context, trace

        current = trace.get_current_span()
        if context.get_value(ACTIVITY_SPAN_KEY) is current:
            current.set_attributes(attributes)
            yield current
            return
        named = genai_span(activity.info().activity_type, input.args)
        assert named is not None
        name, kind = named
        # Status is set below from the call's outcome: an expected failure (a retried provider
        # error, a cancelled attempt) is not recorded as an exception with its traceback.
        span = self.tracer.start_span(
            name, kind=kind, attributes=attributes, record_exception=False, set_status_on_exception=False
        )
        try:
            with trace.use_span(span, record_exception=False, set_status_on_exception=False):
                yield span
        finally:
            span.end()


class _RunCounter(WorkflowInboundInterceptor):
    async def handle_update_handler(self, input: HandleUpdateInput) -> Any:
        result = await super().handle_update_handler(input)
        if (
            input.update in RUN_UPDATES
            and getattr(result, "status", None) == "accepted"
            and not temporalio.workflow.unsafe.is_replaying()
        ):
            model = temporalio.workflow.info().typed_search_attributes.get(_MODEL_SEARCH_ATTRIBUTE)
            temporalio.workflow.extern_functions()[_RUN_STARTED_EXTERN](model or "unknown")
        return result


class _ObservedActivity(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, observer: AgentObserver) -> None:
        super().__init__(next)
        self.observer = observer

    def _failed(self, span: Span | None, err: BaseException, *, call: str, label: str) -> None:
        """A model or tool call attempt that raised: the span's error, the call and its error counted.
        A model call that raised is retried by Temporal; a tool call that raised is an error."""
        outcome, code = _failure(err, retry_outcome="retry" if call == "model" else "error")
        _set_error(span, code)
        metrics = self.observer.metrics
        if metrics is None:
            return
        calls = metrics.model_calls if call == "model" else metrics.tool_calls
        calls.labels(label, outcome).inc()
        if code is not None:
            metrics.errors.labels(code).inc()

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        kind = activity.info().activity_type
        if kind == MODEL_CALL_ACTIVITY and input.args and isinstance(input.args[0], StreamInput):
            return await self._model_call(input, input.args[0])
        if kind == TOOL_CALL_ACTIVITY and input.args and isinstance(input.args[0], ToolCallInput):
            return await self._tool_call(input, input.args[0])
        return await super().execute_activity(input)

    async def _model_call(self, input: ExecuteActivityInput, inp: StreamInput) -> Any:
        observer, metrics = self.observer, self.observer.metrics
        model = model_label(inp.model.provider, inp.model.id)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": inp.model.provider,
            "gen_ai.request.model": inp.model.id,
            "gen_ai.conversation.id": inp.session_id,
            SESSION_ID_ATTRIBUTE: inp.session_id,
            "agentcore.attempt": activity.info().attempt + inp.prior_attempts,
            **genai.server_attributes(inp.model),
        }
        if inp.max_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = inp.max_tokens
        if inp.temperature is not None:
            attributes["gen_ai.request.temperature"] = inp.temperature
        if observer.capture_content and inp.system_prompt:
            attributes["gen_ai.system_instructions"] = genai.system_instructions(inp.system_prompt)
        started = time.perf_counter()
        with observer.span(input, attributes) as span:
            # The whole input the model is sent is known only once the activity has rebuilt it from
            # the session file (its input holds only the new entries): the activity reports it.
            seen = None
            if span is not None and observer.capture_content:

                def record_input(context: LlmContext) -> None:
                    span.set_attribute("gen_ai.input.messages", genai.input_messages(context.messages))

                seen = model_context_seen.set(record_input)
            try:
                result = await super().execute_activity(input)
            except BaseException as err:
                self._failed(span, err, call="model", label=model)
                raise
            finally:
                if seen is not None:
                    model_context_seen.reset(seen)
            if not isinstance(result, StreamResult):
                return result
            message = result.message
            self._record_model_result(span, metrics, model, message, time.perf_counter() - started, result)
            return result

    def _record_model_result(
        self,
        span: Span | None,
        metrics: AgentMetrics | None,
        model: str,
        message: AssistantMessage,
        seconds: float,
        result: StreamResult,
    ) -> None:
        usage = message.usage
        if span is not None:
            span.set_attributes(
                {
                    "gen_ai.response.model": message.model,
                    "gen_ai.response.finish_reasons": [genai.finish_reason(message)],
                    "gen_ai.usage.input_tokens": usage.input,
                    "gen_ai.usage.output_tokens": usage.output,
                    "gen_ai.usage.cache_read.input_tokens": usage.cache_read,
                    "gen_ai.usage.cache_creation.input_tokens": usage.cache_write,
                    "agentcore.cost.usd": usage.cost.total,
                }
            )
            if message.response_id:
                span.set_attribute("gen_ai.response.id", message.response_id)
            if self.observer.capture_content:
                span.set_attribute("gen_ai.output.messages", genai.output_messages(message))
            if message.stop_reason == "error":
                _set_error(span, "PROVIDER_ERROR", message.error_message)
        if metrics is None:
            return
        metrics.model_calls.labels(model, message.stop_reason).inc()
        metrics.model_call_seconds.labels(model).observe(seconds)
        metrics.tokens.labels(model, "input").inc(usage.input)
        metrics.tokens.labels(model, "output").inc(usage.output)
        metrics.cost.labels(model).inc(usage.cost.total)
        if message.stop_reason == "error":
            metrics.errors.labels("PROVIDER_ERROR").inc()
        elif message.stop_reason == "aborted":
            metrics.aborts.labels("model").inc()
        if not result.overflow:  # an overflow is compacted and called again, not a turn
            metrics.turns.labels(model).inc()

    async def _tool_call(self, input: ExecuteActivityInput, inp: ToolCallInput) -> Any:
        observer, metrics = self.observer, self.observer.metrics
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": inp.tool_name,
            "gen_ai.tool.call.id": inp.tool_call_id,
            "gen_ai.tool.type": "function",
            "gen_ai.conversation.id": inp.session_id,
            SESSION_ID_ATTRIBUTE: inp.session_id,
            "agentcore.attempt": activity.info().attempt,
        }
        if observer.capture_content:
            attributes["gen_ai.tool.call.arguments"] = orjson.dumps(inp.arguments).decode()
        started = time.perf_counter()
        with observer.span(input, attributes) as span:
            try:
                result = await super().execute_activity(input)
            except BaseException as err:
                self._failed(span, err, call="tool", label=inp.tool_name)
                raise
            tool_result = result
            if not isinstance(tool_result, AgentToolResult):
                return result
            code = _error_code(tool_result)
            outcome = "ok" if code is None else "aborted" if code == EXECUTION_ABORTED else "error"
            if span is not None:
                if code is not None:
                    _set_error(span, code, _text(tool_result))
                if observer.capture_content:
                    span.set_attribute("gen_ai.tool.call.result", _text(tool_result))
            if metrics is not None:
                metrics.tool_calls.labels(inp.tool_name, outcome).inc()
                metrics.tool_call_seconds.labels(inp.tool_name).observe(time.perf_counter() - started)
                if outcome == "aborted":
                    metrics.aborts.labels("tool").inc()
                elif code is not None:
                    metrics.errors.labels(code).inc()
            return result


def _failure(err: BaseException, *, retry_outcome: str) -> tuple[str, str | None]:
    """(outcome, error code) of an attempt that raised. A cancelled attempt (abort of a remote
    call that raised, worker shutdown, timeout) is no error of the agent's."""
    if isinstance(err, asyncio.CancelledError):
        return "cancelled", None
    if isinstance(err, ApplicationError):
        return retry_outcome, err.type or "APPLICATION_ERROR"
    return retry_outcome, type(err).__name__


def _error_code(result: AgentToolResult) -> str | None:
    if not result.is_error:
        return None
    details = result.details
    code = details.get("error_code") if isinstance(details, dict) else None
    return code if isinstance(code, str) else "TOOL_ERROR"


def _text(result: AgentToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def _set_error(span: Span | None, code: str | None, description: str | None = None) -> None:
    if span is None or code is None:
        return
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("error.type", code)
    span.set_status(Status(StatusCode.ERROR, f"{code}: {description}" if description else code))


__all__ = ["ACTIVITY_SPAN_KEY", "AgentObserver", "genai_span", "model_label"]
