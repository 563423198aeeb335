"""SPEC-9.2 storage rate limits: excess calls wait (never fail), measured on a fake clock."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentcore.session import FsyncPolicy, JsonlSessionStorage, MessageEntry, RateLimiter, StorageRateLimits
from tests.support.session import user


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_at_most_limit_operations_in_any_window() -> None:
    clock = FakeClock()
    limiter = RateLimiter(100, clock=clock, sleep=clock.sleep)
    starts = []
    for _ in range(350):
        limiter.acquire()
        starts.append(clock.now)
    assert clock.slept[0] == pytest.approx(1.0)  # the 101st waits for the 1st to leave the window
    assert starts[99] == 0.0 and starts[100] == pytest.approx(1.0) and starts[349] == pytest.approx(3.0)
    for i in range(len(starts) - 100):
        assert starts[i + 100] - starts[i] >= 1.0 - 1e-9  # never 101 within one second


def test_spread_out_calls_never_wait() -> None:
    clock = FakeClock()
    limiter = RateLimiter(10, clock=clock, sleep=clock.sleep)
    for _ in range(100):
        limiter.acquire()
        clock.now += 0.125  # exact in binary floating point
    assert clock.slept == []


async def test_async_acquire_waits() -> None:
    clock = FakeClock()
    limiter = RateLimiter(2, window=0.05, clock=clock, sleep=clock.sleep)
    await limiter.acquire_async()
    await limiter.acquire_async()
    loop = asyncio.get_running_loop()
    started = loop.time()
    await limiter.acquire_async()  # fake clock stands still: must really sleep the 0.05 s window
    assert loop.time() - started >= 0.04


def test_invalid_limits() -> None:
    with pytest.raises(ValueError):
        RateLimiter(0)


def test_storage_waits_on_its_limits(tmp_path: Path) -> None:
    clock = FakeClock()
    limits = StorageRateLimits(
        reads=RateLimiter(1000, clock=clock, sleep=clock.sleep),
        writes=RateLimiter(100, clock=clock, sleep=clock.sleep),
    )
    storage = JsonlSessionStorage.create(
        tmp_path / "s.jsonl", cwd="/", fsync=FsyncPolicy("never"), rate_limits=limits
    )
    for n in range(250):
        storage.append_entry(MessageEntry(message=user(f"m{n}")))
    assert clock.now == pytest.approx(2.0)  # 250 writes at 100/s: two full waits, none refused
    clock.now = 10.0
    storage.append_entries([MessageEntry(message=user("batch")) for _ in range(500)])  # one write op
    assert clock.now == 10.0
    for _ in range(2500):
        storage.get_leaf_id()
    assert clock.now == pytest.approx(12.0)
    assert len(storage.get_entries()) == 750
    storage.close()


def test_default_limits_are_the_spec_values(tmp_path: Path) -> None:
    limits = StorageRateLimits()
    assert limits.reads is not None and limits.reads.limit == 1000
    assert limits.writes is not None and limits.writes.limit == 100
