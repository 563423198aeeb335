"""Worker metrics in the Prometheus text format: the Temporal SDK runtime's and the agent's, on one port.

    metrics = MetricsServer(port=9464)                     # agentcore worker --metrics-port 9464
    client = await connect(runtime=metrics.runtime)        # the SDK reports through this client's runtime
    worker = create_worker(client, metrics=metrics)
    metrics.start()                                        # GET http://host:9464/metrics

Two sources, one endpoint:

- **Temporal SDK metrics** (``temporal_*``: task slots, poll and schedule-to-start latencies, sticky
  cache, activity and workflow task outcomes) come from the SDK core's own Prometheus exporter
  (``temporalio.runtime.PrometheusConfig``). A runtime reports for the clients and workers made
  with it, so the client must be connected with ``runtime=metrics.runtime``. Its exporter listens
  on a loopback port of its own; each scrape of ``/metrics`` reads it and serves its families beside
  the agent's.
- **Agent metrics** (``agentcore_*``, below) are kept with ``prometheus_client``, not the SDK's
  metric meter: the cost in dollars needs a float counter (the meter's counters are integers), and
  every one of them is recorded outside workflow code (in the activity interceptor, or by an extern
  function the workflow interceptor calls when not replaying), so the meter's replay-safety buys
  nothing here.

Labels are the model (``provider/id``), the tool, the outcome and the error code: never a session
id, whose cardinality grows without bound.
"""

from __future__ import annotations

import socket
import threading
import urllib.request
from collections.abc import Iterator
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector
from temporalio.runtime import PrometheusConfig, Runtime

# Model calls take seconds; tool calls from milliseconds (a lookup) to minutes (a build).
MODEL_CALL_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300)
TOOL_CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


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
    """The Temporal SDK runtime's Prometheus families, read from its exporter at each scrape."""

    def __init__(self, url: str) -> None:
        self.url = url

    def collect(self) -> Iterator[Metric]:
        try:
            with urllib.request.urlopen(self.url, timeout=5) as response:
                text = response.read().decode()
        except OSError:
            return  # the runtime's exporter not up yet (or gone): the agent's metrics are still served
        yield from text_string_to_metric_families(text)


def _free_loopback_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def prometheus_runtime(bind_address: str) -> Runtime:
    """A Temporal runtime whose SDK metrics are served in the Prometheus format at ``bind_address``."""
    from .telemetry import agentcore_runtime

    return agentcore_runtime(
        PrometheusConfig(bind_address=bind_address, counters_total_suffix=True, durations_as_seconds=True)
    )


class MetricsServer:
    """``/metrics`` on ``host:port`` (port 0: any free port, see ``port`` once started)."""

    def __init__(self, port: int = 0, *, host: str = "0.0.0.0") -> None:
        self.host = host
        self.port = port
        self.agent = AgentMetrics()
        # The core binds the address itself and cannot report a port it chose, so one is picked
        # here (a loopback port free a moment ago; only this process's scrapes read it).
        sdk_address = f"127.0.0.1:{_free_loopback_port()}"
        self.runtime = prometheus_runtime(sdk_address)
        self.agent.registry.register(_SdkMetrics(f"http://{sdk_address}/metrics"))
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def registry(self) -> CollectorRegistry:
        return self.agent.registry

    def start(self) -> MetricsServer:
        self._server, self._thread = start_http_server(self.port, addr=self.host, registry=self.registry)
        self.port = self._server.server_port
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


__all__ = ["AgentMetrics", "MetricsServer", "prometheus_runtime"]
