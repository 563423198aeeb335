"""The demo's tools, called the way the runtime calls them: ``execute(id, validated_args, signal, on_update)``."""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pydantic
import pytest

from agentcore import AgentTool, AgentToolResult, TextContent, ToolCall
from agentcore.demo import DEMO_SYSTEM_PROMPT, SEED_WINES, WineCellar, calculator_tool, clock_tool, demo_tools
from agentcore.demo.calculator import MAX_INTEGER_BITS, CalculationError, evaluate
from agentcore.model import ToolExecutionMode
from agentcore.runtime import AbortSignal
from agentcore.tool_exec import execute_tool


def run(tool: AgentTool, **arguments: Any) -> AgentToolResult:
    """Validate ``arguments`` against the tool's model (as the runtime does) and execute it."""
    validated = tool.parameters.model_validate(arguments)
    result = tool.execute("call-1", validated, None, lambda _update: None)
    assert isinstance(result, AgentToolResult)
    return result


def text_of(result: AgentToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "cellar" / "cellar.sqlite3"


@pytest.fixture
def tools(db_path: Path) -> dict[str, AgentTool]:
    return {tool.name: tool for tool in demo_tools(db_path)}


# ----------------------------------------------------------------------------------------------- cellar


def test_demo_tools_are_the_six_documented_ones_with_json_schemas(tools: dict[str, AgentTool]) -> None:
    assert set(tools) == {
        "search_wines",
        "wine_details",
        "update_stock",
        "cellar_summary",
        "calculator",
        "clock",
    }
    for tool in tools.values():
        schema = tool.spec().parameters
        assert schema["type"] == "object"
        assert schema.get("additionalProperties") is False
        assert tool.name in DEMO_SYSTEM_PROMPT


def test_seeding_creates_the_file_and_is_idempotent_without_resetting_stock(db_path: Path) -> None:
    cellar = WineCellar(db_path)
    assert db_path.exists()
    assert len(SEED_WINES) >= 40
    assert len({wine.id for wine in SEED_WINES}) == len(SEED_WINES)
    cellar.adjust_stock(1, -1)

    reopened = WineCellar(db_path)

    with sqlite3.connect(db_path) as connection:
        assert connection.execute("SELECT COUNT(*) FROM wines").fetchone()[0] == len(SEED_WINES)
    assert reopened.get(1).stock == SEED_WINES[0].stock - 1


def test_search_by_region_ignores_case_and_accents(tools: dict[str, AgentTool]) -> None:
    result = run(tools["search_wines"], region="rhone", sort_by="price")

    assert not result.is_error
    regions = {wine["region"] for wine in result.details}
    assert regions == {"Rhône"}
    prices = [wine["price"] for wine in result.details]
    assert prices == sorted(prices)
    assert "Crozes-Hermitage" in text_of(result)
    assert "| id |" in text_of(result)


def test_search_combines_grape_country_and_price_filters(tools: dict[str, AgentTool]) -> None:
    result = run(tools["search_wines"], grape="pinot noir", country="France", max_price=100)

    names = {wine["name"] for wine in result.details}
    assert names == {"Bourgogne Rouge"}  # the other French Pinots cost more, Krug is over $100
    cheap = run(tools["search_wines"], grape="Pinot Noir", min_price=40, max_price=50)
    assert {wine["producer"] for wine in cheap.details} == {"Domaine Drouhin Oregon"}


def test_search_text_query_requires_every_word(tools: dict[str, AgentTool]) -> None:
    oysters = run(tools["search_wines"], query="oyster")
    assert [wine["id"] for wine in oysters.details] == [10]

    both = run(tools["search_wines"], query="cherry tobacco")
    assert {wine["name"] for wine in both.details} == {"Brunello di Montalcino"}


def test_search_limit_reports_the_total_and_no_match_is_not_an_error(tools: dict[str, AgentTool]) -> None:
    limited = run(tools["search_wines"], country="France", limit=3)
    assert len(limited.details) == 3
    assert "Showing 3 of 21" in text_of(limited)

    none = run(tools["search_wines"], region="Atlantis")
    assert not none.is_error
    assert none.details == []
    assert "No wines match" in text_of(none)


def test_search_in_stock_only_leaves_out_sold_out_wines(tools: dict[str, AgentTool]) -> None:
    sold_out = run(tools["search_wines"], query="Roulot")
    assert [wine["stock"] for wine in sold_out.details] == [0]
    assert run(tools["search_wines"], query="Roulot", in_stock_only=True).details == []


def test_search_parameters_validate(tools: dict[str, AgentTool]) -> None:
    model = tools["search_wines"].parameters
    with pytest.raises(pydantic.ValidationError, match="min_price must not exceed max_price"):
        model.model_validate({"min_price": 50, "max_price": 10})
    with pytest.raises(pydantic.ValidationError):
        model.model_validate({"colour": "red"})  # unknown filters are refused, not ignored
    with pytest.raises(pydantic.ValidationError):
        model.model_validate({"limit": 0})


def test_wine_details_shows_notes_and_stock(tools: dict[str, AgentTool]) -> None:
    result = run(tools["wine_details"], wine_id=18)

    assert not result.is_error
    text = text_of(result)
    assert "Domaine Huet — Vouvray Le Haut-Lieu Sec 2020" in text
    assert "Quince, beeswax" in text
    assert "Stock: 6 bottle(s), worth $288.00" in text
    assert result.details["grape"] == "Chenin Blanc"


def test_wine_details_unknown_id_is_an_error_result(tools: dict[str, AgentTool]) -> None:
    result = run(tools["wine_details"], wine_id=999)
    assert result.is_error
    assert "no wine with id 999" in text_of(result)


def test_update_stock_adds_and_removes_and_persists(tools: dict[str, AgentTool], db_path: Path) -> None:
    removed = run(tools["update_stock"], wine_id=24, change=-2)
    assert not removed.is_error
    assert "Removed 2 bottle(s)" in text_of(removed)
    assert removed.details["stock"] == 16

    added = run(tools["update_stock"], wine_id=24, change=5)
    assert "Now 21 in stock" in text_of(added)
    assert WineCellar(db_path).get(24).stock == 21


def test_update_stock_refuses_to_go_below_zero_and_changes_nothing(
    tools: dict[str, AgentTool], db_path: Path
) -> None:
    result = run(tools["update_stock"], wine_id=7, change=-3)  # two bottles in stock

    assert result.is_error
    assert "only 2 in stock" in text_of(result)
    assert WineCellar(db_path).get(7).stock == 2


def test_update_stock_is_not_retry_safe_and_runs_sequentially(tools: dict[str, AgentTool]) -> None:
    tool = tools["update_stock"]
    assert tool.retry_safe is False
    assert tool.spec().retry_safe is False
    assert tool.execution_mode is ToolExecutionMode.SEQUENTIAL
    assert all(t.retry_safe for name, t in tools.items() if name != "update_stock")
    with pytest.raises(pydantic.ValidationError, match="must not be zero"):
        tool.parameters.model_validate({"wine_id": 1, "change": 0})


def test_concurrent_removals_never_oversell(db_path: Path) -> None:
    # Wine 4 has two bottles; eight threads (each with its own connection, as tool threads would)
    # race to take one each. The write lock makes exactly two succeed.
    cellar = WineCellar(db_path)
    outcomes: list[bool] = []

    def take_one() -> None:
        try:
            cellar.adjust_stock(4, -1)
            outcomes.append(True)
        except ValueError:
            outcomes.append(False)

    threads = [threading.Thread(target=take_one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert outcomes.count(True) == 2
    assert cellar.get(4).stock == 0


def test_cellar_summary_totals_match_the_seed(tools: dict[str, AgentTool]) -> None:
    result = run(tools["cellar_summary"])

    bottles = sum(wine.stock for wine in SEED_WINES)
    value = sum(wine.stock * wine.price for wine in SEED_WINES)
    assert result.details["bottles"] == bottles
    assert result.details["value"] == pytest.approx(value)
    assert sum(group["bottles"] for group in result.details["groups"]) == bottles
    assert result.details["groups"][0]["name"] == "Bordeaux"  # the most valuable region
    assert f"{bottles} bottles" in text_of(result)

    by_country = run(tools["cellar_summary"], group_by="country")
    assert {group["name"] for group in by_country.details["groups"]} >= {"France", "Italy", "Spain", "USA"}


def test_summary_follows_stock_changes(tools: dict[str, AgentTool]) -> None:
    before = run(tools["cellar_summary"]).details
    run(tools["update_stock"], wine_id=1, change=-1)  # one bottle of Margaux, $950
    after = run(tools["cellar_summary"]).details
    assert after["bottles"] == before["bottles"] - 1
    assert after["value"] == pytest.approx(before["value"] - 950)


async def test_cellar_tools_run_through_the_tool_pipeline(tools: dict[str, AgentTool]) -> None:
    # As the runtime runs them: raw JSON arguments validated into the model, the sync function in a
    # worker thread (so the cellar must not share a connection across threads).
    def call(name: str, arguments: dict[str, Any]) -> ToolCall:
        return ToolCall(id=f"call-{name}", name=name, arguments=arguments)

    found = await execute_tool(
        tools["search_wines"], call("search_wines", {"grape": "Nebbiolo"}), AbortSignal(), lambda _u: None
    )
    assert {wine["id"] for wine in found.details} == {22, 23}

    refused = await execute_tool(
        tools["search_wines"], call("search_wines", {"colour": "red"}), AbortSignal(), lambda _u: None
    )
    assert refused.is_error
    assert "INVALID_PARAMETERS" in text_of(refused)
    assert "colour" in text_of(refused)

    oversold = await execute_tool(
        tools["update_stock"],
        call("update_stock", {"wine_id": 21, "change": -5}),
        AbortSignal(),
        lambda _u: None,
    )
    assert oversold.is_error
    assert "only 2 in stock" in text_of(oversold)


# ------------------------------------------------------------------------------------------- calculator


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("6 * 48.5 * 0.9", "6 * 48.5 * 0.9 = 261.9"),
        ("0.1 + 0.2", "0.1 + 0.2 = 0.3"),
        ("(2 + 3) ** 2 - -1", "(2 + 3) ** 2 - -1 = 26"),
        ("17 // 5 + 17 % 5", "17 // 5 + 17 % 5 = 5"),
        ("round(sqrt(2), 3)", "round(sqrt(2), 3) = 1.414"),
        ("max(12, 40, 7) / min(4, 8)", "max(12, 40, 7) / min(4, 8) = 10"),
        ("2 ** 100", "2 ** 100 = 1267650600228229401496703205376"),
        ("round(pi * 2, 2)", "round(pi * 2, 2) = 6.28"),
    ],
)
def test_calculator_computes(expression: str, expected: str) -> None:
    result = run(calculator_tool(), expression=expression)
    assert not result.is_error
    assert text_of(result) == expected


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("__import__('os').system('id')", "is not arithmetic"),
        ("open('/etc/passwd')", "unknown function 'open'"),
        ("x + 1", "unknown name 'x'"),
        ("(1).__class__", "is not arithmetic"),
        ("'a' * 3", "only numbers are allowed"),
        ("[x for x in range(3)]", "is not arithmetic"),
        ("lambda: 1", "is not arithmetic"),
        ("True + 1", "only numbers are allowed"),
        ("sqrt(x=4)", "positional arguments only"),
        ("1 / 0", "division by zero"),
        ("sqrt(-1)", "math domain error"),
        ("(-8) ** 0.5", "not a real number"),
        ("9 ** 9 ** 9", "too large"),
        ("10 ** 5000", "too large"),
        ("2.5 ** 100000", "too large"),
        ("exp(1000)", "too large"),
        ("round(5, -10 ** 9)", "between -100 and 100"),
        ("1 +", "not a valid expression"),
        ("1 < 2", "is not arithmetic"),
    ],
)
def test_calculator_refuses_with_a_clear_error_result(expression: str, reason: str) -> None:
    result = run(calculator_tool(), expression=expression)
    assert result.is_error
    assert reason in text_of(result)


