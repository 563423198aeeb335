"""The model catalog: known models with their prices and limits, and usage -> cost.

Prices are dollars per million tokens, as the vendors publish them (checked against models.dev's
tables; re-check before relying on a figure for billing). A model not listed here still works: build a
``Model`` yourself with its ``api``, ``base_url`` and ``cost`` (zero cost means "not priced").
"""

from __future__ import annotations

from ..errors import ValidationError
from ..messages import Usage, UsageCost
from ..model import Model, ModelCost


class UnknownModelError(ValidationError):
    """``get_model`` was asked for a provider/model pair the catalog does not know."""


def _openai(
    model_id: str,
    name: str,
    price: tuple[float, float, float],
    *,
    context_window: int,
    max_tokens: int,
    reasoning: bool = False,
) -> Model:
    input_price, output_price, cache_read = price
    return Model(
        id=model_id,
        name=name,
        provider="openai",
        api="openai-completions",
        reasoning=reasoning,
        input=["text", "image"],
        context_window=context_window,
        max_tokens=max_tokens,
        # OpenAI bills cache writes as ordinary input, so there is no separate write price.
        cost=ModelCost(input=input_price, output=output_price, cache_read=cache_read, cache_write=0.0),
    )


def _anthropic(
    model_id: str, name: str, input_price: float, output_price: float, *, max_tokens: int
) -> Model:
    return Model(
        id=model_id,
        name=name,
        provider="anthropic",
        api="anthropic-messages",
        reasoning=True,
        input=["text", "image"],
        context_window=200_000,
        max_tokens=max_tokens,
        # Anthropic's rule: cache reads cost 0.1x input, 5-minute cache writes 1.25x input.
        cost=ModelCost(
            input=input_price,
            output=output_price,
            cache_read=round(input_price * 0.1, 6),
            cache_write=round(input_price * 1.25, 6),
        ),
    )


_GPT_41_WINDOW = 1_047_576

_CATALOG: list[Model] = [
    _openai("gpt-4o", "GPT-4o", (2.5, 10.0, 1.25), context_window=128_000, max_tokens=16_384),
    _openai("gpt-4o-mini", "GPT-4o mini", (0.15, 0.6, 0.075), context_window=128_000, max_tokens=16_384),
    _openai("gpt-4.1", "GPT-4.1", (2.0, 8.0, 0.5), context_window=_GPT_41_WINDOW, max_tokens=32_768),
    _openai(
        "gpt-4.1-mini", "GPT-4.1 mini", (0.4, 1.6, 0.1), context_window=_GPT_41_WINDOW, max_tokens=32_768
    ),
    _openai(
        "gpt-4.1-nano", "GPT-4.1 nano", (0.1, 0.4, 0.025), context_window=_GPT_41_WINDOW, max_tokens=32_768
    ),
    _openai("o3", "o3", (2.0, 8.0, 0.5), context_window=200_000, max_tokens=100_000, reasoning=True),
    _openai(
        "o4-mini", "o4-mini", (1.1, 4.4, 0.275), context_window=200_000, max_tokens=100_000, reasoning=True
    ),
    _openai(
        "gpt-5", "GPT-5", (1.25, 10.0, 0.125), context_window=400_000, max_tokens=128_000, reasoning=True
    ),
    _openai(
        "gpt-5-mini",
        "GPT-5 mini",
        (0.25, 2.0, 0.025),
        context_window=400_000,
        max_tokens=128_000,
        reasoning=True,
    ),
    _openai(
        "gpt-5-nano",
        "GPT-5 nano",
        (0.05, 0.4, 0.005),
        context_window=400_000,
        max_tokens=128_000,
        reasoning=True,
    ),
    _anthropic("claude-opus-4-6", "Claude Opus 4.6", 5.0, 25.0, max_tokens=128_000),
    _anthropic("claude-sonnet-4-6", "Claude Sonnet 4.6", 3.0, 15.0, max_tokens=64_000),
    _anthropic("claude-opus-4-5", "Claude Opus 4.5", 5.0, 25.0, max_tokens=64_000),
    _anthropic("claude-sonnet-4-5", "Claude Sonnet 4.5", 3.0, 15.0, max_tokens=64_000),
    _anthropic("claude-haiku-4-5", "Claude Haiku 4.5", 1.0, 5.0, max_tokens=64_000),
    _anthropic("claude-opus-4-1", "Claude Opus 4.1", 15.0, 75.0, max_tokens=32_000),
    _anthropic("claude-sonnet-4-20250514", "Claude Sonnet 4", 3.0, 15.0, max_tokens=64_000),
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
    """``usage`` with ``total_tokens`` and ``cost`` filled in from ``model.cost`` ($ per million)."""
    price = model.cost
    cost = UsageCost(
        input=price.input * usage.input / 1e6,
        output=price.output * usage.output / 1e6,
        cache_read=price.cache_read * usage.cache_read / 1e6,
        cache_write=price.cache_write * usage.cache_write / 1e6,
    )
    cost.total = cost.input + cost.output + cost.cache_read + cost.cache_write
    total_tokens = usage.input + usage.output + usage.cache_read + usage.cache_write
    return usage.model_copy(update={"cost": cost, "total_tokens": total_tokens})
