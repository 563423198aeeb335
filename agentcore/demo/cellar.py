"""A wine cellar in SQLite and the agent tools over it (the spec's wine database, FR-006).

``WineCellar`` holds only a path, never a connection: every call opens a short-lived connection and
closes it. Tools may run in a thread pool (sqlite3 connections refuse to cross threads), in any
worker process, and several workers may share one file on a volume, so nothing can be cached
between calls. Writes take SQLite's write lock up front (``BEGIN IMMEDIATE``), which makes the
read-check-write of a stock change atomic across processes, and serialises two workers seeding a
fresh file at the same moment instead of failing one of them on a lock upgrade.

Text matching folds case and accents (``rhone`` finds *Rhône*, ``chateau`` finds *Château*), since
neither users nor models type accents reliably.
"""

from __future__ import annotations

import sqlite3
import unicodedata
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..model import ToolExecutionMode
from ..runtime import AbortSignal
from ..tools import AgentTool, AgentToolResult, ToolUpdateCallback
from .wines import SEED_WINES, Wine

# A tool call that waits longer than this for another writer's lock fails with an error result.
_LOCK_TIMEOUT_SECONDS = 10.0
# SQLite calls are milliseconds; this only bounds a call stuck behind a lock on a slow volume.
_DB_TOOL_TIMEOUT_SECONDS = 30.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS wines (
    id          INTEGER PRIMARY KEY,
    name        TEXT    NOT NULL,
    producer    TEXT    NOT NULL,
    region      TEXT    NOT NULL,
    country     TEXT    NOT NULL,
    grape       TEXT    NOT NULL,
    vintage     INTEGER,
    price_cents INTEGER NOT NULL CHECK (price_cents >= 0),
    stock       INTEGER NOT NULL CHECK (stock >= 0),
    notes       TEXT    NOT NULL
)
"""
_COLUMNS = "id, name, producer, region, country, grape, vintage, price_cents, stock, notes"


class CellarError(ValueError):
    """A request the cellar refuses (unknown wine, not enough bottles). Tools turn it into an error result."""


def _fold(text: str | None) -> str:
    """Lower-case, accent-free form of ``text``, used on both sides of every text match."""
    decomposed = unicodedata.normalize("NFKD", text or "")
    return "".join(char for char in decomposed if not unicodedata.combining(char)).casefold()


def _like_pattern(text: str) -> str:
    escaped = _fold(text).replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _money(dollars: float) -> str:
    return f"${dollars:,.2f}"


def _wine_from_row(row: sqlite3.Row) -> Wine:
    return Wine(
        id=row["id"],
        name=row["name"],
        producer=row["producer"],
        region=row["region"],
        country=row["country"],
        grape=row["grape"],
        vintage=row["vintage"],
        price=row["price_cents"] / 100,
        stock=row["stock"],
        notes=row["notes"],
    )


def _fetch_wine(connection: sqlite3.Connection, wine_id: int) -> Wine:
    row = connection.execute(f"SELECT {_COLUMNS} FROM wines WHERE id = ?", (wine_id,)).fetchone()
    if row is None:
        raise CellarError(f"There is no wine with id {wine_id}. Use search_wines to find a wine's id.")
    return _wine_from_row(row)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, right_aligned: set[int]) -> str:
    """A Markdown pipe table with padded columns: readable as plain text and by any model."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        padded = (
            cell.rjust(width) if index in right_aligned else cell.ljust(width)
            for index, (cell, width) in enumerate(zip(cells, widths, strict=True))
        )
        return "| " + " | ".join(padded) + " |"

    # "---:" marks a right-aligned column for Markdown renderers; the padding already aligns plain text.
    rules = [
        "-" * (width + 1) + (":" if index in right_aligned else "-") for index, width in enumerate(widths)
    ]
    return "\n".join([line(headers), "|" + "|".join(rules) + "|", *(line(row) for row in rows)])


# ------------------------------------------------------------------------------------- tool parameters


class _Params(BaseModel):
    # Unknown arguments are refused, so a model that misspells a filter learns it instead of
    # silently getting unfiltered results.
    model_config = ConfigDict(extra="forbid")


