from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore.providers.sse import SseEvent, SseParser, aiter_sse


def parse(*chunks: bytes) -> list[SseEvent]:
    parser = SseParser()
    events = [event for chunk in chunks for event in parser.feed(chunk)]
    return events + parser.finish()


def test_event_name_and_data():
    assert parse(b"event: ping\ndata: {}\n\n") == [SseEvent("ping", "{}")]
    assert parse(b"data: x\n\n") == [SseEvent("message", "x")]


def test_comment_lines_are_skipped():
    stream = b': OPENROUTER PROCESSING\n\ndata: {"a":1}\n: keep-alive\n\n'
    assert parse(stream) == [SseEvent("message", '{"a":1}')]


def test_multi_line_data_joined_with_newlines():
    assert parse(b"data: one\ndata:two\ndata:  three\n\n") == [SseEvent("message", "one\ntwo\n three")]


def test_crlf_and_cr_line_endings():
    expected = [SseEvent("a", "1"), SseEvent("b", "2")]
    assert parse(b"event: a\r\ndata: 1\r\n\r\nevent: b\r\ndata: 2\r\n\r\n") == expected
    assert parse(b"event: a\rdata: 1\r\revent: b\rdata: 2\r\r") == expected


def test_crlf_split_between_chunks_is_one_line_ending():
    assert parse(b"data: 1\r", b"\n", b"data: 2\r", b"\n\r\n") == [SseEvent("message", "1\n2")]


def test_stream_without_terminator_flushes_last_event():
    assert parse(b"data: [DONE]") == [SseEvent("message", "[DONE]")]
    assert parse(b"event: message_stop\ndata: {}\n") == [SseEvent("message_stop", "{}")]


def test_event_without_data_is_not_dispatched():
    assert parse(b"event: ping\n\n") == []


def test_utf8_split_inside_character():
    raw = "data: héllo ✓\n\n".encode()
    cut = raw.index("✓".encode()) + 1
    assert parse(raw[:cut], raw[cut:]) == [SseEvent("message", "héllo ✓")]


def test_bom_is_ignored():
    assert parse(b"\xef\xbb", b"\xbfdata: x\n\n") == [SseEvent("message", "x")]


async def test_aiter_sse():
    async def chunks():
        yield b"data: a\n"
        yield b"\ndata: b"

    assert [e async for e in aiter_sse(chunks())] == [SseEvent("message", "a"), SseEvent("message", "b")]


sse_like = st.lists(
    st.sampled_from(
        [b"data: ", b"event: ", b":", b"\n", b"\r", b"\r\n", b"x", b"{}", b"\xef\xbb\xbf", b"\xff", b" "]
    ),
    max_size=60,
).map(b"".join)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(st.binary(max_size=300), sse_like),
    st.lists(st.integers(min_value=0, max_value=300), max_size=8),
)
def test_fuzz_never_raises_and_splitting_does_not_matter(data: bytes, cuts: list[int]):
    whole = parse(data)
    points = sorted({min(c, len(data)) for c in cuts})
    pieces = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    assert parse(*pieces) == whole
    # Byte by byte is the most adversarial split of all.
    assert parse(*[data[i : i + 1] for i in range(len(data))]) == whole
