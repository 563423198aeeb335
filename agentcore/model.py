"""Model configuration and the spec's enums (SPEC-1.2, 1.3, 10.1)."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field

from .errors import ValidationError
from .messages import WireModel


class ThinkingLevel(StrEnum):
    OFF = "off"
    MINIMAL = "minimal"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    XHIGH = "xhigh"
    MAX = "max"


def parse_thinking_level(value: ThinkingLevel | str) -> ThinkingLevel:
    """``value`` as a ``ThinkingLevel``; ``ValidationError`` naming the levels if it is none."""
    try:
        return ThinkingLevel(value)
    except ValueError:
        levels = ", ".join(level.value for level in ThinkingLevel)
        raise ValidationError(f"unknown thinking level {value!r}; expected one of: {levels}") from None


class ToolExecutionMode(StrEnum):
    SEQUENTIAL = "sequential"
    PARALLEL = "parallel"


class QueueMode(StrEnum):
    ONE_AT_A_TIME = "one-at-a-time"
    ALL = "all"


Api = Literal["openai-completions", "anthropic-messages", "scripted"]


class ModelCost(WireModel):
    """Prices in dollars per million tokens."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0


class Model(WireModel):
    """Which model to call and how (SPEC-1.1 ``model``).

    ``api`` picks the wire protocol (and so the provider implementation); ``base_url`` overrides the
    endpoint, so any OpenAI-compatible server (Ollama, vLLM, llama.cpp, OpenRouter) works.
    """

    id: str
    provider: str = "openai"
    api: str = "openai-completions"
    name: str = ""
    base_url: str | None = None
    reasoning: bool = False
    input: list[Literal["text", "image"]] = Field(default_factory=lambda: ["text"])  # type: ignore[arg-type]
    context_window: int = 128_000
    max_tokens: int = 16_384
    cost: ModelCost = Field(default_factory=ModelCost)
    # Extra HTTP headers for the provider (never secrets: keys come from the environment or a callback).
    headers: dict[str, str] = Field(default_factory=dict)
