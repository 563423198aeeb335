"""Property-based fuzzing of the decoders bad input reaches: messages, session entries and files, SSE.

Each decoder either returns a value or raises its documented, typed error; nothing else escapes.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import orjson
import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore.errors import SessionError, ValidationError
from agentcore.messages import MESSAGE_ADAPTER, parse_message
from agentcore.providers.sse import SseEvent, SseParser
from agentcore.session import ENTRY_ADAPTER, JsonlSessionStorage
from agentcore.session.lines import scan

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)
VALID = [
    {"role": "user", "content": [{"type": "text", "text": "hi"}], "timestamp": 1},
    {
        "role": "user",
        "content": [{"type": "image", "data": "iVBORw0KGgo=", "mime_type": "image/png"}],
        "timestamp": 2,
    },
    {
        "role": "assistant",
        "content": [{"type": "toolCall", "id": "c", "name": "add", "arguments": {}}],
        "timestamp": 3,
    },
    {"role": "toolResult", "tool_call_id": "c", "tool_name": "add", "content": [], "timestamp": 4},
]
KEYS = [
    "role",
    "content",
    "timestamp",
    "type",
    "text",
    "data",
    "mime_type",
    "arguments",
    "tool_call_id",
    "id",
]


@st.composite
def mutated_messages(draw: st.DrawFn) -> Any:
    """A valid message with a few fields replaced, removed or added: the near misses decoders see."""
    message = orjson.loads(orjson.dumps(draw(st.sampled_from(VALID))))
    for _ in range(draw(st.integers(1, 3))):
        target = message
        content = message.get("content")
        if draw(st.booleans()) and isinstance(content, list) and content and isinstance(content[0], dict):
            target = content[0]
        key = draw(st.sampled_from(KEYS))
        if draw(st.booleans()):
            target.pop(key, None)
        else:
            target[key] = draw(json_values)
    return message


@FUZZ
@given(st.one_of(mutated_messages(), json_values))
def test_message_decoder_raises_only_typed_errors(value: Any) -> None:
    try:
        message = parse_message(value)
    except ValidationError:
        return
    # Whatever decodes survives a round trip through its wire form unchanged.
    assert MESSAGE_ADAPTER.validate_json(orjson.dumps(message.model_dump(mode="json"))) == message


@FUZZ
@given(st.binary(max_size=200) | mutated_messages().map(orjson.dumps))
def test_message_json_decoder_on_arbitrary_bytes(raw: bytes) -> None:
    try:
        MESSAGE_ADAPTER.validate_json(raw)
    except pydantic.ValidationError:
        pass


@FUZZ
@given(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["message", "model_change", "label", "leaf", "custom", "bogus"])},
        optional={
            "id": json_values,
            "parent_id": json_values,
            "timestamp": json_values,
            "message": mutated_messages(),
        },
    )
)
def test_session_entry_decoder_raises_only_validation_errors(raw: dict[str, Any]) -> None:
    try:
        ENTRY_ADAPTER.validate_python(raw)
    except pydantic.ValidationError:
        pass


HEADER = orjson.dumps({"type": "session", "version": 1, "id": "fuzz", "cwd": "/", "timestamp": 1}) + b"\n"


@FUZZ
@given(st.lists(st.binary(max_size=80) | mutated_messages().map(orjson.dumps), max_size=6), st.booleans())
def test_session_file_open_raises_only_session_errors(lines: list[bytes], strict: bool) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "fuzz.jsonl"
        path.write_bytes(HEADER + b"\n".join(lines))
        try:
            with JsonlSessionStorage.open(path, strict=strict) as storage:
                storage.validate()
                storage.build_context()
        except SessionError:
            pass  # the typed error; strict=False still refuses a bad header
        chunk = scan(path.read_bytes())
        assert chunk.consumed <= path.stat().st_size


LINE_TEXT = st.characters(blacklist_characters="\r\n\ufeff", blacklist_categories=["Cs"])
frames = st.lists(
    st.tuples(st.text(alphabet="abcdefghij_-", max_size=10), st.text(alphabet=LINE_TEXT, max_size=30)),
    max_size=6,
)


@FUZZ
@given(frames, st.sampled_from([b"\n", b"\r\n", b"\r"]), st.integers(1, 7))
def test_sse_parser_decodes_what_was_encoded(events: list[tuple[str, str]], eol: bytes, chunk: int) -> None:
    """Any frames, any line ending, cut into chunks anywhere: the same events come out."""
    wire = b"".join(
        (b"event: " + name.encode() + eol if name else b"") + b"data: " + data.encode() + eol + eol
        for name, data in events
    )
    parser = SseParser()
    parsed: list[SseEvent] = []
    for start in range(0, len(wire), chunk):
        parsed += parser.feed(wire[start : start + chunk])
    parsed += parser.finish()
    assert parsed == [SseEvent(name or "message", data) for name, data in events]


@pytest.mark.parametrize("size", [0, 1, 2, 3, 1000])
def test_sse_parser_never_raises_on_garbage(size: int) -> None:
    parser = SseParser()
    garbage = bytes(range(256)) * (size // 256 + 1)
    parser.feed(garbage[:size])
    parser.finish()
