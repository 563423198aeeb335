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

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..protocol import SIGNAL_ACTIVITY_EVENTS

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

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
_interceptor_class: type[Any] | None = None  # AgentTracingInterceptor, once defined
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
    from temporalio.contrib.opentelemetry import ReplaySafeTracerProvider

    class SharedTracers(ReplaySafeTracerProvider):
        """``create_tracer_provider()``'s provider, handing out one tracer per name.

        Temporal's interceptor asks the global provider for its tracer around every command it
        carries a context through (each activity started, each activity run, each update handled),
        and OpenTelemetry's provider builds a new one each time (with a deprecation warning raised
        and silenced, and the warning filters rewritten): 12 us a time, more than carrying the
        context itself. The tracers are the wrapped provider's, replay-safe as it makes them."""

        def __init__(self, wrapped: ReplaySafeTracerProvider) -> None:
            # Everything is delegated to ``wrapped``: its state is not this object's.
            self._wrapped = wrapped
            self._tracers: dict[tuple[str, str | None, str | None], Any] = {}

        def get_tracer(
            self,
            instrumenting_module_name: str,
            instrumenting_library_version: str | None = None,
            schema_url: str | None = None,
            attributes: Any = None,
        ) -> Any:
            if attributes is not None:
                return self._wrapped.get_tracer(
                    instrumenting_module_name, instrumenting_library_version, schema_url, attributes
                )
            key = (instrumenting_module_name, instrumenting_library_version, schema_url)
            found = self._tracers.get(key)
            if found is None:
                found = self._tracers[key] = self._wrapped.get_tracer(*key)
            return found

        def add_span_processor(self, span_processor: Any) -> None:
            self._wrapped.add_span_processor(span_processor)

        def shutdown(self) -> None:
            self._wrapped.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return self._wrapped.force_flush(timeout_millis)

        def id_generator(self) -> Any:
            return self._wrapped.id_generator()

    return SharedTracers(provider)


def tracer() -> Tracer | None:
    """agentcore's tracer when tracing is configured, else None (callers then make no spans)."""
    if not configure_tracing():
        return None
    from opentelemetry import trace

    return trace.get_tracer(TRACER_NAME)


def tracing_interceptor() -> Any:
    """agentcore's tracing interceptor (``AgentTracingInterceptor``) for a client (workers made
    from it inherit it), or None."""
    if not configure_tracing():
        return None
    return _agent_tracing_interceptor_class()()


