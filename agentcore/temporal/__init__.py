"""Temporal glue used by the client and the worker (the rest of ``agentcore`` imports no Temporal).

A layer below ``workflows/`` and ``activities/``: nothing here imports them. ``AgentcorePlugin`` lives
above them (``agentcore.plugin``, beside ``agentcore.worker``) and is named here too, where its users
have always imported it: the one import from this layer upward, made when the name is asked for.
The embedded dev server (``DevServer`` and its helpers) also loads on first use: a process that only
connects never imports it.
"""

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
)
from .search_attributes import search_attribute_keys

if TYPE_CHECKING:
    from ..plugin import AgentcorePlugin
    from .devserver import DevServer, dynamic_config_args, find_temporal_binary

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
    if name == "AgentcorePlugin":
        from ..plugin import AgentcorePlugin  # the one import upward (see above)

        return AgentcorePlugin
    if name in ("DevServer", "dynamic_config_args", "find_temporal_binary"):
        from . import devserver

        return getattr(devserver, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
