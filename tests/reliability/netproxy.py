"""A userspace TCP forwarder that degrades a link: added delay, emulated loss, blackholes, resets.

This kernel has no ``sch_netem``, so the network faults the reliability suite needs are made here,
between a client and the server it talks to::

    async with Forwarder(("127.0.0.1", 0), ("127.0.0.1", server_port)) as link:
        client = await connect(link.address)   # everything this client sends passes through link
        link.blackhole()                        # bytes stop moving both ways; connections stay open
        link.restore()                          # what was held is delivered, in order
        link.degrade(delay=0.15, loss=0.05)     # each chunk 150 ms late each way; 5 % held longer
        link.reset()                            # every open connection is cut (RST), as by a crash

A blackhole holds bytes rather than dropping them: TCP under a real blackhole retransmits what it
sent once the path is back, and a forwarder that dropped bytes would corrupt the stream instead. For
the same reason loss is emulated as its effect on TCP: a lost chunk arrives a retransmission
timeout late (``retransmit`` seconds), and the chunks behind it wait for it (head-of-line).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from dataclasses import dataclass, field
from typing import Any

READ_SIZE = 65536


@dataclass
class _Pipe:
    """One direction of one connection: chunks queued with the time each may be written."""

    writer: asyncio.StreamWriter
    queue: asyncio.Queue[tuple[float, bytes] | None] = field(default_factory=asyncio.Queue)
    last_due: float = 0.0


class Forwarder:
    def __init__(
        self,
        listen: tuple[str, int],
        target: tuple[str, int],
        *,
        seed: int = 0,
        retransmit: float = 0.3,
    ) -> None:
        self.listen = listen
        self.target = target
        self.delay = 0.0
        self.loss = 0.0
        self.retransmit = retransmit
        self._random = random.Random(seed)
        self._open = asyncio.Event()
        self._open.set()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.connections = 0
        self.bytes = 0

    @property
    def address(self) -> str:
        return f"{self.listen[0]}:{self.listen[1]}"

    async def start(self) -> Forwarder:
        self._server = await asyncio.start_server(self._accept, self.listen[0], self.listen[1])
        self.listen = (self.listen[0], self._server.sockets[0].getsockname()[1])
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        self.reset()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)
            self._server = None

    async def __aenter__(self) -> Forwarder:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # -- faults

    def blackhole(self) -> None:
        """Stop moving bytes, both ways, on every connection (new ones are accepted and held too)."""
        self._open.clear()

    def restore(self) -> None:
        """End a blackhole: what was held goes through, in order; ``degrade`` settings stay."""
        self._open.set()

    @property
    def blackholed(self) -> bool:
        return not self._open.is_set()

    def degrade(self, delay: float = 0.0, loss: float = 0.0) -> None:
        """Each chunk waits ``delay`` seconds each way; a ``loss`` share waits ``retransmit`` more."""
        self.delay, self.loss = delay, loss

    def reset(self) -> None:
        """Cut every open connection at once (the peers see a reset)."""
        for writer in list(self._writers):
            with contextlib.suppress(Exception):
                writer.transport.abort()
        self._writers.clear()

    # -- forwarding

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update({writer, up_writer})
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            pipe = _Pipe(sink)
            self._spawn(self._read(source, pipe))
            self._spawn(self._write(pipe))

    async def _read(self, reader: asyncio.StreamReader, pipe: _Pipe) -> None:
        try:
            while True:
                await self._open.wait()
                data = await reader.read(READ_SIZE)
                if not data:
                    break
                due = time.monotonic() + self.delay
                if self.loss and self._random.random() < self.loss:
                    due += self.retransmit
                pipe.last_due = max(due, pipe.last_due)
                pipe.queue.put_nowait((pipe.last_due, data))
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        finally:
            pipe.queue.put_nowait(None)

    async def _write(self, pipe: _Pipe) -> None:
        writer = pipe.writer
        try:
            while (item := await pipe.queue.get()) is not None:
                due, data = item
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                await self._open.wait()
                writer.write(data)
                self.bytes += len(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()
            self._writers.discard(writer)
