"""Property: the conversation's event log keeps the longest tail within its count and byte bounds,
whatever mix of publishes and bounds came before (``EventLog`` is the stream's only writer: it sizes
each event once, when it publishes it, and carries the sizes from call to call)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from temporalio.api.common.v1 import Payload

from agentcore.protocol import ConversationLimits
from agentcore.workflows.event_log import EventLog


class _Log:
    """What the log asks of ``WorkflowStream`` and its topic handle: ``topic``, ``publish`` and
    ``truncate`` (the stream's own need a running workflow); it keeps the log the way the stream does."""

    def __init__(self) -> None:
        self.items: list[Payload] = []
        self.base_offset = 0

    def topic(self, name: str) -> _Log:
        return self

    def publish(self, payload: Payload) -> None:
        self.items.append(payload)

    def truncate(self, up_to_offset: int) -> None:
        assert self.base_offset <= up_to_offset <= self.base_offset + len(self.items)
        del self.items[: up_to_offset - self.base_offset]
        self.base_offset = up_to_offset


def _state(log: _Log, limits: ConversationLimits) -> EventLog:
    return EventLog(log, limits)  # type: ignore[arg-type]


def _expected_cut(log: list[Payload], end: int, max_events: int, max_bytes: int) -> int:
    """The rule written plainly: walk back from the newest item while both bounds hold."""
    kept = size = 0
    for item in reversed(log):
        size += item.ByteSize()
        if kept >= max_events or size > max_bytes:
            break
        kept += 1
    return end - kept


steps = st.lists(
    st.one_of(
        st.tuples(st.just("publish"), st.lists(st.integers(0, 300), max_size=30)),
        st.tuples(st.just("bound"), st.tuples(st.integers(0, 40), st.integers(0, 4_000))),
        st.tuples(st.just("bound"), st.just((None, None))),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(steps=steps, max_events=st.integers(1, 60), max_bytes=st.integers(50, 6_000))
def test_the_log_keeps_the_longest_tail_within_both_bounds(
    steps: list[tuple[str, Any]], max_events: int, max_bytes: int
) -> None:
    log = _Log()
    state = _state(log, ConversationLimits(retained_events=max_events, retained_event_bytes=max_bytes))
    for kind, arg in steps:
        if kind == "publish":
            for length in arg:
                state.append(Payload(data=b"x" * length))
        else:
            keep, keep_bytes = arg
            bounds = (max_events, max_bytes) if keep is None else (keep, keep_bytes)
            # Events not yet released count as the log's newest (the cut releases them first).
            items = log.items + state.held
            end = log.base_offset + len(items)
            expected = _expected_cut(items, end, *bounds)
            state.truncate(keep, keep_bytes)
            assert log.base_offset == max(expected, end - len(items))
        assert state.offset == log.base_offset + len(log.items) + len(state.held)
        assert state.retained_bytes == sum(item.ByteSize() for item in log.items + state.held)
