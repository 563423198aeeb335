"""Property: the conversation's event log keeps the longest tail within its count and byte bounds,
whatever mix of publishes and bounds came before (``ConversationState`` is the stream's only writer:
it sizes each event once, when it publishes it, and carries the sizes from call to call)."""

from __future__ import annotations

from collections import deque
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from temporalio.api.common.v1 import Payload

from agentcore.protocol import ConversationLimits
from agentcore.workflows.state import ConversationState


class _Log:
    """What the state asks of ``WorkflowStream`` and its topic handle: ``publish`` and ``truncate``
    (the stream's own need a running workflow); it keeps the log the way the stream does."""

    def __init__(self) -> None:
        self.items: list[Payload] = []
        self.base_offset = 0

    def publish(self, payload: Payload) -> None:
        self.items.append(payload)

    def truncate(self, up_to_offset: int) -> None:
        assert self.base_offset <= up_to_offset <= self.base_offset + len(self.items)
        del self.items[: up_to_offset - self.base_offset]
        self.base_offset = up_to_offset


def _state(log: _Log, limits: ConversationLimits) -> ConversationState:
    state = ConversationState.__new__(ConversationState)
    state.stream = log  # type: ignore[assignment]
    state.events = log
    state.limits = limits
    state._event_offset = 0
    state._log_sizes = deque()
    state._log_bytes = 0
    state._held_events = []
    return state


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
                state._append(Payload(data=b"x" * length))
        else:
            keep, keep_bytes = arg
            bounds = (max_events, max_bytes) if keep is None else (keep, keep_bytes)
            # Events not yet released count as the log's newest (the cut releases them first).
            items = log.items + state._held_events
            end = log.base_offset + len(items)
            expected = _expected_cut(items, end, *bounds)
            state._truncate_events(keep, keep_bytes)
            assert log.base_offset == max(expected, end - len(items))
        assert state._event_offset == log.base_offset + len(log.items) + len(state._held_events)
        assert state._log_bytes == sum(item.ByteSize() for item in log.items + state._held_events)
