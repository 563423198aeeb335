"""Traces over OpenTelemetry (the ``agentcore[otel]`` extra), configured by the standard ``OTEL_*`` variables.

With ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) set, every process
that connects through ``agentcore.temporal.connect`` exports spans over OTLP/HTTP to it, named
``OTEL_SERVICE_NAME`` (default ``agentcore``):

- the client's calls and the workflow's work, from Temporal's own
  ``temporalio.contrib.opentelemetry.TracingInterceptor`` (``StartWorkflow``,
  ``StartWorkflowUpdate``, ``RunWorkflow``, ``HandleUpdate``, ``HandleSignal``, ``RunActivity``
  for the bookkeeping activities, ...). Its workflow spans are made only when the workflow is not
  replaying, so a replay after a worker restart adds none;
- one span per model call (``chat {model}``) and per tool call (``execute_tool {name}``): the
  activity's own span, with the OpenTelemetry GenAI semantic conventions' attributes and
  ``agentcore.session.id`` (filled in by ``agentcore.temporal.observe``) and Temporal's
  ``temporalWorkflowID`` / ``temporalRunID`` / ``temporalActivityID``.

The trace context travels in Temporal headers, so a conversation started by a traced client is one
trace from the client's ``StartWorkflow`` down to each model and tool call. Prompt and answer text is
left out of spans unless ``AGENTCORE_OTEL_CAPTURE_CONTENT=true``; API keys never enter them (they are
read by the provider at call time and are not in any activity input).

In a conversation, agentcore's subclass of Temporal's interceptor leaves out three kinds of span
that have no duration and say nothing the others do not: ``StartActivity`` (the workflow passes
its context to the activity without one), ``RunActivity`` around a model or tool call (the GenAI
span stands in its place) and ``ValidateUpdate`` (``HandleUpdate`` follows it). A tool turn is then
4 spans on the worker instead of 11, and costs that much less to make and export (bench entry 43).
Nor are the ``activity_events`` signals a streaming call sends its conversation (a batch of deltas
each, about 250 for a 10 s answer), on the client or the handler side.
Other workflows on a worker keep Temporal's spans unchanged.

Without the extra installed, or without an endpoint, nothing is traced and nothing is imported.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NoReturn

from ..protocol import SIGNAL_ACTIVITY_EVENTS

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer
    from temporalio.contrib.opentelemetry import TracingInterceptor

CAPTURE_CONTENT_ENV = "AGENTCORE_OTEL_CAPTURE_CONTENT"
DEFAULT_SERVICE_NAME = "agentcore"
TRACER_NAME = "agentcore"

logger = logging.getLogger("agentcore.tracing")

# Temporal's own updates and queries (the event stream's polls and offsets): not traced.
INTERNAL_UPDATE_PREFIX = "__temporal_"
# The batches of deltas and tool progress a model or tool call sends its conversation while it runs
# (``agentcore.activities.events``): a dozen or more a turn, each a client and a handler span that
# said nothing the call's own span does not. Not traced, on either side.
UNTRACED_SIGNALS = frozenset({SIGNAL_ACTIVITY_EVENTS})

_lock = threading.Lock()
_interceptor_class: type[TracingInterceptor] | None = None
_configured: bool | None = None
_provider: Any = None


def tracing_requested() -> bool:
    """The environment asks for traces: an OTLP endpoint is set and the SDK is not disabled."""
    env = os.environ.get
    if env("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if env("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return bool(env("OTEL_EXPORTER_OTLP_ENDPOINT") or env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def capture_content() -> bool:
    """``AGENTCORE_OTEL_CAPTURE_CONTENT=true``: spans carry prompt and answer text (off by default)."""
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() in {"1", "true", "yes"}


def configure_tracing() -> bool:
    """Install the OTLP exporter once per process when the environment asks for it; True if tracing.

    A provider the application installed already (``opentelemetry.trace.set_tracer_provider``) is
    kept: its spans go wherever the application sends them."""
    global _configured, _provider
    with _lock:
        if _configured is not None:
            return _configured
        _configured = False
        if not tracing_requested():
            return False
        try:
            from opentelemetry import trace
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import SERVICE_NAME, Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError:
            logger.warning(
                "OTEL_EXPORTER_OTLP_ENDPOINT is set but OpenTelemetry is not installed: "
                "pip install 'agentcore[otel]' to export traces"
            )
            return False
        current = trace.get_tracer_provider()
        if isinstance(current, TracerProvider):
            _configured = True
            return True
        # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; ours is the fallback
        # name (attributes passed here would win over the environment's).
        named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get(
            "OTEL_RESOURCE_ATTRIBUTES", ""
        )
        resource = Resource.create({} if named else {SERVICE_NAME: DEFAULT_SERVICE_NAME})
        provider = TracerProvider(resource=resource)
        # The exporter reads the endpoint, headers, timeout and compression from OTEL_EXPORTER_OTLP_*;
        # the batch processor keeps export off the worker's event loop.
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
        _provider = provider
        _configured = True
        return True


def tracer() -> Tracer | None:
    """agentcore's tracer when tracing is configured, else None (callers then make no spans)."""
    if not configure_tracing():
        return None
    from opentelemetry import trace

    return trace.get_tracer(TRACER_NAME)