def test_calculator_bounds_integers_without_computing_them() -> None:
    assert evaluate(f"2 ** {MAX_INTEGER_BITS - 1}") == 2 ** (MAX_INTEGER_BITS - 1)
    with pytest.raises(CalculationError):
        evaluate("(2 ** 4000) * (2 ** 4000)")


def test_calculator_refuses_overlong_input_at_validation() -> None:
    with pytest.raises(pydantic.ValidationError):
        calculator_tool().parameters.model_validate({"expression": "1+" * 300 + "1"})


# ------------------------------------------------------------------------------------------------ clock

FIXED_NOW = datetime(2025, 7, 14, 12, 30, 5, tzinfo=UTC)


def test_clock_converts_to_the_requested_zone() -> None:
    tool = clock_tool(now=lambda: FIXED_NOW)

    paris = run(tool, timezone="Europe/Paris")
    assert not paris.is_error
    assert text_of(paris) == "Monday 14 July 2025, 14:30:05 CEST (UTC+02:00) in Europe/Paris"
    assert paris.details["iso"] == "2025-07-14T14:30:05+02:00"

    tokyo = run(tool, timezone="Asia/Tokyo")
    assert tokyo.details["time"] == "21:30:05"
    assert tokyo.details["utc_offset"] == "UTC+09:00"

    kolkata = run(tool, timezone="Asia/Kolkata")
    assert kolkata.details["utc_offset"] == "UTC+05:30"

    assert run(tool).details["timezone"] == "UTC"
    assert run(tool).details["unix"] == int(FIXED_NOW.timestamp())


def test_clock_uses_the_real_time_by_default() -> None:
    before = datetime.now(UTC).timestamp()
    result = run(clock_tool(), timezone="America/New_York")
    assert before - 1 <= result.details["unix"] <= datetime.now(UTC).timestamp() + 1


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [("Paris", "Europe/Paris"), ("America/New_Yrok", "America/New_York"), ("Mars/Olympus_Mons", None)],
)
def test_clock_unknown_zone_is_an_error_with_suggestions(name: str, suggestion: str | None) -> None:
    result = run(clock_tool(now=lambda: FIXED_NOW), timezone=name)
    assert result.is_error
    assert f"Unknown time zone {name!r}" in text_of(result)
    if suggestion is not None:
        assert suggestion in result.details["suggestions"]


@pytest.mark.parametrize("name", ["../../etc/passwd", "/etc/localtime", "Europe/"])
def test_clock_refuses_paths_as_zones(name: str) -> None:
    result = run(clock_tool(now=lambda: FIXED_NOW), timezone=name)
    assert result.is_error
