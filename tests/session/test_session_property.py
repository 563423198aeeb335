"""Property: any sequence of appends, branches, compactions, torn tails and reopens reloads to the
same context as a plain in-memory model of the tree."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore.model import ThinkingLevel
from agentcore.session import (
    CompactionEntry,
    CustomEntry,
    FsyncPolicy,
    JsonlSessionStorage,
    LeafEntry,
    MessageEntry,
    SessionEntry,
    ThinkingLevelChangeEntry,
)
from agentcore.session.context import COMPACTION_SUMMARY_PREFIX, SUMMARY_SUFFIX, context_from_entries
from agentcore.session.entries import SYSTEM_PROMPT_CUSTOM_TYPE, SYSTEM_PROMPT_METADATA_KEY
from tests.support.session import new_session, reopen, texts, user


@dataclass
class Node:
    parent: str | None
    kind: str  # "message" | "compaction" | "thinking" | "leaf"
    text: str = ""
    first_kept: str | None = None


@dataclass
class TreeModel:
    """The spec's rules, written as directly as possible."""

    nodes: dict[str, Node] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    leaf: str | None = None

    def add(self, entry_id: str, node: Node, target: str | None = None) -> None:
        self.nodes[entry_id] = node
        self.order.append(entry_id)
        self.leaf = target if node.kind == "leaf" else entry_id

    def path(self) -> list[str]:
        out, current = [], self.leaf
        while current is not None:
            out.append(current)
            current = self.nodes[current].parent
        return out[::-1]

    def context(self) -> tuple[list[str], str]:
        path = self.path()
        thinking = "off"
        for entry_id in path:
            if self.nodes[entry_id].kind == "thinking":
                thinking = self.nodes[entry_id].text
        compactions = [i for i, entry_id in enumerate(path) if self.nodes[entry_id].kind == "compaction"]

        def message_texts(ids: list[str]) -> list[str]:
            return [self.nodes[i].text for i in ids if self.nodes[i].kind == "message"]

        if not compactions:
            return message_texts(path), thinking
        at = compactions[-1]
        compaction = self.nodes[path[at]]
        before = path[:at]
        kept = before[before.index(compaction.first_kept) :] if compaction.first_kept in before else []
        summary = COMPACTION_SUMMARY_PREFIX + compaction.text + SUMMARY_SUFFIX
        return [summary, *message_texts(kept), *message_texts(path[at + 1 :])], thinking


