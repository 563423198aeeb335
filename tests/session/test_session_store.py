"""``SessionStore`` (the activities' session access): two workers' stores writing one session."""

from __future__ import annotations

from pathlib import Path

from agentcore.activities.session import SessionStore
from agentcore.messages import UserMessage
from agentcore.protocol import SessionCreate
from agentcore.session import JsonlSessionStorage, MessageEntry


def _entry(text: str) -> MessageEntry:
    return MessageEntry(message=UserMessage(content=text, timestamp=1))


async def test_two_stores_take_turns_on_one_session_without_losing_or_doubling_entries(
    tmp_path: Path,
) -> None:
    # Each store keeps its parsed index between writes; the other store's appends must be seen
    # (parents chain through them) and a retried append must not double a line.
    first, second = SessionStore(tmp_path), SessionStore(tmp_path)
    create = SessionCreate(cwd="/")
    written = []
    for index in range(6):
        store = first if index % 2 == 0 else second
        entry = _entry(f"m{index}")
        stored = await store.write("s1", create, lambda s, e=entry: s.append_entry(e))
        again = await store.write("s1", None, lambda s, e=stored: s.append_entry(e))
        assert again.id == stored.id
        written.append(stored)
    for previous, entry in zip(written, written[1:], strict=False):
        assert entry.parent_id == previous.id
    with JsonlSessionStorage.open(tmp_path / "s1.jsonl") as reader:
        assert [e.id for e in reader.get_entries()] == [e.id for e in written]


async def test_a_session_file_replaced_behind_a_store_is_read_afresh(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    await store.write("s2", SessionCreate(cwd="/"), lambda s: s.append_entry(_entry("old")))
    (tmp_path / "s2.jsonl").unlink()
    fresh = await store.write("s2", SessionCreate(cwd="/"), lambda s: s.append_entry(_entry("new")))
    with JsonlSessionStorage.open(tmp_path / "s2.jsonl") as reader:
        assert [e.id for e in reader.get_entries()] == [fresh.id]