def tracing_interceptor() -> TracingInterceptor | None:
    """Temporal's tracing interceptor for a client (workers made from it inherit it), or None."""
    if not configure_tracing():
        return None
    return _agent_tracing_interceptor_class()()


def _agent_tracing_interceptor_class() -> type[TracingInterceptor]:
    # Defined on first use: opentelemetry is an optional extra.
    global _interceptor_class
    if _interceptor_class is not None:
        return _interceptor_class
    import opentelemetry.context
    import opentelemetry.trace
    import temporalio.activity
    import temporalio.api.common.v1
    import temporalio.client
    import temporalio.worker
    import temporalio.workflow
    from temporalio.contrib.opentelemetry import TracingInterceptor, TracingWorkflowInboundInterceptor

    from ..protocol import WORKFLOW_NAME
    from .observe import ACTIVITY_SPAN_KEY, genai_span

    Headers = Mapping[str, temporalio.api.common.v1.Payload]

    class _ContextToActivities(temporalio.worker.WorkflowOutboundInterceptor):
        """Passes the conversation's trace context on to its activities and its next run, with no
        ``StartActivity`` span in between (the calls a conversation makes: no child workflows)."""

        def __init__(
            self, next: temporalio.worker.WorkflowOutboundInterceptor, root: TracingWorkflowInboundInterceptor
        ) -> None:
            super().__init__(next)
            self.root = root

        def _with_context(self, headers: Headers) -> Headers:
            if temporalio.workflow.unsafe.is_replaying():
                return headers  # a replayed command is not sent again: its headers go nowhere
            carrier: dict[str, str] = {}
            self.root.text_map_propagator.inject(carrier)
            if not carrier:
                return headers
            return {**headers, self.root.header_key: self.root.payload_converter.to_payloads([carrier])[0]}

        def start_activity(
            self, input: temporalio.worker.StartActivityInput
        ) -> temporalio.workflow.ActivityHandle[Any]:
            input.headers = self._with_context(input.headers)
            return super().start_activity(input)

        def start_local_activity(
            self, input: temporalio.worker.StartLocalActivityInput
        ) -> temporalio.workflow.ActivityHandle[Any]:
            input.headers = self._with_context(input.headers)
            return super().start_local_activity(input)

        def continue_as_new(self, input: temporalio.worker.ContinueAsNewInput) -> NoReturn:
            input.headers = self._with_context(input.headers)
            super().continue_as_new(input)

    class _UntracedInternalUpdates(TracingWorkflowInboundInterceptor):
        conversation = False

        def init(self, outbound: temporalio.worker.WorkflowOutboundInterceptor) -> None:
            self.conversation = outbound.info().workflow_type == WORKFLOW_NAME
            if self.conversation:
                temporalio.worker.WorkflowInboundInterceptor.init(self, _ContextToActivities(outbound, self))
            else:
                super().init(outbound)

        def handle_update_validator(self, input: temporalio.worker.HandleUpdateInput) -> None:
            if self.conversation or input.update.startswith(INTERNAL_UPDATE_PREFIX):
                self.next.handle_update_validator(input)
                return
            super().handle_update_validator(input)

        async def handle_update_handler(self, input: temporalio.worker.HandleUpdateInput) -> Any:
            if input.update.startswith(INTERNAL_UPDATE_PREFIX):
                return await self.next.handle_update_handler(input)
            return await super().handle_update_handler(input)

        def handle_query(self, input: temporalio.worker.HandleQueryInput) -> Any:
            if input.query.startswith(INTERNAL_UPDATE_PREFIX):
                return self.next.handle_query(input)
            return super().handle_query(input)

        async def handle_signal(self, input: temporalio.worker.HandleSignalInput) -> None:
            if input.signal in UNTRACED_SIGNALS:
                await self.next.handle_signal(input)
                return
            await super().handle_signal(input)

    class _ClientSkippingInternalUpdates(temporalio.client.OutboundInterceptor):
        def __init__(
            self,
            traced: temporalio.client.OutboundInterceptor,
            untraced: temporalio.client.OutboundInterceptor,
        ) -> None:
            super().__init__(traced)
            self.untraced = untraced

        async def start_workflow_update(
            self, input: temporalio.client.StartWorkflowUpdateInput
        ) -> temporalio.client.WorkflowUpdateHandle[Any]:
            if input.update.startswith(INTERNAL_UPDATE_PREFIX):
                return await self.untraced.start_workflow_update(input)
            return await super().start_workflow_update(input)

        async def query_workflow(self, input: temporalio.client.QueryWorkflowInput) -> Any:
            if input.query.startswith(INTERNAL_UPDATE_PREFIX):
                return await self.untraced.query_workflow(input)
            return await super().query_workflow(input)

        async def signal_workflow(self, input: temporalio.client.SignalWorkflowInput) -> None:
            if input.signal in UNTRACED_SIGNALS:
                await self.untraced.signal_workflow(input)
                return
            await super().signal_workflow(input)

    class _GenAIActivitySpans(temporalio.worker.ActivityInboundInterceptor):
        """A model or tool call's span is made here, as the activity's span (the observer fills in
        its attributes); any other activity gets Temporal's ``RunActivity``."""

        def __init__(
            self,
            next: temporalio.worker.ActivityInboundInterceptor,
            traced: temporalio.worker.ActivityInboundInterceptor,
            root: TracingInterceptor,
        ) -> None:
            super().__init__(next)
            self.traced = traced
            self.root = root

        def _parent(self, headers: Headers) -> opentelemetry.context.Context:
            payload = headers.get(self.root.header_key)
            carrier = self.root.payload_converter.from_payloads([payload])[0] if payload else None
            return (
                self.root.text_map_propagator.extract(carrier) if carrier else opentelemetry.context.Context()
            )

        async def execute_activity(self, input: temporalio.worker.ExecuteActivityInput) -> Any:
            info = temporalio.activity.info()
            named = genai_span(info.activity_type, input.args)
            if named is None:
                return await self.traced.execute_activity(input)
            name, kind = named
            parent = self._parent(input.headers)
            attributes = {
                "temporalWorkflowID": info.workflow_id or "",
                "temporalRunID": info.workflow_run_id or "",
                "temporalActivityID": info.activity_id,
            }
            span = self.root.tracer.start_span(name, context=parent, kind=kind, attributes=attributes)
            context = opentelemetry.trace.set_span_in_context(span, parent)
            token = opentelemetry.context.attach(
                opentelemetry.context.set_value(ACTIVITY_SPAN_KEY, span, context)
            )
            try:
                return await super().execute_activity(input)
            except Exception as err:
                # Unless the observer said what failed (a sampled-out span has no status at all).
                status = getattr(span, "status", None)
                if status is not None and status.is_unset:
                    span.set_status(opentelemetry.trace.StatusCode.ERROR, f"{type(err).__name__}: {err}")
                raise
            finally:
                opentelemetry.context.detach(token)
                span.end()

    class AgentTracingInterceptor(TracingInterceptor):
        """Temporal's tracing interceptor, minus the event stream's plumbing and the spans a
        conversation's model and tool calls do not need.

        A subscriber reads a conversation's events through ``__temporal_workflow_stream_poll``
        updates (and ``__temporal_*`` queries), one or more per turn: three spans each (client,
        validator, handler) that say nothing about the conversation, and cost the worker a share
        of its tracing CPU. The conversation's own trims are in the module's docstring."""

        def intercept_activity(
            self, next: temporalio.worker.ActivityInboundInterceptor
        ) -> temporalio.worker.ActivityInboundInterceptor:
            return _GenAIActivitySpans(next, super().intercept_activity(next), self)

        def intercept_client(
            self, next: temporalio.client.OutboundInterceptor
        ) -> temporalio.client.OutboundInterceptor:
            return _ClientSkippingInternalUpdates(super().intercept_client(next), next)

        def workflow_interceptor_class(
            self, input: temporalio.worker.WorkflowInterceptorClassInput
        ) -> type[TracingWorkflowInboundInterceptor]:
            super().workflow_interceptor_class(input)
            return _UntracedInternalUpdates

    _interceptor_class = AgentTracingInterceptor
    return _interceptor_class


def __getattr__(name: str) -> Any:
    # ``AgentTracingInterceptor``: defined on first use (opentelemetry is an optional extra), for an
    # application that builds its own client with a tracer of its own:
    # ``Client.connect(..., interceptors=[AgentTracingInterceptor(tracer)])``.
    if name == "AgentTracingInterceptor":
        return _agent_tracing_interceptor_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def has_tracing_interceptor(interceptors: Any) -> bool:
    try:
        from temporalio.contrib.opentelemetry import TracingInterceptor
    except ImportError:
        return False
    return any(isinstance(interceptor, TracingInterceptor) for interceptor in interceptors)


def flush_tracing(timeout_seconds: float = 5.0) -> None:
    """Send the spans still batched (a command about to exit); a no-op without tracing."""
    provider = _provider
    if provider is not None:
        provider.force_flush(int(timeout_seconds * 1000))


__all__ = [
    "CAPTURE_CONTENT_ENV",
    "capture_content",
    "configure_tracing",
    "flush_tracing",
    "has_tracing_interceptor",
    "tracer",
    "tracing_interceptor",
    "tracing_requested",
]
