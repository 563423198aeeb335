"""Streaming LLM providers on httpx, selected by ``Model.api``.

``stream(model, context, options)`` is the ``StreamFn`` the loop uses by default: it dispatches on
``model.api`` through a registry (``openai-completions``, ``anthropic-messages``; others can be added
with ``register_provider``). Like every provider stream it never raises: an unknown api, a refused
request, a dropped connection or an abort all end the stream with an ``error`` event whose message has
``stop_reason`` ``error``/``aborted``, an ``error_message``, and (on the event) the retry
classification.

Module map::

    sse.py                 SSE framing (shared)
    partial_json.py        tool arguments from JSON still arriving
    catalog.py             MODELS, get_model, calculate_cost
    errors.py              failure classification, retry-after, context overflow
    keys.py                API key resolution (explicit > callback > environment)
    base.py                what both providers share (re-exported from the four below)
    builder.py             the partial-message builder and its stream events
    transport.py           the shared HTTP client per loop; posting a request, reading its SSE
    driver.py              the stream driver: one request to its single final event
    conversion.py          transcript clean-up, the conversion memo
    openai_completions.py  OpenAI Chat Completions and compatible servers
    anthropic_messages.py  Anthropic Messages
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from ..events import StreamEvent
from ..model import Model
from ..runtime import LlmContext, StreamFn, StreamOptions
from .anthropic_messages import stream_anthropic_messages
from .base import ConversionMemo, Normalizer, PartialMessageBuilder, aclose_shared_client, normalize_messages
from .catalog import MODELS, UnknownModelError, calculate_cost, get_model
from .errors import (
    CONTEXT_OVERFLOW_PREFIX,
    ProviderFailure,
    classify_http_status,
    is_context_overflow,
)
from .keys import resolve_api_key, set_api_key_resolver
from .openai_completions import stream_openai_completions
from .partial_json import RAW_ARGUMENTS_KEY, invalid_arguments, parse_partial_json

_PROVIDERS: dict[str, StreamFn] = {
    "openai-completions": stream_openai_completions,
    "anthropic-messages": stream_anthropic_messages,
}


def register_provider(api: str, stream_fn: StreamFn) -> None:
    """Make ``stream`` route models with ``api`` to ``stream_fn`` (replaces an earlier registration)."""
    _PROVIDERS[api] = stream_fn


def get_provider(api: str) -> StreamFn | None:
    return _PROVIDERS.get(api)


async def stream(model: Model, context: LlmContext, options: StreamOptions) -> AsyncIterator[StreamEvent]:
    """The default ``StreamFn``: the provider registered for ``model.api``."""
    provider = _PROVIDERS.get(model.api)
    if provider is None:
        builder = PartialMessageBuilder(model)
        yield builder.start()
        known = ", ".join(sorted(_PROVIDERS))
        failure = ProviderFailure(
            model.provider,
            f"No provider for api {model.api!r} (known: {known})",
            retryable=False,
            kind="config",
        )
        yield builder.failed(failure, None)
        return
    async for event in provider(model, context, options):
        yield event


__all__ = [
    "CONTEXT_OVERFLOW_PREFIX",
    "MODELS",
    "ConversionMemo",
    "Normalizer",
    "RAW_ARGUMENTS_KEY",
    "ProviderFailure",
    "UnknownModelError",
    "aclose_shared_client",
    "calculate_cost",
    "classify_http_status",
    "get_model",
    "get_provider",
    "invalid_arguments",
    "is_context_overflow",
    "normalize_messages",
    "parse_partial_json",
    "register_provider",
    "resolve_api_key",
    "set_api_key_resolver",
    "stream",
    "stream_anthropic_messages",
    "stream_openai_completions",
]
