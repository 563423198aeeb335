"""Traces over OpenTelemetry (the ``agentcore[otel]`` extra), configured by the standard ``OTEL_*`` variables.

With ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) set, every process
that connects through ``agentcore.temporal.connect`` exports spans over OTLP/HTTP to it, named
``OTEL_SERVICE_NAME`` (default ``agentcore``):

- the client's calls and the workflow's work, from Temporal's own
  ``temporalio.contrib.opentelemetry.OpenTelemetryInterceptor`` (the interceptor of the SDK's
  ``OpenTelemetryPlugin``, with its spans: ``StartWorkflow``, ``StartWorkflowUpdate``,
  ``RunWorkflow``, ``HandleUpdate``, ``StartActivity``, ``RunActivity``, ...) under the SDK's
  replay-safe tracer provider (``create_tracer_provider``): span ids in a workflow come from its
  own randomness and no span is ended while a worker replays history, so a replay after a worker
  restart adds none. An application that installs its own provider makes it with
  ``create_tracer_provider`` too (a plain one is refused by the SDK's interceptor: agentcore then
  leaves tracing off and says so);
- one span per model call (``chat {model}``) and per tool call (``execute_tool {name}``): the
  activity's own span, with the OpenTelemetry GenAI semantic conventions' attributes and
  ``agentcore.session.id`` (filled in by ``agentcore.temporal.observe``) and Temporal's
  ``temporalWorkflowID`` / ``temporalRunID`` / ``temporalActivityID``.

The trace context travels in Temporal headers, so a conversation started by a traced client is one
trace from the client's ``StartWorkflow`` down to each model and tool call. Prompt and answer text is
left out of spans unless ``AGENTCORE_OTEL_CAPTURE_CONTENT=true``; API keys never enter them (they are
read by the provider at call time and are not in any activity input).

A conversation runs under the same SDK interceptor in its propagation-only form
(``add_temporal_spans=False``: the context still reaches every activity and the next run after
continue-as-new), and agentcore adds the spans that say something: a ``RunWorkflow`` mark at the
start of each run (a span over the run would last as long as the conversation, and be exported only
when it ends), one ``HandleUpdate`` / ``HandleSignal`` / ``HandleQuery`` span per command, and the
model and tool calls' spans in place of ``StartActivity`` / ``RunActivity``. Left out: the
``activity_events`` signals a streaming call sends its conversation (a batch of deltas each, about
250 for a 10 s answer), on the client and the handler side; ``ValidateUpdate`` (``HandleUpdate``
follows it); and the event stream's ``__temporal_*`` updates and queries, for every workflow. Other
workflows on a worker keep Temporal's spans unchanged.

Without the extra installed, or without an endpoint, nothing is traced and nothing is imported.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

CAPTURE_CONTENT_ENV = "AGENTCORE_OTEL_CAPTURE_CONTENT"
DEFAULT_SERVICE_NAME = "agentcore"

logger = logging.getLogger("agentcore.tracing")


_lock = threading.Lock()
_interceptor_class: type[Any] | None = None  # AgentTracingInterceptor, once imported
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
            from temporalio.contrib.opentelemetry import ReplaySafeTracerProvider, create_tracer_provider
        except ImportError:
            logger.warning(
                "OTEL_EXPORTER_OTLP_ENDPOINT is set but OpenTelemetry is not installed: "
                "pip install 'agentcore[otel]' to export traces"
            )
            return False
        current = trace.get_tracer_provider()
        if isinstance(current, ReplaySafeTracerProvider):
            _configured = True
            return True
        if isinstance(current, TracerProvider):
            logger.warning(
                "the application's OpenTelemetry tracer provider is not replay-safe: make it with "
                "temporalio.contrib.opentelemetry.create_tracer_provider() to trace conversations"
            )
            return False
        # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; ours is the fallback
        # name (attributes passed here would win over the environment's).
        named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get(
            "OTEL_RESOURCE_ATTRIBUTES", ""
        )
        resource = Resource.create({} if named else {SERVICE_NAME: DEFAULT_SERVICE_NAME})
        # Temporal's replay-safe provider: span ids from the workflow's own randomness, and no
        # span ended while a worker replays history (a restart re-exports nothing).
        provider = _shared_tracers(create_tracer_provider(resource=resource))
        # The exporter reads the endpoint, headers, timeout and compression from OTEL_EXPORTER_OTLP_*;
        # the batch processor keeps export off the worker's event loop.
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
        _provider = provider
        _configured = True
        return True


def _shared_tracers(provider: Any) -> Any:
    """``provider`` (a ``ReplaySafeTracerProvider``) handing out one tracer per name; made once a process."""
    from ._otel import SharedTracers

    return SharedTracers(provider)


def tracer() -> Tracer | None:
    """agentcore's tracer when tracing is configured, else None (callers then make no spans)."""
    if not configure_tracing():
        return None
    from ._otel import tracer as otel_tracer

    return otel_tracer()


def tracing_interceptor() -> Any:
    """agentcore's tracing interceptor (``AgentTracingInterceptor``) for a client (workers made
    from it inherit it), or None."""
    if not configure_tracing():
        return None
    return _agent_tracing_interceptor_class()()


def _agent_tracing_interceptor_class() -> type[Any]:
    # Imported on first use: opentelemetry is an optional extra.
    global _interceptor_class
    if _interceptor_class is None:
        from ._otel import AgentTracingInterceptor

        _interceptor_class = AgentTracingInterceptor
    return _interceptor_class


def __getattr__(name: str) -> Any:
    # ``AgentTracingInterceptor``: imported on first use (opentelemetry is an optional extra), for an
    # application that builds its own client under its own ``create_tracer_provider()`` provider:
    # ``Client.connect(..., interceptors=[AgentTracingInterceptor()])``.
    if name == "AgentTracingInterceptor":
        return _agent_tracing_interceptor_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def has_tracing_interceptor(interceptors: Any, plugins: Any = ()) -> bool:
    """One of Temporal's tracing interceptors is there: agentcore's, the SDK's or the older
    ``TracingInterceptor``, given as an interceptor or brought by one of ``plugins`` (the SDK's
    ``OpenTelemetryPlugin`` brings its ``OpenTelemetryInterceptor``)."""
    try:
        from temporalio.contrib.opentelemetry import OpenTelemetryInterceptor, TracingInterceptor
        from temporalio.plugin import SimplePlugin
    except ImportError:
        return False
    kinds: tuple[type, ...] = (OpenTelemetryInterceptor, TracingInterceptor)
    if _interceptor_class is not None:
        kinds = (*kinds, _interceptor_class)
    brought = [
        interceptor
        for plugin in plugins
        if isinstance(plugin, SimplePlugin)
        for interceptor in plugin.interceptors or ()
    ]
    return any(isinstance(interceptor, kinds) for interceptor in [*interceptors, *brought])


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
