"""Splitting a session file's bytes into lines, and telling a torn write from corruption.

Every append is one ``write`` of whole lines, each ending in ``\\n``. A crash can therefore leave at
most one unfinished line, at the end of the file, without its newline: a *torn tail*. The next writer
never truncates it; it appends ``TORN_MARKER`` and a newline, which closes the torn line and labels it,
so later readers skip exactly that line and still treat any other unreadable complete line as
corruption. (A valid JSON object cannot end in the marker, so no entry is ever mistaken for one.)

An unfinished last line that *does* parse is a complete entry that lost only its newline (the crash
fell between the two): it is kept, and the next append starts with a bare newline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal

import orjson

TORN_MARKER: Final = b"\t#agentcore:torn-write"

TailState = Literal["clean", "unterminated", "torn"]


@dataclass
class ParsedLine:
    line_number: int  # 1-based, counting every line of the file
    value: Any = None
    error: str | None = None  # why the line is unreadable (then ``value`` is None)
    bad_encoding: bool = False


@dataclass
class Chunk:
    """The result of scanning bytes ``[start, start + len(data))`` of a file."""

    lines: list[ParsedLine] = field(default_factory=list)
    consumed: int = 0  # bytes of the chunk that are settled (a torn tail is not: it may be re-read)
    line_count: int = 0  # lines settled, so the next chunk numbers on from here
    tail: TailState = "clean"
    torn_lines: list[int] = field(default_factory=list)  # marked torn lines that were skipped


def _parse(raw: bytes, line_number: int) -> ParsedLine:
    try:
        return ParsedLine(line_number, orjson.loads(raw))
    except orjson.JSONDecodeError as exc:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as decode_error:
            return ParsedLine(
                line_number, error=f"not valid UTF-8 ({decode_error.reason})", bad_encoding=True
            )
        return ParsedLine(line_number, error=f"malformed JSON ({exc})")


def scan(data: bytes, *, first_line_number: int = 1) -> Chunk:
    """Parse every line of ``data`` (which starts at a line boundary)."""
    chunk = Chunk()
    line_number = first_line_number - 1
    position = 0
    size = len(data)
    while position < size:
        newline = data.find(b"\n", position)
        if newline < 0:
            parsed = _parse(data[position:], line_number + 1)
            if parsed.error is None:
                chunk.lines.append(parsed)
                chunk.consumed = size
                chunk.line_count = line_number + 1 - (first_line_number - 1)
                chunk.tail = "unterminated"
            else:
                # Torn (or still being written by another process): leave it unconsumed.
                chunk.tail = "torn"
            return chunk
        line_number += 1
        raw = data[position:newline]
        position = newline + 1
        chunk.consumed = position
        chunk.line_count = line_number - (first_line_number - 1)
        if raw.endswith(TORN_MARKER):
            chunk.torn_lines.append(line_number)
        elif raw.strip():  # blank lines come from the newline that follows an unterminated entry
            chunk.lines.append(_parse(raw, line_number))
    return chunk
