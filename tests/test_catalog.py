from __future__ import annotations

import pytest

from agentcore.errors import ValidationError
from agentcore.messages import Usage
from agentcore.providers import MODELS, UnknownModelError, calculate_cost, get_model


def test_known_models_have_prices_and_limits():
    assert {"openai", "anthropic"} <= set(MODELS)
    for provider, models in MODELS.items():
        for model_id, model in models.items():
            assert model.provider == provider and model.id == model_id
            assert model.api == {"openai": "openai-completions", "anthropic": "anthropic-messages"}[provider]
            assert model.cost.input > 0 and model.cost.output > 0
            assert 0 < model.max_tokens <= model.context_window


def test_get_model_returns_a_copy():
    model = get_model("anthropic", "claude-sonnet-4-5")
    assert (model.cost.input, model.cost.output, model.cost.cache_read, model.cost.cache_write) == (
        3,
        15,
        0.3,
        3.75,
    )
    model.base_url = "http://127.0.0.1:1"
    assert get_model("anthropic", "claude-sonnet-4-5").base_url is None


def test_unknown_model_is_a_typed_validation_error():
    with pytest.raises(UnknownModelError, match="unknown model openai/gpt-0"):
        get_model("openai", "gpt-0")
    with pytest.raises(ValidationError, match="unknown provider"):
        get_model("nobody", "x")


def test_cost_is_dollars_per_million_tokens():
    model = get_model("anthropic", "claude-sonnet-4-5")
    usage = calculate_cost(
        model, Usage(input=1_000_000, output=2_000_000, cache_read=100_000, cache_write=10_000)
    )
    assert usage.cost.input == pytest.approx(3.0)
    assert usage.cost.output == pytest.approx(30.0)
    assert usage.cost.cache_read == pytest.approx(0.03)
    assert usage.cost.cache_write == pytest.approx(0.0375)
    assert usage.cost.total == pytest.approx(33.0675)
    assert usage.total_tokens == 3_110_000


def test_gpt5_prices():
    model = get_model("openai", "gpt-5")
    usage = calculate_cost(model, Usage(input=1000, output=1000, cache_read=1000))
    assert usage.cost.total == pytest.approx((1.25 + 10 + 0.125) / 1000)
