"""Every durable bench in one run, one table: ``python -m bench`` (or ``python bench/run_all.py``).

    python -m bench [--only single,burst,...] [--worker-options JSON] [--json FILE] [--rounds N]
                    [--convs N]

About 9 minutes on a 2-core machine. Each scenario starts its own embedded dev server (SQLite file,
as ``agentcore.temporal.DevServer`` starts it), worker process and loopback model process; see
``bench/durable.py`` for what each one measures. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "bench"

from . import bench_convert, bench_http, bench_web, durable  # noqa: E402

Scenario = Callable[..., Awaitable[list[durable.Row]]]


def scenarios(
    rounds: int = 3, convs: int = 500
) -> dict[str, Callable[[dict[str, Any]], Awaitable[list[durable.Row]]]]:
    """``rounds``: how many times the headline scenarios (``single``, ``burst``) run, each on a stack
    of its own; their figures are the rounds' median (this machine's speed drifts between runs).
    ``convs``: how many live conversations ``scale`` holds."""
    return {
        "single": lambda o: durable.single("loopback", rounds=rounds, **o),
        "single-scripted": lambda o: durable.single("scripted", **o),
        "single-nostream": lambda o: durable.single("loopback", rounds=rounds, subscribe=False, **o),
        "single-since": lambda o: durable.single("loopback", rounds=rounds, since=True, **o),
        "single-run": lambda o: durable.single("loopback", rounds=rounds, run=True, **o),
        "concurrent": lambda o: durable._concurrent(**o),
        "spec-mix": lambda o: durable.paced(1000, 15, tool_calls_per_minute=100, **o),
        "burst": lambda o: durable.burst(rounds=rounds, **o),
        "burst-scripted": lambda o: durable.burst(model_kind="scripted", **o),
        "burst-nostream": lambda o: durable.burst(subscribe=False, **o),
        "burst-run": lambda o: durable.burst(run=True, **o),
        "tools": lambda o: durable.tools(**o),
        "recovery": lambda o: durable.recovery(**o),
        "history": lambda o: durable.history(**o),
        "deltas": lambda o: durable.deltas(**o),
        "server-ops": lambda o: durable.server_ops(**o),
        "server-ops-paced": lambda o: durable.server_ops(turns=20, pause=1.5, **o),
        "server-ops-nostream": lambda o: durable.server_ops(subscribe=False, **o),
        "server-ops-since": lambda o: durable.server_ops(since=True, **o),
        "server-ops-run": lambda o: durable.server_ops(run=True, **o),
        "http": lambda o: bench_http.provider_calls(**o),
        "convert": lambda o: bench_convert.conversions(**o),
        "scale": lambda o: durable.scale(convs, **o),
        "web-first-output": lambda o: bench_web.first_output(**o),
    }


# Diagnostics outside the default run (``--only``): the burst without streaming subscribers; the
# SPEC-11.2 mix alone (``concurrent`` runs it first); server requests per turn for turns a person
# paces, and for turns read without a subscriber.
DEFAULT = [
    "single",
    "single-nostream",
    "single-scripted",
    "concurrent",
    "burst",
    "burst-scripted",
    "tools",
    "recovery",
    "history",
    "deltas",
    "server-ops",
    "http",
    "convert",
    "scale",
    "web-first-output",
]


def machine_speed() -> float:
    """Pure-Python speed of this machine right now, in CPU seconds of a 2M-iteration loop (median of
    3): the figures scale with it (a shared 2-core VM varies by half from minute to minute), so runs
    are compared through it."""
    samples = []
    for _ in range(3):
        started = time.process_time()
        total = 0
        for i in range(2_000_000):
            total += i
        samples.append(time.process_time() - started)
    return sorted(samples)[1]


async def run(
    names: list[str], options: dict[str, Any], rounds: int = 3, convs: int = 500
) -> list[durable.Row]:
    table = scenarios(rounds, convs)
    rows: list[durable.Row] = []
    speeds = []
    for name in names:
        speeds.append(machine_speed())  # the state can change between scenarios: taken before each
        started = time.perf_counter()
        print(f"[{name}] ...", file=sys.stderr, flush=True)
        rows += await table[name](options)
        print(f"[{name}] {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    each = " / ".join(f"{speed * 1000:.0f}" for speed in speeds)
    machine = durable.Row(
        "0. machine",
        "CPU time of a 2M-iteration Python loop (median of 3), before each scenario",
        f"{each} ms",
    )
    return [machine, *rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated: " + ", ".join(scenarios()))
    parser.add_argument("--worker-options", default="{}", help="Worker keyword arguments, as JSON")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of single and burst (median)")
    parser.add_argument("--convs", type=int, default=500, help="live conversations of scale")
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n] or DEFAULT
    started = time.perf_counter()
    options = {"worker_options": orjson.loads(args.worker_options)}
    rows = asyncio.run(run(names, options, args.rounds, args.convs))
    durable.print_table(rows)
    print(f"\n{len(names)} scenarios in {time.perf_counter() - started:.0f} s")
    if args.json is not None:
        args.json.write_bytes(orjson.dumps([dataclasses.asdict(r) for r in rows], option=orjson.OPT_INDENT_2))


if __name__ == "__main__":
    main()
