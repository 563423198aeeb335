"""The offline demo's tools: a wine cellar in SQLite, a calculator and a clock.

Real tools over a real database, so the demo (and the durability tests built on it) exercise what
production tools do: validated pydantic arguments, error results instead of exceptions, a mutating
tool that is not retry-safe, and state shared by every worker through one file.

    tools = demo_tools("/data/cellar.sqlite3")   # search_wines, wine_details, update_stock,
                                                # cellar_summary, calculator, clock
"""

from __future__ import annotations

from pathlib import Path

from ..tools import AgentTool
from .calculator import CalculationError, calculator_tool, evaluate
from .cellar import CellarError, WineCellar
from .clock import clock_tool
from .prompt import DEMO_SYSTEM_PROMPT
from .wines import SEED_WINES, Wine


def demo_tools(db_path: str | Path) -> list[AgentTool]:
    """Every demo tool, the cellar ones bound to the SQLite file at ``db_path`` (created and seeded if new)."""
    return [*WineCellar(db_path).tools(), calculator_tool(), clock_tool()]


__all__ = [
    "DEMO_SYSTEM_PROMPT",
    "SEED_WINES",
    "CalculationError",
    "CellarError",
    "Wine",
    "WineCellar",
    "calculator_tool",
    "clock_tool",
    "demo_tools",
    "evaluate",
]