operation = st.one_of(
    st.tuples(st.just("message"), st.text(alphabet="abcxyz é", min_size=1, max_size=8)),
    st.tuples(st.just("batch"), st.integers(min_value=1, max_value=4)),
    st.tuples(st.just("branch"), st.integers(min_value=-1, max_value=1000)),
    st.tuples(st.just("compact"), st.integers(min_value=0, max_value=1000)),
    st.tuples(st.just("thinking"), st.sampled_from([level.value for level in ThinkingLevel])),
    st.tuples(st.just("torn"), st.binary(min_size=1, max_size=40)),
    st.tuples(st.just("reopen"), st.just(0)),
    st.tuples(st.just("retry"), st.integers(min_value=0, max_value=1000)),
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operation, max_size=30))
def test_reload_matches_the_in_memory_model(operations: list[tuple[str, object]]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "s.jsonl"
        model = TreeModel()
        storage = new_session(path)
        counter = 0

        def next_id() -> str:
            nonlocal counter
            counter += 1
            return f"e{counter}"

        try:
            for kind, value in operations:
                if kind == "message":
                    entry_id = next_id()
                    storage.append_entry(MessageEntry(id=entry_id, message=user(str(value))))
                    model.add(entry_id, Node(model.leaf, "message", str(value)))
                elif kind == "batch":
                    batch = [MessageEntry(id=next_id(), message=user(f"b{n}")) for n in range(int(value))]  # type: ignore[call-overload]
                    storage.append_entries(batch)
                    for entry in batch:
                        model.add(entry.id, Node(model.leaf, "message", texts([entry.message])[0]))
                elif kind == "branch":
                    index = int(value)  # type: ignore[call-overload]
                    target = None if index < 0 or not model.order else model.order[index % len(model.order)]
                    if target is not None and model.nodes[target].kind == "leaf":
                        continue
                    entry_id = next_id()
                    storage.append_entry(LeafEntry(id=entry_id, target_id=target))
                    model.add(entry_id, Node(model.leaf, "leaf"), target)
                elif kind == "compact":
                    path_ids = model.path()
                    kept = path_ids[int(value) % len(path_ids)] if path_ids else None  # type: ignore[call-overload]
                    entry_id = next_id()
                    storage.append_entry(
                        CompactionEntry(id=entry_id, summary=f"sum{entry_id}", first_kept_entry_id=kept)
                    )
                    model.add(entry_id, Node(model.leaf, "compaction", f"sum{entry_id}", kept))
                elif kind == "thinking":
                    entry_id = next_id()
                    storage.append_entry(
                        ThinkingLevelChangeEntry(id=entry_id, thinking_level=ThinkingLevel(str(value)))
                    )
                    model.add(entry_id, Node(model.leaf, "thinking", str(value)))
                elif kind == "torn":
                    # A crash mid-append: the writer dies, a partial line stays behind.
                    storage.close()
                    garbage = bytes(value).replace(b"\n", b" ")  # type: ignore[call-overload]
                    with path.open("ab") as file:
                        file.write(b'{"id":"torn' + garbage)
                    storage = reopen(path, writer=True, fsync=FsyncPolicy("never"))
                elif kind == "reopen":
                    storage.close()
                    storage = reopen(path, writer=True, fsync=FsyncPolicy("never"))
                elif kind == "retry" and model.order:
                    # An activity retry re-sends an entry that is already stored: nothing changes.
                    existing = model.order[int(value) % len(model.order)]  # type: ignore[call-overload]
                    stored = storage.get_entry(existing)
                    assert stored is not None
                    storage.append_entry(stored)
                check(storage, model)
        finally:
            storage.close()
        with JsonlSessionStorage.open(path) as reader:
            check(reader, model)
            assert [e.id for e in reader.get_entries()] == model.order


def check(storage: JsonlSessionStorage, model: TreeModel) -> None:
    expected_texts, expected_thinking = model.context()
    context = storage.build_context()
    assert storage.get_leaf_id() == model.leaf
    assert texts(context.messages) == expected_texts
    assert context.thinking_level == expected_thinking


# ------------------------------------------------------------------------------ the kept context


def _reference(storage: JsonlSessionStorage, leaf: str | None, pending: list[SessionEntry]) -> object:
    """The context at ``leaf`` rebuilt from nothing (no kept context involved)."""
    overlay = {entry.id: entry for entry in pending}
    path: list[SessionEntry] = []
    current = leaf
    while current is not None:
        entry = overlay.get(current) or storage.get_entry(current)
        assert entry is not None
        path.append(entry)
        current = entry.parent_id
    header = storage.get_metadata().metadata.get(SYSTEM_PROMPT_METADATA_KEY)
    return context_from_entries(path[::-1], system_prompt=header if isinstance(header, str) else None)


def _overlay_entry(kind: str, entry_id: str, parent: str | None, index: int) -> SessionEntry:
    if kind == "message":
        return MessageEntry(id=entry_id, parent_id=parent, timestamp=1, message=user(f"p{entry_id}"))
    if kind == "thinking":
        return ThinkingLevelChangeEntry(
            id=entry_id, parent_id=parent, timestamp=1, thinking_level=ThinkingLevel.HIGH
        )
    if kind == "custom":
        return CustomEntry(id=entry_id, parent_id=parent, timestamp=1, custom_type="app", data=index)
    if kind == "prompt":
        return CustomEntry(
            id=entry_id,
            parent_id=parent,
            timestamp=1,
            custom_type=SYSTEM_PROMPT_CUSTOM_TYPE,
            data=f"sp{index}",
        )
    return CompactionEntry(
        id=entry_id, parent_id=parent, timestamp=1, summary=f"s{entry_id}", first_kept_entry_id=None
    )


kinds = st.sampled_from(["message", "message", "message", "thinking", "custom", "prompt", "compaction"])
step = st.tuples(
    st.sampled_from(["append", "append", "branch", "ask", "ask"]),
    st.integers(min_value=0, max_value=1000),
    st.lists(kinds, max_size=4),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, max_size=25))
def test_contexts_built_from_the_kept_one_match_a_rebuild(steps: list[tuple[str, int, list[str]]]) -> None:
    """``build_context`` keeps the context it built last and extends it when the next path runs
    through it: whatever order entries are asked for in, with or without pending entries on top, the
    answer is the one a rebuild from the root gives."""
    with tempfile.TemporaryDirectory() as directory:
        storage = new_session(Path(directory) / "s.jsonl", metadata={SYSTEM_PROMPT_METADATA_KEY: "header"})
        ids: list[str] = []
        counter = 0
        try:
            for action, number, overlay_kinds in steps:
                if action == "append":
                    for kind in overlay_kinds or ["message"]:
                        counter += 1
                        entry = _overlay_entry(kind, f"e{counter}", storage.get_leaf_id(), counter)
                        storage.append_entry(entry)
                        ids.append(entry.id)
                    continue
                if action == "branch" and ids:
                    storage.append_entry(LeafEntry(target_id=ids[number % len(ids)]))
                    continue
                leaf = ids[number % len(ids)] if ids and number % 3 else storage.get_leaf_id()
                pending: list[SessionEntry] = []
                parent = leaf
                for kind in overlay_kinds:
                    counter += 1
                    pending.append(_overlay_entry(kind, f"p{counter}", parent, counter))
                    parent = pending[-1].id
                asked = parent
                got = storage.build_context(asked, pending=pending)
                assert got.model_dump() == _reference(storage, asked, pending).model_dump()  # type: ignore[attr-defined]
                got.messages.clear()  # a caller may change what it got: the kept context is its own
        finally:
            storage.close()
