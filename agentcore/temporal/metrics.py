"""Worker metrics in the Prometheus text format: the Temporal SDK runtime's and the agent's, on one port.

    metrics = MetricsServer(port=9464)                     # agentcore worker --metrics-port 9464
    client = await connect(runtime=metrics.runtime)        # the SDK reports through this client's runtime
    worker = create_worker(client, metrics=metrics)
    metrics.start()                                        # GET http://host:9464/metrics

Two sources, one endpoint:

- **Temporal SDK metrics** (``temporal_*``: task slots, poll and schedule-to-start latencies, sticky
  cache, activity and workflow task outcomes) come from the SDK runtime's ``MetricBuffer``
  (``temporalio.runtime``): the runtime hands each update to this process, which sums them and
  serves them beside the agent's (durations in seconds, ``_seconds`` in their names). A runtime
  reports for the clients and workers made with it, so the client must be connected with
  ``runtime=metrics.runtime``.
- **Agent metrics** (``agentcore_*``, below) are kept with ``prometheus_client``, not the SDK's
  metric meter: the cost in dollars needs a float counter (the meter's counters are integers), and
  every one of them is recorded outside workflow code (in the activity interceptor, or by an extern
  function the workflow interceptor calls when not replaying), so the meter's replay-safety buys
  nothing here.

Labels are the model (``provider/id``), the tool, the outcome and the error code: never a session
id, whose cardinality grows without bound.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterator
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from temporalio.runtime import (
    BUFFERED_METRIC_KIND_COUNTER,
    BUFFERED_METRIC_KIND_GAUGE,
    BUFFERED_METRIC_KIND_HISTOGRAM,
    MetricBuffer,
    MetricBufferDurationFormat,
)

from .telemetry import agentcore_runtime

# Model calls take seconds; tool calls from milliseconds (a lookup) to minutes (a build).
MODEL_CALL_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300)
TOOL_CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
# The SDK's latencies (task schedule-to-start, execution, polls): from a millisecond to a minute.
SDK_DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
# Updates the runtime may hold between two drains (they are drained every second).
SDK_METRIC_BUFFER_SIZE = 200_000
DURATION_UNITS = frozenset({"s", "seconds", "ms", "milliseconds", "duration"})


class AgentMetrics:
    """The agent's counters and histograms, in a registry of their own."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        self.runs = Counter(
            "agentcore_runs", "Agent runs started (prompt or continue accepted)", ["model"], registry=r
        )
        self.turns = Counter(
            "agentcore_turns", "Turns completed (an assistant message recorded)", ["model"], registry=r
        )
        self.model_calls = Counter(
            "agentcore_model_calls",
            "Model call attempts by outcome (stop, length, toolUse, error, aborted, retry, cancelled)",
            ["model", "outcome"],
            registry=r,
        )
        self.tokens = Counter(
            "agentcore_tokens", "Tokens used, by type (input, output)", ["model", "type"], registry=r
        )
        self.cost = Counter("agentcore_cost_usd", "Cost of model calls in US dollars", ["model"], registry=r)
        self.tool_calls = Counter(
            "agentcore_tool_calls",
            "Tool calls by outcome (ok, error, aborted, cancelled)",
            ["tool", "outcome"],
            registry=r,
        )
        self.errors = Counter("agentcore_errors", "Errors by code", ["code"], registry=r)
        self.aborts = Counter(
            "agentcore_aborts", "Model and tool calls ended by an abort", ["kind"], registry=r
        )
        self.model_call_seconds = Histogram(
            "agentcore_model_call_duration_seconds",
            "Model call latency (one attempt, to its last token)",
            ["model"],
            buckets=MODEL_CALL_BUCKETS,
            registry=r,
        )
        self.tool_call_seconds = Histogram(
            "agentcore_tool_call_duration_seconds",
            "Tool call latency",
            ["tool"],
            buckets=TOOL_CALL_BUCKETS,
            registry=r,
        )


