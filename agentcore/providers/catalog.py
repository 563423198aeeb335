"""The model catalog (known models with their limits) and usage -> cost.

Prices come from ``genai-prices`` (pydantic's maintained price data: per provider and model, cache
reads and writes, tiers by prompt length), looked up from the message's provider and model id, so a
dated id (``gpt-4o-2024-08-06``) or a model missing here is priced as well. A ``Model`` given its own
``cost`` (dollars per million tokens) is priced from that instead: a local or private model, or a
negotiated rate. A model neither knows costs 0 ("not priced"). The catalog itself holds what
genai-prices does not: context window, output limit, wire protocol, reasoning and image input.
"""

from __future__ import annotations

import functools
from decimal import Decimal
from types import ModuleType
from typing import Any

from ..errors import ValidationError
from ..messages import Usage, UsageCost
from ..model import Model, ModelCost


class UnknownModelError(ValidationError):
    """``get_model`` was asked for a provider/model pair the catalog does not know."""


def _openai(
    model_id: str, name: str, *, context_window: int, max_tokens: int, reasoning: bool = False
) -> Model:
    return Model(
        id=model_id,
        name=name,
        provider="openai",
        api="openai-completions",
        reasoning=reasoning,
        input=["text", "image"],
        context_window=context_window,
        max_tokens=max_tokens,
    )


def _anthropic(model_id: str, name: str, *, max_tokens: int) -> Model:
    return Model(
        id=model_id,
        name=name,
        provider="anthropic",
        api="anthropic-messages",
        reasoning=True,
        input=["text", "image"],
        context_window=200_000,
        max_tokens=max_tokens,
    )


_GPT_41_WINDOW = 1_047_576

_CATALOG: list[Model] = [
    _openai("gpt-4o", "GPT-4o", context_window=128_000, max_tokens=16_384),
    _openai("gpt-4o-mini", "GPT-4o mini", context_window=128_000, max_tokens=16_384),
    _openai("gpt-4.1", "GPT-4.1", context_window=_GPT_41_WINDOW, max_tokens=32_768),
    _openai("gpt-4.1-mini", "GPT-4.1 mini", context_window=_GPT_41_WINDOW, max_tokens=32_768),
    _openai("gpt-4.1-nano", "GPT-4.1 nano", context_window=_GPT_41_WINDOW, max_tokens=32_768),
    _openai("o3", "o3", context_window=200_000, max_tokens=100_000, reasoning=True),
    _openai("o4-mini", "o4-mini", context_window=200_000, max_tokens=100_000, reasoning=True),
    _openai("gpt-5", "GPT-5", context_window=400_000, max_tokens=128_000, reasoning=True),
    _openai(
        "gpt-5-mini",
        "GPT-5 mini",
        context_window=400_000,
        max_tokens=128_000,
        reasoning=True,
    ),
    _openai(
        "gpt-5-nano",
        "GPT-5 nano",
        context_window=400_000,
        max_tokens=128_000,
        reasoning=True,
    ),
    _anthropic("claude-opus-4-6", "Claude Opus 4.6", max_tokens=128_000),
    _anthropic("claude-sonnet-4-6", "Claude Sonnet 4.6", max_tokens=64_000),
    _anthropic("claude-opus-4-5", "Claude Opus 4.5", max_tokens=64_000),
    _anthropic("claude-sonnet-4-5", "Claude Sonnet 4.5", max_tokens=64_000),
    _anthropic("claude-haiku-4-5", "Claude Haiku 4.5", max_tokens=64_000),
    _anthropic("claude-opus-4-1", "Claude Opus 4.1", max_tokens=32_000),
    _anthropic("claude-sonnet-4-20250514", "Claude Sonnet 4", max_tokens=64_000),
]

# provider -> model id -> Model
MODELS: dict[str, dict[str, Model]] = {}
for _model in _CATALOG:
    MODELS.setdefault(_model.provider, {})[_model.id] = _model


def get_model(provider: str, model_id: str) -> Model:
    """A copy of the catalog's ``Model`` (callers may change ``base_url`` without touching the catalog)."""
    try:
        return MODELS[provider][model_id].model_copy(deep=True)
    except KeyError:
        known = ", ".join(sorted(MODELS.get(provider, {}))) or ", ".join(sorted(MODELS))
        what = "model" if provider in MODELS else "provider"
        raise UnknownModelError(f"unknown {what} {provider}/{model_id}; known: {known}") from None


def calculate_cost(model: Model, usage: Usage) -> Usage:
    """``usage`` with ``total_tokens`` and ``cost`` (USD) filled in: from ``model.cost`` when it has
    prices, else from genai-prices, else zero."""
    total_tokens = usage.input + usage.output + usage.cache_read + usage.cache_write
    if model.cost != ModelCost():
        cost = _cost_from_rates(model.cost, usage)
    else:
        cost = _cost_from_genai_prices(model.provider, model.id, usage)
    return usage.model_copy(update={"cost": cost, "total_tokens": total_tokens})


def _cost_from_rates(price: ModelCost, usage: Usage) -> UsageCost:
    cost = UsageCost(
        input=price.input * usage.input / 1e6,
        output=price.output * usage.output / 1e6,
        cache_read=price.cache_read * usage.cache_read / 1e6,
        cache_write=price.cache_write * usage.cache_write / 1e6,
    )
    cost.total = cost.input + cost.output + cost.cache_read + cost.cache_write
    return cost


_UNPRICED: set[tuple[str, str]] = set()


@functools.cache
def _genai_prices() -> ModuleType:
    # Imported on the first priced call, not with the package: its price data takes about a second
    # to load, which a CLI command or a worker that never prices a call should not wait for.
    import genai_prices

    return genai_prices


def _cost_from_genai_prices(provider: str, model_id: str, usage: Usage) -> UsageCost:
    if (provider, model_id) in _UNPRICED:
        return UsageCost()
    prices = _genai_prices()
    # genai-prices counts cached tokens inside the input tokens; our usage keeps them apart.
    prompt = usage.input + usage.cache_read + usage.cache_write
    counts = {"input_tokens": prompt, "output_tokens": usage.output}
    counts.update(cache_read_tokens=usage.cache_read, cache_write_tokens=usage.cache_write)
    try:
        priced = prices.calc_price(prices.Usage(**counts), model_id, provider_id=provider)
    except LookupError:  # a provider or model it does not know: remembered, asked once
        _UNPRICED.add((provider, model_id))
        return UsageCost()
    # The whole input is priced together (tiers go by the prompt's length); the cached parts are
    # split out at their own rates, as the usage shows them.
    cache_read = _part(prices, priced.model_price, "cache_read_mtok", usage.cache_read, prompt)
    cache_write = _part(prices, priced.model_price, "cache_write_mtok", usage.cache_write, prompt)
    return UsageCost(
        input=float(priced.input_price - cache_read - cache_write),
        output=float(priced.output_price),
        cache_read=float(cache_read),
        cache_write=float(cache_write),
        total=float(priced.total_price),
    )


def _part(prices: ModuleType, model_price: Any, unit: str, tokens: int, prompt: int) -> Decimal:
    """The price of ``tokens`` of one unit, at the tier the whole prompt falls in."""
    rate = getattr(model_price, unit, None)
    if not tokens or rate is None:
        return Decimal(0)
    return Decimal(prices.types.calc_unit_price(rate, tokens, prompt, 1_000_000))
