"""Tool-call arguments from JSON that is still arriving.

Providers stream a tool call's arguments as text fragments (``{"ci``, ``ty": "Ed``...). While the
stream runs, ``parse_partial_json`` gives the best object the prefix supports, so a UI can show the
arguments filling in; it never raises. When the call ends, ``parse_final_arguments`` parses strictly:
the loop must not run a tool on arguments we guessed.

A final string that is not a JSON object keeps the raw text under ``RAW_ARGUMENTS_KEY``, so the loop's
schema validation fails with INVALID_PARAMETERS (the key is no parameter of any tool) and the error it
reports back to the model can quote what the model sent.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from ..tools import RAW_ARGUMENTS_KEY as RAW_ARGUMENTS_KEY

_NUMBER_PREFIX = re.compile(rb"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_STRING_SPECIAL = re.compile(rb'["\\]')
_CLOSERS = {ord("{"): b"}", ord("["): b"]"}


def parse_final_arguments(raw: str) -> dict[str, Any]:
    """Strictly parse a finished argument string; invalid or non-object JSON keeps the raw text."""
    if not raw.strip():
        # No argument text at all is how providers send a call to a tool without parameters.
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {RAW_ARGUMENTS_KEY: raw}
    return value if isinstance(value, dict) else {RAW_ARGUMENTS_KEY: raw}


def invalid_arguments(arguments: dict[str, Any]) -> str | None:
    """The raw text of arguments that did not parse, or None when they are a real object."""
    raw = arguments.get(RAW_ARGUMENTS_KEY)
    return raw if isinstance(raw, str) and len(arguments) == 1 else None


def parse_partial_json(text: str) -> dict[str, Any]:
    """The object a JSON prefix promises so far: unterminated strings are closed, a dangling key, a
    partial literal or a trailing comma is dropped. Returns ``{}`` when nothing usable is there."""
    data = text.encode("utf-8")
    try:
        value = orjson.loads(data)
        return value if isinstance(value, dict) else {}
    except orjson.JSONDecodeError:
        pass
    for candidate in _completions(data):
        try:
            value = orjson.loads(candidate)
        except orjson.JSONDecodeError:
            continue
        return value if isinstance(value, dict) else {}
    return {}


def _completions(data: bytes) -> list[bytes]:
    """Candidate completions of a JSON prefix, best first.

    One pass tracks the open containers and whether each is waiting for a key, a value or a comma.
    ``safe`` remembers the last cut where the prefix ends cleanly (right after a container opened or
    a value finished); closing the open containers there always yields valid JSON.
    """
    stack = bytearray()  # b"{" / b"[" of the open containers
    expect_key = False  # inside an object, the next string is a key
    in_string = False
    string_is_key = False
    string_start = 0
    escape = False
    safe_end, safe_stack = -1, b""
    i, n = 0, len(data)
    while i < n:
        byte = data[i]
        if in_string:
            if escape:
                escape = False
            elif byte == 0x5C:  # backslash
                escape = True
            elif byte == 0x22:  # closing quote
                in_string = False
                if not string_is_key:
                    safe_end, safe_stack = i + 1, bytes(stack)
            else:
                # Skip to the next quote or backslash in C: string bodies are most of the bytes,
                # and this runs again on every fragment of a long argument.
                special = _STRING_SPECIAL.search(data, i)
                i = special.start() if special else n
                continue
            i += 1
            continue
        if byte == 0x22:
            in_string, escape, string_start = True, False, i
            string_is_key = bool(stack) and stack[-1] == ord("{") and expect_key
            expect_key = False
        elif byte in (0x7B, 0x5B):  # { [
            stack.append(byte)
            expect_key = byte == 0x7B
            safe_end, safe_stack = i + 1, bytes(stack)
        elif byte in (0x7D, 0x5D):  # } ]
            if stack:
                stack.pop()
            expect_key = False
            safe_end, safe_stack = i + 1, bytes(stack)
        elif byte == 0x2C:  # ,
            expect_key = bool(stack) and stack[-1] == ord("{")
        elif byte in b"-0123456789tfn":
            # A number or literal: complete only if the full token is there and something follows.
            match = None if byte in b"tfn" else _NUMBER_PREFIX.match(data, i)
            end = match.end() if match else i
            for literal in (b"true", b"false", b"null") if byte in b"tfn" else ():
                if data.startswith(literal, i):
                    end = i + len(literal)
            if end > i and end < n:
                safe_end, safe_stack = end, bytes(stack)
                i = end
                continue
            if end == n:
                # A token that reaches the very end may be cut short ("12" of "123"), but it is the
                # best reading of the prefix so far.
                return [data + _close(bytes(stack)), _cut(data, safe_end, safe_stack)]
            break
        i += 1
    candidates: list[bytes] = []
    if in_string and not string_is_key:
        body = data[: string_start + 1] + _clean_string_tail(data[string_start + 1 :])
        candidates.append(body + b'"' + _close(bytes(stack)))
    if safe_end >= 0:
        candidates.append(_cut(data, safe_end, safe_stack))
    return candidates


def _close(stack: bytes) -> bytes:
    return b"".join(_CLOSERS[byte] for byte in reversed(stack))


def _cut(data: bytes, end: int, stack: bytes) -> bytes:
    return data[:end] + _close(stack) if end >= 0 else b"{}"


def _clean_string_tail(tail: bytes) -> bytes:
    """Drop a half-written escape (``\\`` or ``\\u12``) and a truncated UTF-8 character at the end."""
    backslash = tail.rfind(b"\\")
    if backslash >= 0:
        # Count the run of backslashes: an odd run means the last one starts an escape.
        run_start = backslash
        while run_start > 0 and tail[run_start - 1] == 0x5C:
            run_start -= 1
        if (backslash - run_start + 1) % 2 == 1:
            escape = tail[backslash + 1 :]
            complete = len(escape) >= 1 and (escape[:1] != b"u" or len(escape) >= 5)
            if not complete:
                tail = tail[:backslash]
    return tail.decode("utf-8", "ignore").encode("utf-8")
