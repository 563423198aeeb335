"""Tool-call arguments from JSON that is still arriving, parsed by ``pydantic_core``.

Providers stream a tool call's arguments as text fragments (``{"ci``, ``ty": "Ed``...). While the
stream runs, ``parse_partial_json`` gives the object the prefix supports so far, so a UI can show the
arguments filling in; it never raises. When the call ends, ``parse_final_arguments`` parses strictly:
the loop must not run a tool on arguments we guessed.

A final string that is not a JSON object keeps the raw text under ``RAW_ARGUMENTS_KEY``, so the loop's
schema validation fails with INVALID_PARAMETERS (the key is no parameter of any tool) and the error it
reports back to the model can quote what the model sent.
"""

from __future__ import annotations

from typing import Any

from pydantic_core import from_json

from ..tools import RAW_ARGUMENTS_KEY as RAW_ARGUMENTS_KEY


def parse_final_arguments(raw: str) -> dict[str, Any]:
    """Strictly parse a finished argument string; invalid or non-object JSON keeps the raw text."""
    if not raw.strip():
        # No argument text at all is how providers send a call to a tool without parameters.
        return {}
    try:
        # NaN and Infinity are not JSON: a tool must not receive them as numbers.
        value = from_json(raw, allow_inf_nan=False)
    except ValueError:
        return {RAW_ARGUMENTS_KEY: raw}
    return value if isinstance(value, dict) else {RAW_ARGUMENTS_KEY: raw}


def invalid_arguments(arguments: dict[str, Any]) -> str | None:
    """The raw text of arguments that did not parse, or None when they are a real object."""
    raw = arguments.get(RAW_ARGUMENTS_KEY)
    return raw if isinstance(raw, str) and len(arguments) == 1 else None


def parse_partial_json(text: str) -> dict[str, Any]:
    """The object a JSON prefix promises so far: an unterminated string is kept as far as it goes, a
    dangling key, a partial number or literal is left out. ``{}`` when no object is there yet."""
    try:
        value = from_json(text, allow_partial="trailing-strings", allow_inf_nan=False)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
