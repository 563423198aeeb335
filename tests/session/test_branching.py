"""Forks and branches: a new session from a middle entry, and moving back within one with a summary.

Conversations are made by the real OpenAI provider against the loopback server (see
``compaction_support``), so the entries are the ones a real run writes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentcore.compaction import (
    BRANCH_SUMMARY_SYSTEM_PROMPT,
    CompactionSettings,
    branch_summary_context,
    summarize_branch,
)
from agentcore.errors import EntryNotFoundError, SessionExistsError
from agentcore.messages import AssistantMessage, Message, UserMessage
from agentcore.providers import stream
from agentcore.session import (
    BranchSummaryEntry,
    GetEntriesOptions,
    JsonlSessionStorage,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    SessionInfoEntry,
    abandoned_messages,
    branch,
    branch_entries,
    branch_summary_message,
    fork_session,
)
from agentcore.testing.loopback import LoopbackServer
from tests.support.compaction import (
    API_KEY,
    SYSTEM_PROMPT,
    Conversation,
    facts_in,
    new_storage,
    prompt_text,
    responder,
)


@pytest.fixture
async def server() -> AsyncIterator[LoopbackServer]:
    async with LoopbackServer(responder, context_window=2_000) as srv:
        yield srv


def _dump(messages: list[Message]) -> list[object]:
    return [m.model_dump(mode="json") for m in messages]


def _message_ids(storage: JsonlSessionStorage, role: str) -> list[str]:
    return [
        e.id
        for e in storage.get_entries(GetEntriesOptions(on_path=True, type="message"))
        if isinstance(e, MessageEntry) and e.message.role == role
    ]


async def _conversation(
    server: LoopbackServer, tmp_path: Path, prompts: int, name: str = "source"
) -> Conversation:
    storage = new_storage(tmp_path, name)
    conversation = Conversation(
        storage, server.model(context_window=2_000, max_tokens=512), CompactionSettings()
    )
    for number in range(prompts):
        await conversation.prompt(prompt_text(number))
    return conversation


# --------------------------------------------------------------------------------------------- fork


async def test_fork_from_a_middle_entry_continues_from_that_context(
    server: LoopbackServer, tmp_path: Path
) -> None:
    source = await _conversation(server, tmp_path, 3)
    storage = source.storage
    storage.append_entry(SessionInfoEntry(name="cellar questions"))
    middle = _message_ids(storage, "assistant")[3]  # the answer to the second prompt
    source_bytes = storage.path.read_bytes()

    with fork_session(storage.path, middle, tmp_path / "fork.jsonl", session_id="fork-1") as fork:
        meta = fork.get_metadata()
        assert meta.id == "fork-1"
        assert meta.metadata["parent_session"] == {"id": storage.get_metadata().id, "path": str(storage.path)}
        assert meta.metadata["forked_from"] == middle
        assert meta.metadata["system_prompt"] == SYSTEM_PROMPT
        assert fork.get_leaf_id() == middle
        expected = storage.build_context(middle)
        assert fork.build_context().model_dump(exclude={"message_entry_ids"}) == expected.model_dump(
            exclude={"message_entry_ids"}
        )
        # Same ids as the source, so an entry can be named in either file.
        assert [e.id for e in fork.get_entries()] == [
            e.id for e in storage.get_entries(GetEntriesOptions(path_to=middle))
        ]
        assert fork.get_session_stats().message_count == 8

        # The fork goes on by itself: the model sees the forked context plus the new prompt.
        forked = Conversation(fork, source.model, source.settings)
        last = await forked.prompt(prompt_text(10))
        assert last.stop_reason == "stop"
        first_call = forked.sent[0].messages
        assert _dump(first_call[:-1]) == _dump(expected.messages)
        assert isinstance(first_call[-1], UserMessage) and "FACT-10" in first_call[-1].text
    assert storage.path.read_bytes() == source_bytes  # the source is untouched

    with pytest.raises(SessionExistsError):
        fork_session(storage.path, middle, tmp_path / "fork.jsonl")
    with pytest.raises(EntryNotFoundError):
        fork_session(storage.path, "no-such-entry", tmp_path / "fork2.jsonl")


async def test_fork_after_a_compaction_keeps_the_summary(server: LoopbackServer, tmp_path: Path) -> None:
    source = await _conversation(server, tmp_path, 9)
    storage = source.storage
    assert source.compactions, "nine prompts pass a 2,000-token window"
    leaf = storage.get_leaf_id()
    assert leaf is not None
    with fork_session(storage.path, leaf, tmp_path / "after.jsonl") as fork:
        context = fork.build_context()
        assert _dump(context.messages) == _dump(storage.build_context().messages)
        assert context.messages[0].text.startswith("The conversation history before this point was compacted")  # type: ignore[union-attr]
    # From an entry before the compaction, the fork has the full uncompacted history up to it.
    early = _message_ids(storage, "user")[0]
    with fork_session(storage.path, early, tmp_path / "early.jsonl") as fork:
        assert len(fork.build_context().messages) == 1


async def test_fork_keeps_only_the_labels_on_its_path(server: LoopbackServer, tmp_path: Path) -> None:
    source = await _conversation(server, tmp_path, 2)
    storage = source.storage
    users = _message_ids(storage, "user")
    storage.append_entry(LabelEntry(target_id=users[0], label="start"))
    branch(storage, users[1])
    storage.append_entry(LabelEntry(target_id=users[1], label="second question"))
    mark = storage.get_leaf_id()
    assert mark is not None
    # The "start" label hangs from the old leaf, on the branch the fork does not copy.
    with fork_session(storage.path, mark, tmp_path / "labels.jsonl") as fork:
        assert fork.get_label(users[1]) == "second question"
        assert fork.get_label(users[0]) is None  # its label hung from the other branch
        assert fork.build_context().messages[-1].role == "user"


# ------------------------------------------------------------------------------------------- branch


async def test_branch_with_summary_keeps_what_the_abandoned_branch_learned(
    server: LoopbackServer, tmp_path: Path
) -> None:
    source = await _conversation(server, tmp_path, 4)
    storage = source.storage
    answers = _message_ids(storage, "assistant")
    target = answers[1]  # end of the first prompt's run
    old_leaf = storage.get_leaf_id()
    abandoned = abandoned_messages(storage, target)
    assert [m.role for m in abandoned].count("user") == 3  # prompts 1..3 are on the abandoned branch

    context = branch_summary_context(storage, target, source.model)
    assert context is not None and context.system_prompt == BRANCH_SUMMARY_SYSTEM_PROMPT
    made = await summarize_branch(storage, target, source.model, stream, api_key=API_KEY)
    assert made is not None
    summary, usage = made
    assert facts_in(summary) == {1: "v7", 2: "v14", 3: "v21"}
    assert usage.input > 0

    stats_before = storage.get_session_stats()
    entries = branch(storage, target, summary, summary_usage=usage)
    assert [type(e) for e in entries] == [LeafEntry, BranchSummaryEntry]
    summary_entry = entries[1]
    assert isinstance(summary_entry, BranchSummaryEntry)
    assert summary_entry.parent_id == target and summary_entry.from_id == old_leaf
    assert storage.get_leaf_id() == summary_entry.id

    expected = [
        *storage.build_context(target).messages,
        branch_summary_message(summary, summary_entry.timestamp),
    ]
    recovered = JsonlSessionStorage.open(storage.path).build_context()
    assert _dump(recovered.messages) == _dump(expected)
    # History is kept: stats count the abandoned branch, and the summary's tokens.
    stats = storage.get_session_stats()
    assert stats.message_count == stats_before.message_count
    assert stats.input_tokens == stats_before.input_tokens + usage.input

    # The next model call sees the branch summary, then the new prompt.
    last = await source.prompt(prompt_text(20))
    assert last.stop_reason == "stop"
    sent = source.sent[-2].messages
    assert _dump(sent[: len(expected)]) == _dump(expected)
    assert "FACT-3=v21" in sent[len(expected) - 1].text  # type: ignore[union-attr]


async def test_branch_without_summary_and_to_the_root(server: LoopbackServer, tmp_path: Path) -> None:
    source = await _conversation(server, tmp_path, 2)
    storage = source.storage
    first_answer = _message_ids(storage, "assistant")[1]
    assert [type(e) for e in branch(storage, first_answer)] == [LeafEntry]
    assert storage.get_leaf_id() == first_answer
    assert len(storage.build_context().messages) == 4
    branch(storage, None)
    assert storage.get_leaf_id() is None and storage.build_context().messages == []
    leaf_entry = storage.find_entries("leaf")[0]
    with pytest.raises(EntryNotFoundError):
        branch(storage, leaf_entry.id)
    with pytest.raises(EntryNotFoundError):
        branch(storage, "missing")
    assert await summarize_branch(storage, None, source.model, stream, api_key=API_KEY) is None


def test_branch_entries_take_the_callers_ids() -> None:
    ids = iter(["leaf-1", "summary-1"])
    entries = branch_entries("old", "target", "what we learned", new_id=lambda: next(ids), timestamp=5)
    assert [(e.id, e.parent_id) for e in entries] == [("leaf-1", "old"), ("summary-1", "target")]
    assert isinstance(entries[1], BranchSummaryEntry) and entries[1].from_id == "old"
    root = branch_entries(None, None, "s")
    assert isinstance(root[1], BranchSummaryEntry) and root[1].from_id == "root"


def test_labels_and_session_names(tmp_path: Path) -> None:
    with new_storage(tmp_path, "named") as storage:
        entry = storage.append_entry(MessageEntry(message=UserMessage(content="hi", timestamp=1)))
        storage.append_entry(LabelEntry(target_id=entry.id, label="greeting"))
        storage.append_entry(SessionInfoEntry(name="first chat"))
        reopened = JsonlSessionStorage.open(storage.path)
        assert reopened.get_label(entry.id) == "greeting"
        assert reopened.get_metadata().name == "first chat"
        storage.append_entry(LabelEntry(target_id=entry.id, label=None))
        assert storage.get_label(entry.id) is None
        assert [m.role for m in storage.build_context().messages] == ["user"]
        assert not isinstance(storage.build_context().messages[0], AssistantMessage)
