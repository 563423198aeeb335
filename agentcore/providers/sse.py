"""Server-sent events framing, shared by every provider (providers.md section 0).

The parser is incremental and byte oriented: ``feed`` takes whatever the socket produced (chunks split
anywhere, even inside a UTF-8 character or between ``\\r`` and ``\\n``) and returns the events completed
by it; ``finish`` flushes an event the server never terminated with a blank line, because a stream cut
short still carries data the caller wants (the partial message is kept). Splitting the input at any
points yields the same events as feeding it whole; the fuzz test holds the parser to that.

Comment lines (``: OPENROUTER PROCESSING`` keep-alives) are skipped here, so no provider ever hands a
comment to ``json.loads``. ``id`` and ``retry`` fields are parsed away and ignored: no provider we speak
resumes streams.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass

_UTF8_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One dispatched event. ``event`` is ``"message"`` when the server sent no ``event:`` line."""

    event: str
    data: str


class SseParser:
    """Incremental SSE parser: ``feed(bytes) -> events``, then ``finish() -> events``."""

    __slots__ = ("_buffer", "_skip_lf", "_event", "_data", "_has_data", "_started")

    def __init__(self) -> None:
        self._buffer = b""
        # A chunk that ended in ``\r`` has completed its line, but the next chunk may start with the
        # ``\n`` of the same ``\r\n``; that ``\n`` must not count as a second (blank) line.
        self._skip_lf = False
        self._event = ""
        self._data: list[str] = []
        self._has_data = False
        self._started = False

    def feed(self, chunk: bytes) -> list[SseEvent]:
        if not chunk:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        buffer = self._buffer + chunk if self._buffer else chunk
        if not self._started:
            # The BOM check needs three bytes; wait for them rather than guess.
            if len(buffer) < 3 and _UTF8_BOM.startswith(buffer):
                self._buffer = buffer
                return []
            self._started = True
            if buffer.startswith(_UTF8_BOM):
                buffer = buffer[3:]
        cut = max(buffer.rfind(b"\n"), buffer.rfind(b"\r"))
        if cut < 0:
            self._buffer = buffer
            return []
        complete, self._buffer = buffer[: cut + 1], buffer[cut + 1 :]
        if complete.endswith(b"\r"):
            self._skip_lf = True
        events: list[SseEvent] = []
        # ``complete`` ends with a terminator, so splitlines yields exactly its lines (bytes.splitlines
        # splits only on \r, \n and \r\n, unlike str.splitlines).
        for line in complete.splitlines():
            self._line(line, events)
        return events

    def finish(self) -> list[SseEvent]:
        """End of stream: flush the last line and an event left without its blank-line terminator."""
        events: list[SseEvent] = []
        if self._buffer:
            buffer, self._buffer = self._buffer, b""
            if not self._started:
                self._started = True
                if buffer.startswith(_UTF8_BOM):
                    buffer = buffer[3:]
            if buffer:
                self._line(buffer, events)
        self._dispatch(events)
        return events

    def _line(self, line: bytes, events: list[SseEvent]) -> None:
        if not line:
            self._dispatch(events)
            return
        if line[:1] == b":":
            return
        colon = line.find(b":")
        if colon < 0:
            field, value = line, b""
        else:
            field, value = line[:colon], line[colon + 1 :]
            if value[:1] == b" ":
                value = value[1:]
        if field == b"data":
            self._data.append(value.decode("utf-8", "replace"))
            self._has_data = True
        elif field == b"event":
            self._event = value.decode("utf-8", "replace")

    def _dispatch(self, events: list[SseEvent]) -> None:
        if self._has_data:
            events.append(SseEvent(self._event or "message", "\n".join(self._data)))
        self._event = ""
        self._data = []
        self._has_data = False


async def aiter_sse(chunks: AsyncIterable[bytes]) -> AsyncIterator[SseEvent]:
    """Parse an async byte stream into events (used by the bench and tests; providers feed directly)."""
    parser = SseParser()
    async for chunk in chunks:
        for event in parser.feed(chunk):
            yield event
    for event in parser.finish():
        yield event
