"""The zero-latency model for the durable benches: a ``LoopbackServer`` in its own process.

    python -m bench.loopback_proc [--port 0] [--stamps FILE]     # prints "READY <port>"

It answers OpenAI Chat Completions over real HTTP with no pacing. The shape of a turn is read from
the newest message: ``/tools N`` asks for N parallel ``noop`` calls (default 1; 0: a short answer
with no tool call); a tool result gets a short final answer; ``/stream N MS`` streams N text deltas ``[k]``, MS milliseconds apart, and
records when each was written to the socket (``perf_counter``, CLOCK_MONOTONIC, comparable across
processes) as one JSON line in FILE, so the delta-latency bench can match receive times to writes.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import signal
import time
from pathlib import Path
from typing import Any

import orjson

from agentcore.testing.loopback import LoopbackServer, Protocol, Script, ScriptToolCall, last_turn

MARKER = re.compile(rb"\[(\d+)\]")


def respond(request: Any, protocol: Protocol) -> Script:
    kind, text = last_turn(request, protocol)
    if kind == "tool":
        return Script(text="All done.", chunk_chars=64)
    words = text.split()
    if words and words[0] == "/stream":
        count, gap_ms = int(words[1]), float(words[2])
        pieces = [f"[{k}]" for k in range(count)]
        width = max(len(p) for p in pieces)
        return Script(text="".join(p.ljust(width) for p in pieces), chunk_chars=width, delay=gap_ms / 1000)
    calls = int(words[1]) if len(words) > 1 and words[0] == "/tools" else 1
    if calls == 0:
        return Script(text="Noted.", chunk_chars=64)
    return Script(
        tool_calls=[ScriptToolCall("noop", {"i": i}, id=f"call_{i}") for i in range(calls)],
        fragment_chars=64,
    )


class _StampingWriter:
    """Wraps the response writer: notes when each ``[k]`` delta goes out."""

    def __init__(self, writer: asyncio.StreamWriter, stamps: dict[int, float]) -> None:
        self._writer = writer
        self._stamps = stamps

    def write(self, data: bytes) -> None:
        self._writer.write(data)
        now = time.perf_counter()
        for match in MARKER.finditer(data):
            self._stamps.setdefault(int(match.group(1)), now)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._writer, name)


class StampingLoopback(LoopbackServer):
    def __init__(self, stamps_file: Path | None, **kwargs: Any) -> None:
        super().__init__(respond, **kwargs)
        self.stamps_file = stamps_file

    async def _stream(self, writer: Any, script: Script, protocol: Protocol, body: Any) -> bool:
        if self.stamps_file is None or not script.delay:
            return await super()._stream(writer, script, protocol, body)
        stamps: dict[int, float] = {}
        try:
            stamping: Any = _StampingWriter(writer, stamps)
            return await super()._stream(stamping, script, protocol, body)
        finally:
            with self.stamps_file.open("ab") as out:
                out.write(orjson.dumps(stamps, option=orjson.OPT_NON_STR_KEYS) + b"\n")


async def main(port: int, stamps: Path | None) -> None:
    server = await StampingLoopback(stamps, port=port).start()
    print(f"READY {server.port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--stamps", type=Path, default=None)
    args = parser.parse_args()
    asyncio.run(main(args.port, args.stamps))
