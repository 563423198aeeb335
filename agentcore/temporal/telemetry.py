"""The Temporal runtime agentcore's processes connect with: Temporal Core's own log lines go through
Python logging.

Core (the SDK's Rust part) writes its warnings (``temporalio_client::retry``: a poll retried while
the server is away, say) straight to the process's stdout, coloured, whatever the process's log
format. With ``LogForwardingConfig`` they become records of the logger ``temporalio.core`` (the
Rust target appended to its name), formatted like every other line: JSON lines under
``--log-format json``.
"""

from __future__ import annotations

import logging
import threading

from temporalio.runtime import (
    LogForwardingConfig,
    LoggingConfig,
    MetricBuffer,
    OpenTelemetryConfig,
    PrometheusConfig,
    Runtime,
    TelemetryConfig,
    TelemetryFilter,
)

CORE_LOGGER = "temporalio.core"

_lock = threading.Lock()
_runtime: Runtime | None = None


def core_logging() -> LoggingConfig:
    """Core's warnings and errors, forwarded to the ``temporalio.core`` logger."""
    return LoggingConfig(
        filter=TelemetryFilter(core_level="WARN", other_level="ERROR"),
        forwarding=LogForwardingConfig(logger=logging.getLogger(CORE_LOGGER)),
    )


def agentcore_runtime(
    metrics: OpenTelemetryConfig | PrometheusConfig | MetricBuffer | None = None,
) -> Runtime:
    """A new runtime forwarding Core's logs, reporting the SDK's metrics to ``metrics`` if given."""
    return Runtime(telemetry=TelemetryConfig(logging=core_logging(), metrics=metrics))


def default_runtime() -> Runtime:
    """The process's one runtime without metrics (a runtime holds threads of its own: made once)."""
    global _runtime
    with _lock:
        if _runtime is None:
            _runtime = agentcore_runtime()
        return _runtime


__all__ = ["CORE_LOGGER", "agentcore_runtime", "core_logging", "default_runtime"]
