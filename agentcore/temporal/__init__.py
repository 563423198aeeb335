"""Temporal glue used by the client and the worker (the rest of ``agentcore`` imports no Temporal)."""

from __future__ import annotations

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

__all__ = [
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
