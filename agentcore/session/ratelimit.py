"""Storage rate limits (SPEC-9.2): at most 1000 reads and 100 writes per second per session.

Excess calls wait; they never fail. A token bucket with a full bucket lets ``2 * rate`` operations
through in the first second (the burst plus the refill), so this is a sliding window instead: the
n-th operation may not start earlier than one window after the (n - limit)-th. The window holds the
start times already granted, so callers that arrive together queue up in order.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

DEFAULT_READS_PER_SECOND = 1000
DEFAULT_WRITES_PER_SECOND = 100


class RateLimiter:
    """At most ``limit`` operations in any ``window`` seconds. Thread-safe."""

    def __init__(
        self,
        limit: int,
        window: float = 1.0,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if limit < 1 or window <= 0:
            raise ValueError("a rate limit needs limit >= 1 and window > 0")
        self.limit = limit
        self.window = window
        self._clock = clock
        self._sleep = sleep
        self._granted: deque[float] = deque(maxlen=limit)
        self._lock = threading.Lock()

    def reserve(self) -> float:
        """Book the next slot; return how many seconds the caller must wait before using it."""
        with self._lock:
            now = self._clock()
            start = now
            if len(self._granted) == self.limit:
                # ``maxlen`` drops the oldest on append: the window keeps the last ``limit`` grants.
                start = max(now, self._granted[0] + self.window)
            self._granted.append(start)
            return start - now

    def acquire(self) -> None:
        delay = self.reserve()
        if delay > 0:
            self._sleep(delay)

    async def acquire_async(self) -> None:
        delay = self.reserve()
        if delay > 0:
            await asyncio.sleep(delay)


@dataclass
class StorageRateLimits:
    """The pair of limiters one storage object uses. ``StorageRateLimits.unlimited()`` for tools and benches."""

    reads: RateLimiter | None = field(default_factory=lambda: RateLimiter(DEFAULT_READS_PER_SECOND))
    writes: RateLimiter | None = field(default_factory=lambda: RateLimiter(DEFAULT_WRITES_PER_SECOND))

    @classmethod
    def unlimited(cls) -> StorageRateLimits:
        return cls(reads=None, writes=None)

    def read(self) -> None:
        if self.reads is not None:
            self.reads.acquire()

    def write(self) -> None:
        if self.writes is not None:
            self.writes.acquire()