def _agent_tracing_interceptor_class() -> type[Any]:
    # Defined on first use: opentelemetry is an optional extra.
    global _interceptor_class
    if _interceptor_class is not None:
        return _interceptor_class
    import opentelemetry.context
    import opentelemetry.trace
    import temporalio.activity
    import temporalio.client
    import temporalio.worker
    import temporalio.workflow
    from temporalio.contrib.opentelemetry import OpenTelemetryInterceptor

    from ..protocol import WORKFLOW_NAME
    from .observe import ACTIVITY_SPAN_KEY, genai_span

    def workflow_tracer() -> opentelemetry.trace.Tracer:
        # The process's provider, as the SDK's interceptor uses it: a ReplaySafeTracerProvider
        # (checked when a worker is made), so a span is not ended again while history is replayed.
        return opentelemetry.trace.get_tracer(TRACER_NAME)

    @contextlib.contextmanager
    def workflow_span(name: str) -> Iterator[None]:
        info = temporalio.workflow.info()
        attributes = {"temporalWorkflowID": info.workflow_id, "temporalRunID": info.run_id}
        with workflow_tracer().start_as_current_span(
            name, kind=opentelemetry.trace.SpanKind.SERVER, attributes=attributes
        ):
            yield

    class _ConversationSpans(temporalio.worker.WorkflowInboundInterceptor):
        """A conversation's own spans, made inside the SDK's propagation-only interceptor (so in
        the context of the call that carried them): a mark for each run, and one span per update,
        signal and query a user sends; nothing for the event stream or the deltas."""

        async def execute_workflow(self, input: temporalio.worker.ExecuteWorkflowInput) -> Any:
            # A run lasts as long as the conversation (days): a span over it would be exported only
            # when it ends, if ever (a worker that stops leaves it open). Its mark is at its start.
            with workflow_span(f"RunWorkflow:{temporalio.workflow.info().workflow_type}"):
                pass
            return await self.next.execute_workflow(input)

        async def handle_signal(self, input: temporalio.worker.HandleSignalInput) -> None:
            if input.signal in UNTRACED_SIGNALS:
                await self.next.handle_signal(input)
                return
            with workflow_span(f"HandleSignal:{input.signal}"):
                await self.next.handle_signal(input)

        async def handle_query(self, input: temporalio.worker.HandleQueryInput) -> Any:
            with workflow_span(f"HandleQuery:{input.query}"):
                return await self.next.handle_query(input)

        async def handle_update_handler(self, input: temporalio.worker.HandleUpdateInput) -> Any:
            if input.update.startswith(INTERNAL_UPDATE_PREFIX):
                return await self.next.handle_update_handler(input)
            with workflow_span(f"HandleUpdate:{input.update}"):
                return await self.next.handle_update_handler(input)

    def workflow_class(
        traced: type[temporalio.worker.WorkflowInboundInterceptor],
        quiet: type[temporalio.worker.WorkflowInboundInterceptor],
    ) -> type[temporalio.worker.WorkflowInboundInterceptor]:
        class _AgentWorkflowTracing(temporalio.worker.WorkflowInboundInterceptor):
            """The SDK's interceptor with Temporal's spans for any workflow but a conversation, and
            its propagation-only form around ``_ConversationSpans`` for a conversation; the event
            stream's updates and queries bypass both."""

            def __init__(self, next: temporalio.worker.WorkflowInboundInterceptor) -> None:
                super().__init__(next)
                self.traced = traced(next)
                self.quiet = quiet(_ConversationSpans(next))
                self.chosen = self.traced

            def init(self, outbound: temporalio.worker.WorkflowOutboundInterceptor) -> None:
                if outbound.info().workflow_type == WORKFLOW_NAME:
                    self.chosen = self.quiet
                self.chosen.init(outbound)

            async def execute_workflow(self, input: temporalio.worker.ExecuteWorkflowInput) -> Any:
                return await self.chosen.execute_workflow(input)

            async def handle_signal(self, input: temporalio.worker.HandleSignalInput) -> None:
                if input.signal in UNTRACED_SIGNALS:
                    await self.next.handle_signal(input)
                    return
                await self.chosen.handle_signal(input)

            async def handle_query(self, input: temporalio.worker.HandleQueryInput) -> Any:
                if input.query.startswith(INTERNAL_UPDATE_PREFIX):
                    return await self.next.handle_query(input)
                return await self.chosen.handle_query(input)

            def handle_update_validator(self, input: temporalio.worker.HandleUpdateInput) -> None:
                if self.chosen is self.quiet or input.update.startswith(INTERNAL_UPDATE_PREFIX):
                    self.next.handle_update_validator(input)  # HandleUpdate follows
                    return
                self.chosen.handle_update_validator(input)

            async def handle_update_handler(self, input: temporalio.worker.HandleUpdateInput) -> Any:
                if input.update.startswith(INTERNAL_UPDATE_PREFIX):
                    return await self.next.handle_update_handler(input)
                return await self.chosen.handle_update_handler(input)

        return _AgentWorkflowTracing

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

    class _GenAIActivitySpan(temporalio.worker.ActivityInboundInterceptor):
        """A model or tool call's span, made as the activity's own span in the context the SDK's
        interceptor took from its headers (the observer fills in its attributes)."""

        async def execute_activity(self, input: temporalio.worker.ExecuteActivityInput) -> Any:
            info = temporalio.activity.info()
            named = genai_span(info.activity_type, input.args)
            assert named is not None
            name, kind = named
            attributes = {
                "temporalWorkflowID": info.workflow_id or "",
                "temporalRunID": info.workflow_run_id or "",
                "temporalActivityID": info.activity_id,
            }
            span = opentelemetry.trace.get_tracer(TRACER_NAME).start_span(
                name, kind=kind, attributes=attributes
            )
            context = opentelemetry.trace.set_span_in_context(span)
            token = opentelemetry.context.attach(
                opentelemetry.context.set_value(ACTIVITY_SPAN_KEY, span, context)
            )
            try:
                return await self.next.execute_activity(input)
            except Exception as err:
                # Unless the observer said what failed (a sampled-out span has no status at all).
                status = getattr(span, "status", None)
                if status is not None and status.is_unset:
                    span.set_status(opentelemetry.trace.StatusCode.ERROR, f"{type(err).__name__}: {err}")
                raise
            finally:
                opentelemetry.context.detach(token)
                span.end()

    class _ActivitiesByKind(temporalio.worker.ActivityInboundInterceptor):
        def __init__(
            self,
            next: temporalio.worker.ActivityInboundInterceptor,
            traced: temporalio.worker.ActivityInboundInterceptor,
            genai: temporalio.worker.ActivityInboundInterceptor,
        ) -> None:
            super().__init__(next)
            self.traced = traced
            self.genai = genai

        async def execute_activity(self, input: temporalio.worker.ExecuteActivityInput) -> Any:
            if genai_span(temporalio.activity.info().activity_type, input.args) is None:
                return await self.traced.execute_activity(input)
            return await self.genai.execute_activity(input)

    class AgentTracingInterceptor(temporalio.client.Interceptor, temporalio.worker.Interceptor):
        """Temporal's ``OpenTelemetryInterceptor`` (``temporal``, with its spans), minus the event
        stream's plumbing and the spans a conversation does not need.

        The spans, the trace context in Temporal headers and the global ``ReplaySafeTracerProvider``
        it requires (``create_tracer_provider``: replay-stable span ids in workflows, and no span
        ended while history is replayed) are the SDK's. A conversation runs under the same
        interceptor's propagation-only form (``propagation``, ``add_temporal_spans=False``) with
        agentcore's spans for the run and each command; see the module's docstring."""

        def __init__(self) -> None:
            self.temporal = OpenTelemetryInterceptor(add_temporal_spans=True)
            self.propagation = OpenTelemetryInterceptor(add_temporal_spans=False)

        def intercept_client(
            self, next: temporalio.client.OutboundInterceptor
        ) -> temporalio.client.OutboundInterceptor:
            return _ClientSkippingInternalUpdates(self.temporal.intercept_client(next), next)

        def intercept_activity(
            self, next: temporalio.worker.ActivityInboundInterceptor
        ) -> temporalio.worker.ActivityInboundInterceptor:
            traced = self.temporal.intercept_activity(next)
            genai = self.propagation.intercept_activity(_GenAIActivitySpan(next))
            return _ActivitiesByKind(next, traced, genai)

        def workflow_interceptor_class(
            self, input: temporalio.worker.WorkflowInterceptorClassInput
        ) -> type[temporalio.worker.WorkflowInboundInterceptor]:
            return workflow_class(
                self.temporal.workflow_interceptor_class(input),
                self.propagation.workflow_interceptor_class(input),
            )

        def intercept_nexus_operation(
            self, next: temporalio.worker.NexusOperationInboundInterceptor
        ) -> temporalio.worker.NexusOperationInboundInterceptor:
            return self.temporal.intercept_nexus_operation(next)

    _interceptor_class = AgentTracingInterceptor
    return _interceptor_class


def __getattr__(name: str) -> Any:
    # ``AgentTracingInterceptor``: defined on first use (opentelemetry is an optional extra), for an
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
