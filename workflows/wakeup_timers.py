"""The pending wake-ups of a conversation, soonest first, each with the task of its timer
(``wakeups.py`` schedules, fires and cancels them)."""

from __future__ import annotations

import asyncio

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agentcore.wakeups import Wakeup, insert_sorted


class PendingWakeups:
    def __init__(self) -> None:
        self._pending: list[Wakeup] = []
        # The timer task of each pending wake-up, by id.
        self._timers: dict[str, asyncio.Task[None]] = {}
        # Wake-ups the model's ``wakeup_tool`` calls scheduled, by call id: announced after the
        # call's end event.
        self._by_tool: dict[str, Wakeup] = {}

    @property
    def pending(self) -> list[Wakeup]:
        """Soonest first (a copy)."""
        return list(self._pending)

    def __len__(self) -> int:
        return len(self._pending)

    def find(self, wakeup_id: str) -> Wakeup | None:
        return next((wakeup for wakeup in self._pending if wakeup.id == wakeup_id), None)

    def add(self, wakeup: Wakeup) -> None:
        insert_sorted(self._pending, wakeup)

    def time(self, wakeup_id: str, timer: asyncio.Task[None]) -> None:
        """``timer`` fires the wake-up (held here: the event loop keeps only a weak reference)."""
        self._timers[wakeup_id] = timer

    def cancel(self, wakeup_id: str) -> Wakeup:
        """Remove a pending wake-up and cancel its timer."""
        wakeup = next(wakeup for wakeup in self._pending if wakeup.id == wakeup_id)
        self._pending.remove(wakeup)
        self._timers.pop(wakeup_id).cancel()
        return wakeup

    def fired(self, wakeup: Wakeup) -> None:
        self._pending.remove(wakeup)
        del self._timers[wakeup.id]

    def scheduled_by_tool(self, tool_call_id: str, wakeup: Wakeup) -> None:
        self._by_tool[tool_call_id] = wakeup

    @property
    def unannounced(self) -> bool:
        """Whether a ``wakeup_tool`` call's wake-up waits for its call's end event."""
        return bool(self._by_tool)

    def announce(self, tool_call_id: str) -> Wakeup | None:
        """The wake-up ``tool_call_id`` scheduled, if any, once."""
        return self._by_tool.pop(tool_call_id, None)
