"""The catalog's limits, and cost from genai-prices (or from a model's own prices)."""

from __future__ import annotations

import pytest
from genai_prices import Usage as PricedUsage
from genai_prices import calc_price

from agentcore.errors import ValidationError
from agentcore.messages import Usage
from agentcore.model import Model, ModelCost
from agentcore.providers import MODELS, UnknownModelError, calculate_cost, get_model


def test_known_models_have_limits_and_prices():
    assert {"openai", "anthropic"} <= set(MODELS)
    for provider, models in MODELS.items():
        for model_id, model in models.items():
            assert model.provider == provider and model.id == model_id
            assert model.api == {"openai": "openai-completions", "anthropic": "anthropic-messages"}[provider]
            assert 0 < model.max_tokens <= model.context_window
            # Every catalog model is one genai-prices can price.
            assert calculate_cost(model, Usage(input=1000, output=1000)).cost.total > 0, model_id


def test_get_model_returns_a_copy():
    model = get_model("anthropic", "claude-sonnet-4-5")
    model.base_url = "http://127.0.0.1:1"
    assert get_model("anthropic", "claude-sonnet-4-5").base_url is None


def test_unknown_model_is_a_typed_validation_error():
    with pytest.raises(UnknownModelError, match="unknown model openai/gpt-0"):
        get_model("openai", "gpt-0")
    with pytest.raises(ValidationError, match="unknown provider"):
        get_model("nobody", "x")


@pytest.mark.parametrize(
    ("provider", "model_id"),
    [
        ("openai", "gpt-4o"),
        ("openai", "gpt-5-mini"),
        ("openai", "gpt-4o-2024-08-06"),  # a dated id the catalog does not list
        ("anthropic", "claude-sonnet-4-5"),
        ("anthropic", "claude-haiku-4-5"),
    ],
)
def test_cost_matches_genai_prices_including_cache_tokens(provider: str, model_id: str):
    usage = Usage(input=12_000, output=3_000, cache_read=40_000, cache_write=5_000)
    model = Model(id=model_id, provider=provider, api="openai-completions")
    cost = calculate_cost(model, usage).cost
    # genai-prices counts cached tokens inside the input tokens.
    theirs = calc_price(
        PricedUsage(
            input_tokens=57_000, output_tokens=3_000, cache_read_tokens=40_000, cache_write_tokens=5_000
        ),
        model_id,
        provider_id=provider,
    )
    assert cost.total == pytest.approx(float(theirs.total_price)) and cost.total > 0
    assert cost.output == pytest.approx(float(theirs.output_price))
    assert cost.input + cost.cache_read + cost.cache_write == pytest.approx(float(theirs.input_price))
    assert cost.cache_read > 0 and cost.input > 0


def test_anthropic_cache_rates_and_the_long_prompt_tier():
    model = get_model("anthropic", "claude-sonnet-4-5")
    short = calculate_cost(model, Usage(input=1_000_000 // 10, output=0, cache_read=100_000, cache_write=0))
    assert short.cost.input == pytest.approx(0.3) and short.cost.cache_read == pytest.approx(0.03)
    written = calculate_cost(model, Usage(input=10_000, cache_write=100_000)).cost
    assert written.cache_write == pytest.approx(0.375)  # 1.25x input for 5-minute cache writes
    # Past 200k prompt tokens the whole prompt is billed at the long-context rate.
    long = calculate_cost(model, Usage(input=300_000)).cost
    assert long.input == pytest.approx(300_000 * 6 / 1e6)


def test_a_model_unknown_to_genai_prices_costs_nothing():
    for model in (
        Model(id="llama3.1", provider="ollama", api="openai-completions"),
        Model(id="no-such-model", provider="openai", api="openai-completions"),
    ):
        for _ in range(2):  # the second time from the remembered miss
            usage = calculate_cost(model, Usage(input=1000, output=10, cache_read=5))
            assert usage.cost.total == 0 and usage.total_tokens == 1015


def test_a_models_own_prices_win():
    model = Model(
        id="gpt-4o",
        provider="openai",
        api="openai-completions",
        cost=ModelCost(input=1.0, output=2.0, cache_read=0.5, cache_write=0.25),
    )
    usage = calculate_cost(
        model, Usage(input=1_000_000, output=2_000_000, cache_read=100_000, cache_write=10_000)
    )
    assert usage.cost.input == pytest.approx(1.0)
    assert usage.cost.output == pytest.approx(4.0)
    assert usage.cost.cache_read == pytest.approx(0.05)
    assert usage.cost.cache_write == pytest.approx(0.0025)
    assert usage.cost.total == pytest.approx(5.0525)
    assert usage.total_tokens == 3_110_000
