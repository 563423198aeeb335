"""Traces over OpenTelemetry (the ``agentcore[otel]`` extra), configured by the standard ``OTEL_*`` variables.

With ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) set, every process
that connects through ``agentcore.temporal.connect`` exports spans over OTLP/HTTP to it, named
``OTEL_SERVICE_NAME`` (default ``agentcore``):

- the client's calls and the workflow's and activities' work, from Temporal's own
  ``temporalio.contrib.opentelemetry.TracingInterceptor`` (``StartWorkflow``, ``RunWorkflow``,
  ``HandleUpdate``, ``StartActivity``, ``RunActivity``, ...). Its workflow spans are made only
  when the workflow is not replaying, so a replay after a worker restart adds none;
- one span per model call (``chat {model}``) and per tool call (``execute_tool {name}``), made
  by the worker around the activity (``agentcore.temporal.observe``), with the OpenTelemetry GenAI
  semantic conventions' attributes and ``agentcore.session.id``.

The trace context travels in Temporal headers, so a conversation started by a traced client is one
trace from the client's ``StartWorkflow`` down to each tool call. Prompt and answer text is left out
of spans unless ``AGENTCORE_OTEL_CAPTURE_CONTENT=true``; API keys never enter them (they are read by
the provider at call time and are not in any activity input).

Without the extra installed, or without an endpoint, nothing is traced and nothing is imported.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer
    from temporalio.contrib.opentelemetry import TracingInterceptor

CAPTURE_CONTENT_ENV = "AGENTCORE_OTEL_CAPTURE_CONTENT"
DEFAULT_SERVICE_NAME = "agentcore"
TRACER_NAME = "agentcore"

logger = logging.getLogger("agentcore.tracing")

# Temporal's own updates and queries (the event stream's polls and offsets): not traced.
INTERNAL_UPDATE_PREFIX = "__temporal_"

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
    import temporalio.client
    import temporalio.worker
    from temporalio.contrib.opentelemetry import TracingInterceptor, TracingWorkflowInboundInterceptor

    class _UntracedInternalUpdates(TracingWorkflowInboundInterceptor):
        def handle_update_validator(self, input: temporalio.worker.HandleUpdateInput) -> None:
            if input.update.startswith(INTERNAL_UPDATE_PREFIX):
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

    class AgentTracingInterceptor(TracingInterceptor):
        """Temporal's tracing interceptor, minus the event stream's plumbing.

        A subscriber reads a conversation's events through ``__temporal_workflow_stream_poll``
        updates (and ``__temporal_*`` queries), one or more per turn: three spans each (client,
        validator, handler) that say nothing about the conversation, and cost the worker a share
        of its tracing CPU."""

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
