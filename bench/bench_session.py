"""Session storage benchmark: open + build_context, and append throughput (durable vs batched fsync).

python bench/bench_session.py
"""

from __future__ import annotations

import functools
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from agentcore.messages import AssistantMessage, TextContent, ToolCall, Usage, UsageCost, UserMessage
from agentcore.session import FsyncPolicy, JsonlSessionStorage, MessageEntry, StorageRateLimits

UNLIMITED = StorageRateLimits.unlimited  # the bench measures I/O, not the SPEC-9.2 limiter


def message(n: int) -> MessageEntry:
    if n % 2 == 0:
        return MessageEntry(message=UserMessage(content=f"question {n}: " + "lorem ipsum " * 15, timestamp=1))
    return MessageEntry(
        message=AssistantMessage(
            content=[
                TextContent(text="answer " * 40),
                ToolCall(id=f"c{n}", name="search", arguments={"q": n}),
            ],
            usage=Usage(input=900, output=120, cache_read=300, cost=UsageCost(total=0.002)),
            timestamp=1,
        )
    )


def write_session(path: Path, count: int) -> None:
    with JsonlSessionStorage.create(
        path, cwd="/", fsync=FsyncPolicy("never"), rate_limits=UNLIMITED()
    ) as storage:
        for start in range(0, count, 1000):
            storage.append_entries([message(n) for n in range(start, min(start + 1000, count))])


def best_of(runs: int, action: Callable[[], object]) -> tuple[float, float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return min(times), statistics.median(times)


def open_and_build(path: Path, lazy: bool = True) -> None:
    with JsonlSessionStorage.open(path, lazy=lazy, rate_limits=UNLIMITED()) as storage:
        context = storage.build_context()
        assert context.messages


def append_rate(path: Path, fsync: FsyncPolicy, count: int) -> float:
    with JsonlSessionStorage.create(path, cwd="/", fsync=fsync, rate_limits=UNLIMITED()) as storage:
        entries = [message(n) for n in range(count)]
        started = time.perf_counter()
        for entry in entries:
            storage.append_entry(entry)
        storage.sync()
        return count / (time.perf_counter() - started)


def main() -> None:
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        for count, runs in ((1_000, 20), (100_000, 3)):
            path = root / f"s{count}.jsonl"
            write_session(path, count)
            size = path.stat().st_size / 1e6
            best, median = best_of(runs, functools.partial(open_and_build, path))
            rows.append(
                (
                    f"open + build_context, {count:,} messages ({size:.1f} MB)",
                    f"{best * 1000:.1f} ms (median {median * 1000:.1f})",
                )
            )
            best, median = best_of(max(1, runs // 3), functools.partial(open_and_build, path, lazy=False))
            rows.append(
                (
                    "  same, eager validation (lazy=False)",
                    f"{best * 1000:.1f} ms (median {median * 1000:.1f})",
                )
            )
        rows.append(
            (
                "append, fsync per append (durable)",
                f"{append_rate(root / 'a1.jsonl', FsyncPolicy(), 500):,.0f} entries/s",
            )
        )
        rows.append(
            (
                "append, batched fsync (64 / 200 ms)",
                f"{append_rate(root / 'a2.jsonl', FsyncPolicy.batched(), 5000):,.0f} entries/s",
            )
        )
        rows.append(
            (
                "append, no fsync",
                f"{append_rate(root / 'a3.jsonl', FsyncPolicy('never'), 5000):,.0f} entries/s",
            )
        )
    width = max(len(name) for name, _ in rows)
    print(f"{'operation'.ljust(width)}  result")
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")


if __name__ == "__main__":
    main()