class _SdkMetrics(Collector):
    """The Temporal SDK runtime's metrics, drained from its ``MetricBuffer`` into Prometheus families.

    The runtime hands over each update (a counter's increment, a gauge's value, a histogram's
    observation, with its attributes); they are summed here per metric and label set. Durations
    come in seconds and their names say so (``..._seconds``), as the agent's own do."""

    def __init__(self) -> None:
        self.buffer = MetricBuffer(SDK_METRIC_BUFFER_SIZE, MetricBufferDurationFormat.SECONDS)
        self._lock = threading.Lock()
        self._kinds: dict[str, tuple[int, str]] = {}  # name -> (kind, help)
        self._values: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        self._histograms: dict[tuple[str, tuple[tuple[str, str], ...]], list[float]] = {}

    def drain(self) -> None:
        """Take what the runtime buffered (called on every scrape and every second)."""
        with self._lock:
            for update in self.buffer.retrieve_updates():
                metric = update.metric
                name = _sdk_metric_name(metric.name, metric.unit, metric.kind)
                self._kinds.setdefault(name, (metric.kind, metric.description or metric.name))
                labels = tuple(sorted((key, str(value)) for key, value in update.attributes.items()))
                key = (name, labels)
                if metric.kind == BUFFERED_METRIC_KIND_COUNTER:
                    self._values[key] = self._values.get(key, 0.0) + update.value
                elif metric.kind == BUFFERED_METRIC_KIND_GAUGE:
                    self._values[key] = float(update.value)
                else:
                    # Bucket counts (non-cumulative here), then the sum, then the count.
                    counts = self._histograms.setdefault(key, [0.0] * (len(SDK_DURATION_BUCKETS) + 3))
                    value = float(update.value)
                    counts[bisect.bisect_left(SDK_DURATION_BUCKETS, value)] += 1
                    counts[-2] += value
                    counts[-1] += 1

    def collect(self) -> Iterator[Metric]:
        self.drain()
        with self._lock:
            families: dict[str, Any] = {}
            for name, (kind, help_text) in self._kinds.items():
                if kind == BUFFERED_METRIC_KIND_COUNTER:
                    families[name] = CounterMetricFamily(name, help_text, labels=None)
                elif kind == BUFFERED_METRIC_KIND_GAUGE:
                    families[name] = GaugeMetricFamily(name, help_text, labels=None)
                else:
                    families[name] = HistogramMetricFamily(name, help_text, labels=None)
            for (name, labels), value in self._values.items():
                family = families[name]
                sample = "_total" if isinstance(family, CounterMetricFamily) else ""
                family.samples.append(Sample(name + sample, dict(labels), value, None, None))
            for (name, labels), counts in self._histograms.items():
                family, cumulative = families[name], 0.0
                bounds = [*(_bound(b) for b in SDK_DURATION_BUCKETS), "+Inf"]
                for bound, count in zip(bounds, counts, strict=False):
                    cumulative += count
                    family.samples.append(
                        Sample(name + "_bucket", {**dict(labels), "le": bound}, cumulative, None, None)
                    )
                family.samples.append(Sample(name + "_count", dict(labels), counts[-1], None, None))
                family.samples.append(Sample(name + "_sum", dict(labels), counts[-2], None, None))
        yield from families.values()


def _bound(value: float) -> str:
    return repr(float(value))


def _sdk_metric_name(name: str, unit: str | None, kind: int) -> str:
    if kind == BUFFERED_METRIC_KIND_HISTOGRAM and unit in DURATION_UNITS and not name.endswith("_seconds"):
        return f"{name}_seconds"
    return name.removesuffix("_total")


class _WithoutCreated(Collector):
    """A registry's families without prometheus_client's ``_created`` samples (a timestamp per
    counter and histogram that doubles the series and that no dashboard reads)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        for family in self.registry.collect():
            family.samples = [sample for sample in family.samples if not sample.name.endswith("_created")]
            yield family


class MetricsServer:
    """``/metrics`` on ``host:port`` (port 0: any free port, see ``port`` once started)."""

    def __init__(self, port: int = 0, *, host: str = "0.0.0.0") -> None:
        self.host = host
        self.port = port
        self.agent = AgentMetrics()
        self._sdk = _SdkMetrics()
        self.runtime = agentcore_runtime(self._sdk.buffer)
        self.agent.registry.register(self._sdk)
        self._served = CollectorRegistry(auto_describe=False)
        self._served.register(_WithoutCreated(self.agent.registry))
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    @property
    def registry(self) -> CollectorRegistry:
        return self.agent.registry

    def start(self) -> MetricsServer:
        self._server, self._thread = start_http_server(self.port, addr=self.host, registry=self._served)
        self.port = self._server.server_port
        # The runtime's buffer is drained between scrapes too, so it never fills up and drops updates.
        threading.Thread(target=self._drain_every_second, name="agentcore-sdk-metrics", daemon=True).start()
        return self

    def _drain_every_second(self) -> None:
        while not self._stopping.wait(1.0):
            self._sdk.drain()

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


__all__ = ["AgentMetrics", "MetricsServer"]
