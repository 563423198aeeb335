"""agentcore's OpenTelemetry classes: its tracing interceptor and the shared-tracer provider.

Imported by ``agentcore.temporal.tracing`` only once tracing is on: opentelemetry is an optional extra
(``agentcore[otel]``), and a process without it (or without an endpoint) never loads this module.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, ClassVar

import opentelemetry.context
import opentelemetry.trace
import temporalio.activity
import temporalio.client
import temporalio.worker
import temporalio.workflow
from temporalio.contrib.opentelemetry import OpenTelemetryInterceptor, ReplaySafeTracerProvider

from ..protocol import SIGNAL_ACTIVITY_EVENTS, WORKFLOW_NAME
from .observe import ACTIVITY_SPAN_KEY, genai_span

TRACER_NAME = "agentcore"
# Temporal's own updates and queries (the event stream's polls and offsets): not traced.
INTERNAL_UPDATE_PREFIX = "__temporal_"
# The batches of deltas and tool progress a model or tool call sends its conversation while it runs
# (``agentcore.activities.events``): a dozen or more a turn, each a client and a handler span that
# said nothing the call's own span does not. Not traced, on either side.
UNTRACED_SIGNALS = frozenset({SIGNAL_ACTIVITY_EVENTS})


def tracer() -> opentelemetry.trace.Tracer:
    """agentcore's tracer from the process's provider."""
    return opentelemetry.trace.get_tracer(TRACER_NAME)


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


def _workflow_tracer() -> opentelemetry.trace.Tracer:
    # The process's provider, as the SDK's interceptor uses it: a ReplaySafeTracerProvider
    # (checked when a worker is made), so a span is not ended again while history is replayed.
    return opentelemetry.trace.get_tracer(TRACER_NAME)


@contextlib.contextmanager
def _workflow_span(name: str) -> Iterator[None]:
    info = temporalio.workflow.info()
    attributes = {"temporalWorkflowID": info.workflow_id, "temporalRunID": info.run_id}
    with _workflow_tracer().start_as_current_span(
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
        with _workflow_span(f"RunWorkflow:{temporalio.workflow.info().workflow_type}"):
            pass
        return await self.next.execute_workflow(input)

    async def handle_signal(self, input: temporalio.worker.HandleSignalInput) -> None:
        if input.signal in UNTRACED_SIGNALS:
            await self.next.handle_signal(input)
            return
        with _workflow_span(f"HandleSignal:{input.signal}"):
            await self.next.handle_signal(input)

    async def handle_query(self, input: temporalio.worker.HandleQueryInput) -> Any:
        with _workflow_span(f"HandleQuery:{input.query}"):
            return await self.next.handle_query(input)

    async def handle_update_handler(self, input: temporalio.worker.HandleUpdateInput) -> Any:
        if input.update.startswith(INTERNAL_UPDATE_PREFIX):
            return await self.next.handle_update_handler(input)
        with _workflow_span(f"HandleUpdate:{input.update}"):
            return await self.next.handle_update_handler(input)


class _AgentWorkflowTracing(temporalio.worker.WorkflowInboundInterceptor):
    """The SDK's interceptor with Temporal's spans for any workflow but a conversation, and
    its propagation-only form around ``_ConversationSpans`` for a conversation; the event
    stream's updates and queries bypass both.

    The SDK's two interceptor classes differ per worker: ``_workflow_class`` makes a subclass
    naming them."""

    traced_class: ClassVar[type[temporalio.worker.WorkflowInboundInterceptor]]
    quiet_class: ClassVar[type[temporalio.worker.WorkflowInboundInterceptor]]

    def __init__(self, next: temporalio.worker.WorkflowInboundInterceptor) -> None:
        super().__init__(next)
        self.traced = self.traced_class(next)
        self.quiet = self.quiet_class(_ConversationSpans(next))
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


def _workflow_class(
    traced: type[temporalio.worker.WorkflowInboundInterceptor],
    quiet: type[temporalio.worker.WorkflowInboundInterceptor],
) -> type[temporalio.worker.WorkflowInboundInterceptor]:
    return type(
        "_AgentWorkflowTracing", (_AgentWorkflowTracing,), {"traced_class": traced, "quiet_class": quiet}
    )


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
        span = opentelemetry.trace.get_tracer(TRACER_NAME).start_span(name, kind=kind, attributes=attributes)
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
    agentcore's spans for the run and each command; see ``agentcore.temporal.tracing``."""

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
        return _workflow_class(
            self.temporal.workflow_interceptor_class(input),
            self.propagation.workflow_interceptor_class(input),
        )

    def intercept_nexus_operation(
        self, next: temporalio.worker.NexusOperationInboundInterceptor
    ) -> temporalio.worker.NexusOperationInboundInterceptor:
        return self.temporal.intercept_nexus_operation(next)
