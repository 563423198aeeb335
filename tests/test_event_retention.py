"""Property: the conversation's event log keeps the longest tail within its count and byte bounds,
whatever mix of publishes, cuts by others and bounds came before (``ConversationState`` sizes each
item once and carries the sizes from call to call)."""

from __future__ import annotations

from collections import deque
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from temporalio.api.common.v1 import Payload
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.contrib.workflow_streams._types import WorkflowStreamItem

from agentcore.protocol import ConversationLimits
from agentcore.workflows.state import ConversationState


def _stream() -> WorkflowStream:
    # The real class and its own truncate/offset code; only its constructor, which registers the
    # poll handlers with a running workflow, is skipped.
    stream = WorkflowStream.__new__(WorkflowStream)
    stream._log = []
    stream._base_offset = 0
    return stream


def _state(stream: WorkflowStream, limits: ConversationLimits) -> ConversationState:
    state = ConversationState.__new__(ConversationState)
    state.stream = stream
    state.limits = limits
    state._log_sizes = deque()
    state._log_bytes = state._sized_to = 0
    return state


def _expected_cut(log: list[Any], end: int, max_events: int, max_bytes: int) -> int:
    """The rule written plainly: walk back from the newest item while both bounds hold."""
    kept = size = 0
    for item in reversed(log):
        size += item.data.ByteSize()
        if kept >= max_events or size > max_bytes:
            break
        kept += 1
    return end - kept


steps = st.lists(
    st.one_of(
        st.tuples(st.just("publish"), st.lists(st.integers(0, 300), max_size=30)),
        st.tuples(st.just("cut"), st.integers(0, 40)),  # someone else truncates (a compaction's reset)
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
    stream = _stream()
    state = _state(stream, ConversationLimits(retained_events=max_events, retained_event_bytes=max_bytes))
    for kind, arg in steps:
        if kind == "publish":
            for length in arg:
                stream._log.append(WorkflowStreamItem(topic="events", data=Payload(data=b"x" * length)))
        elif kind == "cut":
            end = stream._on_offset()
            stream.truncate(min(end, stream._base_offset + arg))
        else:
            keep, keep_bytes = arg
            bounds = (max_events, max_bytes) if keep is None else (keep, keep_bytes)
            log, end = list(stream._log), stream._on_offset()
            expected = _expected_cut(log, end, *bounds)
            state._truncate_events(keep, keep_bytes)
            assert stream._base_offset == max(expected, end - len(log))
            assert stream._on_offset() == end
            assert state._log_bytes == sum(item.data.ByteSize() for item in stream._log)
