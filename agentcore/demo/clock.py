"""A ``clock`` tool: the current date and time in an IANA time zone.

Reading the wall clock is fine here: tools run in activities (or in-process), never in workflow
code, so the answer is recorded once in history and a replay reuses it.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from pydantic import BaseModel, ConfigDict, Field

from ..runtime import AbortSignal
from ..tools import AgentTool, AgentToolResult, ToolUpdateCallback

Now = Callable[[], datetime]


class ClockParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    timezone: str = Field(
        default="UTC",
        max_length=64,
        description="IANA time zone name, e.g. 'Europe/Paris', 'America/New_York', 'Asia/Tokyo'. Defaults to UTC.",
    )


def _utc_now() -> datetime:
    return datetime.now(UTC)


def suggest_timezones(name: str, limit: int = 3) -> list[str]:
    """Zone names close to ``name``: a city alone ("Paris") or a near miss ("Europe/Pari")."""
    zones = sorted(available_timezones())
    city = name.strip().replace(" ", "_").casefold()
    by_city = [zone for zone in zones if zone.rsplit("/", 1)[-1].casefold() == city]
    return by_city[:limit] or difflib.get_close_matches(name, zones, n=limit, cutoff=0.6)


def clock_tool(now: Now = _utc_now) -> AgentTool:
    """The clock tool; ``now`` (an aware datetime factory) is injectable so tests can fix the time."""

    def read_clock(
        tool_call_id: str, params: ClockParams, signal: AbortSignal | None, on_update: ToolUpdateCallback
    ) -> AgentToolResult:
        name = params.timezone.strip() or "UTC"
        try:
            zone = ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            # ValueError: malformed keys ("../etc", "Europe/"); OSError: unreadable zone files.
            suggestions = suggest_timezones(name)
            hint = f" Did you mean {', '.join(suggestions)}?" if suggestions else ""
            message = f"Unknown time zone {name!r}; use an IANA name such as 'Europe/Paris'.{hint}"
            return AgentToolResult.text(message, is_error=True, details={"suggestions": suggestions})
        local = now().astimezone(zone)
        offset = local.strftime("%z")
        utc_offset = f"UTC{offset[:3]}:{offset[3:]}"
        text = f"{local:%A} {local.day} {local:%B %Y, %H:%M:%S} {local.tzname()} ({utc_offset}) in {name}"
        details = {
            "timezone": name,
            "iso": local.isoformat(timespec="seconds"),
            "date": local.date().isoformat(),
            "time": local.strftime("%H:%M:%S"),
            "weekday": local.strftime("%A"),
            "utc_offset": utc_offset,
            "abbreviation": local.tzname(),
            "unix": int(local.timestamp()),
        }
        return AgentToolResult.text(text, details=details)

    return AgentTool(
        name="clock",
        label="Clock",
        description="The current date and time in a given IANA time zone (default UTC).",
        parameters=ClockParams,
        execute=read_clock,
        timeout_seconds=10.0,
    )
