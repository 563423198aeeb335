"""Temporal glue used by the client and the worker (the rest of ``agentcore`` imports no Temporal)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .connect import (
    DATA_CONVERTER,
    ConnectionSettings,
    TemporalConfigError,
    connect,
    default_data_converter,
    ensure_data_converter,
    load_connect_config,
    search_attribute_keys,
)
from .devserver import DevServer, dynamic_config_args, find_temporal_binary

if TYPE_CHECKING:
    from .plugin import AgentcorePlugin

__all__ = [
    "AgentcorePlugin",
    "DATA_CONVERTER",
    "ConnectionSettings",
    "TemporalConfigError",
    "load_connect_config",
    "DevServer",
    "connect",
    "default_data_converter",
    "dynamic_config_args",
    "ensure_data_converter",
    "find_temporal_binary",
    "search_attribute_keys",
]


def __getattr__(name: str) -> Any:
    # The plugin brings the workflow and its activities: imported when asked for, so a process that
    # only connects (the CLI, a web app) does not load them.
    if name == "AgentcorePlugin":
        from .plugin import AgentcorePlugin

        return AgentcorePlugin
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