class SearchWinesParams(_Params):
    query: str | None = Field(
        default=None,
        description="Words to find in the wine's name, producer, grape or tasting notes, e.g. 'cherry oak'. "
        "Every word must match; case and accents are ignored.",
    )
    region: str | None = Field(default=None, description="Region, e.g. 'Burgundy', 'Rioja', 'Napa Valley'.")
    country: str | None = Field(default=None, description="Country, e.g. 'France', 'Italy', 'USA'.")
    grape: str | None = Field(
        default=None, description="Grape variety, e.g. 'Pinot Noir'; matches blends too."
    )
    min_price: float | None = Field(default=None, ge=0, description="Lowest price a bottle, in US dollars.")
    max_price: float | None = Field(default=None, ge=0, description="Highest price a bottle, in US dollars.")
    in_stock_only: bool = Field(default=False, description="Leave out wines with no bottles left.")
    sort_by: Literal["name", "price", "vintage"] = "name"
    descending: bool = False
    limit: int = Field(default=10, ge=1, le=50, description="Most rows to return.")

    @field_validator("query", "region", "country", "grape")
    @classmethod
    def _blank_is_no_filter(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        return value.strip()

    @model_validator(mode="after")
    def _price_range(self) -> SearchWinesParams:
        if self.min_price is not None and self.max_price is not None and self.min_price > self.max_price:
            raise ValueError("min_price must not exceed max_price")
        return self


class WineDetailsParams(_Params):
    wine_id: int = Field(ge=1, description="The wine's id, as shown by search_wines.")


class UpdateStockParams(_Params):
    wine_id: int = Field(ge=1, description="The wine's id, as shown by search_wines.")
    change: int = Field(
        ge=-1000,
        le=1000,
        description="Bottles to add (positive) or remove (negative, e.g. -2 when two bottles are opened or sold).",
    )

    @field_validator("change")
    @classmethod
    def _non_zero(cls, value: int) -> int:
        if value == 0:
            raise ValueError("change must not be zero")
        return value


class CellarSummaryParams(_Params):
    group_by: Literal["region", "country"] = Field(
        default="region", description="How to break the totals down."
    )


# ------------------------------------------------------------------------------------------ the cellar


class WineCellar:
    """A wine cellar stored in the SQLite file at ``path``, created and seeded on first open."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._create_and_seed()

    # -- storage

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        # Autocommit mode (isolation_level=None): transactions are only the explicit ones below.
        connection = sqlite3.connect(self.path, timeout=_LOCK_TIMEOUT_SECONDS, isolation_level=None)
        try:
            connection.row_factory = sqlite3.Row
            connection.create_function("fold", 1, _fold, deterministic=True)
            yield connection
        finally:
            connection.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._connect() as connection:
            connection.execute("BEGIN IMMEDIATE")
            try:
                yield connection
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")

    def _create_and_seed(self) -> None:
        rows = [
            (
                w.id,
                w.name,
                w.producer,
                w.region,
                w.country,
                w.grape,
                w.vintage,
                round(w.price * 100),
                w.stock,
                w.notes,
            )
            for w in SEED_WINES
        ]
        with self._write() as connection:
            connection.execute(_SCHEMA)
            # "OR IGNORE" by fixed id: reopening keeps the stock the agent has changed.
            connection.executemany(
                f"INSERT OR IGNORE INTO wines ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)", rows
            )

    # -- queries

    def search(self, params: SearchWinesParams) -> tuple[list[Wine], int]:
        """Wines matching ``params`` (at most ``params.limit``) and how many match in all."""
        conditions: list[str] = []
        values: list[Any] = []
        for column, wanted in (
            ("region", params.region),
            ("country", params.country),
            ("grape", params.grape),
        ):
            if wanted is not None:
                conditions.append(f"fold({column}) LIKE ? ESCAPE '\\'")
                values.append(_like_pattern(wanted))
        for word in (params.query or "").split():
            conditions.append(
                "fold(name || ' ' || producer || ' ' || grape || ' ' || notes) LIKE ? ESCAPE '\\'"
            )
            values.append(_like_pattern(word))
        if params.min_price is not None:
            conditions.append("price_cents >= ?")
            values.append(round(params.min_price * 100))
        if params.max_price is not None:
            conditions.append("price_cents <= ?")
            values.append(round(params.max_price * 100))
        if params.in_stock_only:
            conditions.append("stock > 0")
        where = " AND ".join(conditions) or "1"
        order_column = {
            "name": "fold(producer || ' ' || name)",
            "price": "price_cents",
            "vintage": "vintage",
        }[params.sort_by]
        direction = "DESC" if params.descending else "ASC"
        with self._connect() as connection:
            total = connection.execute(f"SELECT COUNT(*) FROM wines WHERE {where}", values).fetchone()[0]
            rows = connection.execute(
                f"SELECT {_COLUMNS} FROM wines WHERE {where} ORDER BY {order_column} {direction}, id LIMIT ?",
                [*values, params.limit],
            ).fetchall()
        return [_wine_from_row(row) for row in rows], int(total)

    def get(self, wine_id: int) -> Wine:
        with self._connect() as connection:
            return _fetch_wine(connection, wine_id)

    def adjust_stock(self, wine_id: int, change: int) -> Wine:
        """Add (``change > 0``) or remove bottles; refuses to go below zero. Returns the updated wine."""
        with self._write() as connection:
            wine = _fetch_wine(connection, wine_id)
            if wine.stock + change < 0:
                raise CellarError(
                    f"Cannot remove {-change} bottle(s) of {wine.title}: only {wine.stock} in stock. Nothing was changed."
                )
            connection.execute("UPDATE wines SET stock = ? WHERE id = ?", (wine.stock + change, wine_id))
        return replace(wine, stock=wine.stock + change)

    def summary(self, group_by: Literal["region", "country"] = "region") -> dict[str, Any]:
        """Totals (wines, bottles, value at list price) and the same broken down by ``group_by``."""
        column = {"region": "region", "country": "country"}[group_by]  # never interpolate caller text
        with self._connect() as connection:
            totals = connection.execute(
                "SELECT COUNT(*), SUM(stock > 0), SUM(stock), SUM(stock * price_cents) FROM wines"
            ).fetchone()
            groups = connection.execute(
                f"SELECT {column} AS name, COUNT(*) AS wines, SUM(stock) AS bottles, SUM(stock * price_cents) AS value "
                f"FROM wines GROUP BY {column} ORDER BY value DESC, name"
            ).fetchall()
        return {
            "wines": totals[0],
            "wines_in_stock": totals[1] or 0,
            "bottles": totals[2] or 0,
            "value": (totals[3] or 0) / 100,
            "group_by": group_by,
            "groups": [
                {"name": g["name"], "wines": g["wines"], "bottles": g["bottles"], "value": g["value"] / 100}
                for g in groups
            ],
        }

    # -- tools

    def tools(self) -> list[AgentTool]:
        """The cellar's agent tools, bound to this cellar's file."""
        return [
            AgentTool(
                name="search_wines",
                label="Search wines",
                description="Search the wine cellar by region, country, grape, price range or words in the name "
                "and tasting notes. Returns a table with each wine's id, price and bottles in stock.",
                parameters=SearchWinesParams,
                execute=self._search_wines,
                timeout_seconds=_DB_TOOL_TIMEOUT_SECONDS,
            ),
            AgentTool(
                name="wine_details",
                label="Wine details",
                description="Full details of one wine by id: producer, region, grapes, price, stock and tasting notes.",
                parameters=WineDetailsParams,
                execute=self._wine_details,
                timeout_seconds=_DB_TOOL_TIMEOUT_SECONDS,
            ),
            AgentTool(
                name="update_stock",
                label="Update stock",
                description="Add bottles to the cellar or remove them (opened, sold, given away). "
                "Refuses to take stock below zero.",
                parameters=UpdateStockParams,
                execute=self._update_stock,
                timeout_seconds=_DB_TOOL_TIMEOUT_SECONDS,
                # The change commits in SQLite, outside Temporal's history. If the worker dies after the
                # commit but before the activity reports back, a retry would apply the change a second
                # time (two bottles removed for one). Not retry-safe, so an interrupted call is recorded
                # as "outcome unknown" for the agent to check with wine_details, never re-run blindly.
                retry_safe=False,
                # Stock changes in one batch run in order: "-3 then +6" must not be refused as "-3 first
                # on a 2-bottle stock" one time and accepted another, depending on scheduling.
                execution_mode=ToolExecutionMode.SEQUENTIAL,
            ),
            AgentTool(
                name="cellar_summary",
                label="Cellar summary",
                description="Totals for the whole cellar (wines, bottles, value at list price), "
                "broken down by region or country.",
                parameters=CellarSummaryParams,
                execute=self._cellar_summary,
                timeout_seconds=_DB_TOOL_TIMEOUT_SECONDS,
            ),
        ]

    def _search_wines(
        self,
        tool_call_id: str,
        params: SearchWinesParams,
        signal: AbortSignal | None,
        on_update: ToolUpdateCallback,
    ) -> AgentToolResult:
        wines, total = self.search(params)
        if not wines:
            return AgentToolResult.text("No wines match these filters.", details=[])
        rows = [
            [
                str(w.id),
                w.label,
                w.vintage_label,
                f"{w.region}, {w.country}",
                w.grape,
                _money(w.price),
                str(w.stock),
            ]
            for w in wines
        ]
        table = format_table(
            ["id", "wine", "vintage", "region", "grape", "price", "stock"], rows, right_aligned={0, 5, 6}
        )
        footer = (
            f"{total} wine(s) match."
            if total == len(wines)
            else f"Showing {len(wines)} of {total} matching wines."
        )
        return AgentToolResult.text(f"{table}\n{footer}", details=[asdict(w) for w in wines])

    def _wine_details(
        self,
        tool_call_id: str,
        params: WineDetailsParams,
        signal: AbortSignal | None,
        on_update: ToolUpdateCallback,
    ) -> AgentToolResult:
        try:
            wine = self.get(params.wine_id)
        except CellarError as exc:
            return AgentToolResult.text(str(exc), is_error=True)
        text = "\n".join(
            [
                f"#{wine.id} {wine.title}",
                f"Region: {wine.region}, {wine.country}",
                f"Grapes: {wine.grape}",
                f"Price: {_money(wine.price)} a bottle",
                f"Stock: {wine.stock} bottle(s), worth {_money(wine.stock * wine.price)}",
                f"Tasting notes: {wine.notes}",
            ]
        )
        return AgentToolResult.text(text, details=asdict(wine))

    def _update_stock(
        self,
        tool_call_id: str,
        params: UpdateStockParams,
        signal: AbortSignal | None,
        on_update: ToolUpdateCallback,
    ) -> AgentToolResult:
        try:
            wine = self.adjust_stock(params.wine_id, params.change)
        except CellarError as exc:
            return AgentToolResult.text(str(exc), is_error=True)
        verb = "Added" if params.change > 0 else "Removed"
        text = f"{verb} {abs(params.change)} bottle(s) of {wine.title}. Now {wine.stock} in stock."
        return AgentToolResult.text(text, details={**asdict(wine), "change": params.change})

    def _cellar_summary(
        self,
        tool_call_id: str,
        params: CellarSummaryParams,
        signal: AbortSignal | None,
        on_update: ToolUpdateCallback,
    ) -> AgentToolResult:
        summary = self.summary(params.group_by)
        rows = [
            [g["name"], str(g["wines"]), str(g["bottles"]), _money(g["value"])] for g in summary["groups"]
        ]
        table = format_table([params.group_by, "wines", "bottles", "value"], rows, right_aligned={1, 2, 3})
        headline = (
            f"{summary['bottles']} bottles of {summary['wines_in_stock']} wines in stock "
            f"({summary['wines']} wines listed), worth {_money(summary['value'])} at list price."
        )
        return AgentToolResult.text(f"{headline}\n{table}", details=summary)
