"""Workflow task slots that keep a worker's full-history replays few at a time.

A workflow task from the shared task queue (not the worker's sticky one) carries the whole history:
the conversation is new to this worker, or its cached copy was lost (a network cut that failed the
worker's task completions, a task that moved off the sticky queue, another worker killed). Each
replays its history, about 0.3 ms of CPU per event. Many at once share one Python thread: after a
15 s cut, 20 conversations of ~1,500 events replaying together on a loaded 2-core machine each took
longer than the 10 s workflow task timeout, were timed out, handed out again and replayed again,
without end (docs/network-faults.md). Here at most ``shared_slots`` of the ``slots`` are for the
shared queue: the other replays wait on the server, where waiting costs no timeout, and each one
that runs ends in a fraction of the timeout.
"""

from __future__ import annotations

import asyncio
import threading

from temporalio.worker import (
    CustomSlotSupplier,
    SlotMarkUsedContext,
    SlotPermit,
    SlotReleaseContext,
    SlotReserveContext,
)

WORKFLOW_TASK_SLOTS = 16
SHARED_QUEUE_SLOTS = 2


class _Permit(SlotPermit):
    def __init__(self, shared: bool) -> None:
        self.shared = shared


class ReplayBoundedSlots(CustomSlotSupplier):
    """``slots`` workflow task slots, at most ``shared_slots`` of them for the shared task queue."""

    def __init__(self, slots: int = WORKFLOW_TASK_SLOTS, shared_slots: int = SHARED_QUEUE_SLOTS) -> None:
        if not 1 <= shared_slots <= slots:
            raise ValueError("shared_slots must be between 1 and slots")
        self.slots = slots
        self.shared_slots = shared_slots
        self._used = 0
        self._shared_used = 0
        # Release may come from the SDK core's threads; reservations wait on the worker's loop.
        self._lock = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def _take(self, shared: bool) -> _Permit | None:
        with self._lock:
            if self._used >= self.slots or (shared and self._shared_used >= self.shared_slots):
                return None
            self._used += 1
            self._shared_used += shared
            return _Permit(shared)

    async def reserve_slot(self, ctx: SlotReserveContext) -> SlotPermit:
        shared = not ctx.is_sticky
        loop = asyncio.get_running_loop()
        while True:
            waiter: asyncio.Future[None] = loop.create_future()
            with self._lock:
                self._waiters.append((loop, waiter))
            permit = self._take(shared)
            if permit is not None:
                self._forget(waiter)
                return permit
            try:
                await waiter
            finally:
                self._forget(waiter)

    def try_reserve_slot(self, ctx: SlotReserveContext) -> SlotPermit | None:
        return self._take(not ctx.is_sticky)

    def mark_slot_used(self, ctx: SlotMarkUsedContext) -> None:
        pass

    def release_slot(self, ctx: SlotReleaseContext) -> None:
        shared = isinstance(ctx.permit, _Permit) and ctx.permit.shared
        with self._lock:
            self._used -= 1
            self._shared_used -= shared
            waiters, self._waiters = self._waiters, []
        for loop, waiter in waiters:  # each checks again; the ones still short wait again
            loop.call_soon_threadsafe(_wake, waiter)

    def _forget(self, waiter: asyncio.Future[None]) -> None:
        with self._lock:
            self._waiters = [(loop, w) for loop, w in self._waiters if w is not waiter]


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
