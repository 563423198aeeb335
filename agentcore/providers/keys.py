"""API keys, resolved at call time in the process that makes the call.

Order: an explicit ``StreamOptions.api_key``, then a callback (``AgentOptions.get_api_key`` passed by the
loop, or one installed process-wide with ``set_api_key_resolver``), then the environment
(``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, or ``<PROVIDER>_API_KEY`` for any other provider name).

Keys never travel in messages, events, errors or logs: ``StreamOptions.api_key`` is excluded from
serialisation, and provider error text is passed through ``errors.redact`` in case a server echoes
the request's headers back.

A provider other than ``openai``/``anthropic`` (``ollama``, ``openrouter``...) only reads its own
variable: falling back to ``OPENAI_API_KEY`` would send an OpenAI key to a third-party server.
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Awaitable, Callable

ApiKeyResolver = Callable[[str], "str | None | Awaitable[str | None]"]

_resolver: ApiKeyResolver | None = None


def set_api_key_resolver(resolver: ApiKeyResolver | None) -> None:
    """Install (or with None remove) a process-wide ``resolver(provider) -> key`` callback."""
    global _resolver
    _resolver = resolver


def env_var_for(provider: str) -> str:
    """``openai`` -> ``OPENAI_API_KEY``; ``my-proxy`` -> ``MY_PROXY_API_KEY``."""
    return re.sub(r"[^A-Z0-9]+", "_", provider.upper()).strip("_") + "_API_KEY"


async def resolve_api_key(
    provider: str, explicit: str | None = None, callback: ApiKeyResolver | None = None
) -> str | None:
    if explicit:
        return explicit
    for candidate in (callback, _resolver):
        if candidate is None:
            continue
        key = candidate(provider)
        if inspect.isawaitable(key):
            key = await key
        if key:
            return key
    return os.environ.get(env_var_for(provider)) or None
