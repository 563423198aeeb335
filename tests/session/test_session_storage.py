"""JsonlSessionStorage: the SPEC-4.2 interface, the tree, context rebuilding, stats, bad input."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from agentcore.errors import AgentError
from agentcore.messages import ToolResultMessage, Usage, UsageCost
from agentcore.model import Model, ModelCost, ThinkingLevel
from agentcore.session import (
    SYSTEM_PROMPT_CUSTOM_TYPE,
    ActiveToolsChangeEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    EntryNotFoundError,
    FsyncPolicy,
    GetEntriesOptions,
    InvalidEntryError,
    InvalidParentError,
    JsonlSessionStorage,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    ModelChangeEntry,
    NotASessionError,
    SessionClosedError,
    SessionCorruptError,
    SessionEncodingError,
    SessionExistsError,
    SessionInfoEntry,
    SessionNotFoundError,
    SessionOptions,
    ThinkingLevelChangeEntry,
    UnknownEntryTypeError,
    branch_summary_message,
    compaction_summary_message,
)
from tests.support.session import assistant, new_session, reopen, texts, user


def test_create_writes_a_header_and_refuses_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "conv-1.jsonl"
    with new_session(path, metadata={"system_prompt": "be brief", "owner": "ana"}) as storage:
        meta = storage.get_metadata()
    assert (meta.id, meta.cwd, meta.version, meta.metadata["owner"]) == ("conv-1", "/work", 1, "ana")
    header = orjson.loads(path.read_bytes().splitlines()[0])
    assert header["type"] == "session" and header["version"] == 1 and header["timestamp"] > 0
    with pytest.raises(SessionExistsError):
        new_session(path)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_open_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SessionNotFoundError):
        reopen(tmp_path / "nope.jsonl")


def test_from_options_creates_then_opens(tmp_path: Path) -> None:
    options = SessionOptions(path=str(tmp_path / "s.jsonl"), cwd="/x", metadata={"k": 1})
    with JsonlSessionStorage.from_options(options, fsync=FsyncPolicy("never")) as s:
        s.append_entry(MessageEntry(message=user("hi")))
    with JsonlSessionStorage.from_options(options) as s:
        assert s.get_metadata().metadata == {"k": 1} and len(s.get_entries()) == 1


def test_append_fills_id_timestamp_and_parent_and_returns_the_stored_entry(tmp_path: Path) -> None:
    with new_session(tmp_path / "s.jsonl") as storage:
        first = storage.append_entry(MessageEntry(message=user("one")))
        second = storage.append_entry(MessageEntry(id="fixed-2", message=assistant("two")))
        assert len(first.id) == 32 and first.timestamp > 0 and first.parent_id is None
        assert second.id == "fixed-2" and second.parent_id == first.id
        assert storage.get_leaf_id() == "fixed-2"
        assert storage.get_entry("fixed-2") == second
        assert storage.get_entry("missing") is None
    # The index was updated on append; a fresh open reads the same thing from disk.
    with reopen(tmp_path / "s.jsonl") as again:
        assert again.get_entry("fixed-2") == second
        assert again.get_leaf_id() == "fixed-2"


def test_append_is_idempotent_by_id(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with new_session(path) as storage:
        storage.append_entry(MessageEntry(id="a", message=user("one")))
        size = path.stat().st_size
        again = storage.append_entry(MessageEntry(id="a", message=user("different text, same id")))
        assert texts([again.message]) == ["one"]  # type: ignore[union-attr]
        # A retried batch: the stored one is skipped, the new one written, a repeat inside the batch once.
        stored = storage.append_entries(
            [
                MessageEntry(id="a", message=user("one")),
                MessageEntry(id="b", message=user("two")),
                MessageEntry(id="b", message=user("two")),
            ]
        )
        assert [e.id for e in stored] == ["a", "b", "b"]
        assert path.stat().st_size > size
    assert len(path.read_bytes().splitlines()) == 3


def test_append_entries_chains_the_batch_and_writes_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentcore.session.storage import jsonl as jsonl_module

    writes: list[bytes] = []
    real_write = jsonl_module.write_all
    with new_session(tmp_path / "s.jsonl") as storage:
        monkeypatch.setattr(
            jsonl_module, "write_all", lambda fd, data: (writes.append(data), real_write(fd, data))
        )
        batch = storage.append_entries(
            [MessageEntry(message=user("q")), MessageEntry(message=assistant("a"))]
        )
    assert batch[1].parent_id == batch[0].id
    assert len(writes) == 1 and writes[0].count(b"\n") == 2


def test_bad_entries_are_refused_with_typed_errors(tmp_path: Path) -> None:
    with new_session(tmp_path / "s.jsonl") as storage:
        with pytest.raises(UnknownEntryTypeError):
            storage.append_entry({"type": "bogus"})
        with pytest.raises(InvalidEntryError):
            storage.append_entry({"type": "message", "message": {"role": "user"}})
        with pytest.raises(InvalidParentError):
            storage.append_entry(MessageEntry(parent_id="ghost", message=user("x")))
        with pytest.raises(InvalidParentError):
            storage.append_entry(LeafEntry(target_id="ghost"))
        with pytest.raises(InvalidParentError):
            storage.append_entry(LabelEntry(target_id="ghost", label="x"))
        assert storage.get_entries() == []  # nothing half-written
    assert len((tmp_path / "s.jsonl").read_bytes().splitlines()) == 1


def test_dict_entries_are_accepted(tmp_path: Path) -> None:
    with new_session(tmp_path / "s.jsonl") as storage:
        entry = storage.append_entry({"type": "session_info", "name": "Trip planning"})
        assert isinstance(entry, SessionInfoEntry)
        assert storage.get_metadata().name == "Trip planning"


def test_reader_cannot_write_and_closed_storage_refuses(tmp_path: Path) -> None:
    new_session(tmp_path / "s.jsonl").close()
    reader = reopen(tmp_path / "s.jsonl")
    with pytest.raises(SessionClosedError):
        reader.append_entry(MessageEntry(message=user("x")))
    reader.close()
    with pytest.raises(SessionClosedError):
        reader.get_entries()


def build_branchy(storage: JsonlSessionStorage) -> dict[str, str]:
    ids: dict[str, str] = {}
    ids["q1"] = storage.append_entry(MessageEntry(id="q1", message=user("q1"))).id
    ids["a1"] = storage.append_entry(MessageEntry(id="a1", message=assistant("a1"))).id
    ids["q2"] = storage.append_entry(MessageEntry(id="q2", message=user("q2"))).id
    storage.append_entry(LeafEntry(id="back", target_id="a1"))
    storage.append_entry(BranchSummaryEntry(id="bs", from_id="q2", summary="asked q2, no answer"))
    storage.append_entry(MessageEntry(id="q3", message=user("q3")))
    return ids


def test_branches_leaf_and_branch_summary(tmp_path: Path) -> None:
    with new_session(tmp_path / "s.jsonl") as storage:
        build_branchy(storage)
        assert storage.get_leaf_id() == "q3"
        assert storage.get_entry("bs").parent_id == "a1"  # type: ignore[union-attr]
        context = storage.build_context()
        assert texts(context.messages) == [
            "q1",
            "a1",
            texts([branch_summary_message("asked q2, no answer", 1)])[0],
            "q3",
        ]
        assert texts(storage.build_context("q2").messages) == ["q1", "a1", "q2"]
        # Moving back to before the first entry: the next append is a new root.
        storage.append_entry(LeafEntry(target_id=None))
        assert storage.get_leaf_id() is None and storage.build_context().messages == []
        root2 = storage.append_entry(MessageEntry(message=user("fresh")))
        assert root2.parent_id is None
    with reopen(tmp_path / "s.jsonl") as again:
        assert again.get_leaf_id() == root2.id
        assert texts(again.build_context("q3").messages)[-1] == "q3"


def test_get_entries_options(tmp_path: Path) -> None:
    with new_session(tmp_path / "s.jsonl") as storage:
        build_branchy(storage)
        all_ids = [e.id for e in storage.get_entries()]
        assert all_ids == ["q1", "a1", "q2", "back", "bs", "q3"]
        assert [e.id for e in storage.get_entries(GetEntriesOptions(on_path=True))] == [
            "q1",
            "a1",
            "bs",
            "q3",
        ]
        assert [e.id for e in storage.get_entries(GetEntriesOptions(path_to="q2"))] == ["q1", "a1", "q2"]
        assert [e.id for e in storage.get_entries(GetEntriesOptions(type="message", after_id="a1"))] == [
            "q2",
            "q3",
        ]
        assert [e.id for e in storage.get_entries(GetEntriesOptions(type=["leaf", "branch_summary"]))] == [
            "back",
            "bs",
        ]
        assert [
            e.id for e in storage.get_entries(GetEntriesOptions(on_path=True, after_id="q1", limit=2))
        ] == ["a1", "bs"]
        assert [e.id for e in storage.find_entries("message")] == ["q1", "a1", "q2", "q3"]
        with pytest.raises(EntryNotFoundError):
            storage.get_entries(GetEntriesOptions(path_to="ghost"))
        with pytest.raises(EntryNotFoundError):
            storage.get_entries(GetEntriesOptions(on_path=True, after_id="q2"))  # q2 is off the path


def test_labels_set_and_clear(tmp_path: Path) -> None:
    with new_session(tmp_path / "s.jsonl") as storage:
        storage.append_entry(MessageEntry(id="m", message=user("x")))
        storage.append_entry(LabelEntry(target_id="m", label="checkpoint"))
        assert storage.get_label("m") == "checkpoint"
        storage.append_entry(LabelEntry(target_id="m", label=""))
        assert storage.get_label("m") is None
        storage.append_entry(LabelEntry(target_id="m", label="again"))
    with reopen(tmp_path / "s.jsonl") as again:
        assert again.get_label("m") == "again"
        # Labels and other bookkeeping never reach the model.
        assert texts(again.build_context().messages) == ["x"]


def test_context_settings_model_thinking_tools_and_system_prompt(tmp_path: Path) -> None:
    model = Model(
        id="gpt-x", base_url="http://localhost:1234/v1", context_window=8000, cost=ModelCost(input=3)
    )
    with new_session(tmp_path / "s.jsonl", metadata={"system_prompt": "initial"}) as storage:
        assert storage.build_context().system_prompt == "initial"
        storage.append_entry(ModelChangeEntry(model=Model(id="old")))
        storage.append_entry(ModelChangeEntry(model=model))
        storage.append_entry(ThinkingLevelChangeEntry(thinking_level=ThinkingLevel.HIGH))
        storage.append_entry(ActiveToolsChangeEntry(active_tools=["search", "read"]))
        storage.append_entry(CustomEntry(custom_type=SYSTEM_PROMPT_CUSTOM_TYPE, data="changed"))
        storage.append_entry(CustomEntry(custom_type="app.note", data={"never": "sent"}))
        storage.append_entry(MessageEntry(message=user("hello")))
    with reopen(tmp_path / "s.jsonl") as again:
        context = again.build_context()
    assert context.model == model  # base_url, limits and prices survive
    assert context.thinking_level is ThinkingLevel.HIGH
    assert context.active_tools == ["search", "read"]
    assert context.system_prompt == "changed"
    assert texts(context.messages) == ["hello"]


def test_compaction_replaces_history_before_first_kept(tmp_path: Path) -> None:
    with new_session(tmp_path / "s.jsonl") as storage:
        for n in range(1, 5):
            storage.append_entry(MessageEntry(id=f"m{n}", message=user(f"m{n}")))
        storage.append_entry(
            CompactionEntry(
                id="c1",
                summary="m1 and m2 happened",
                first_kept_entry_id="m3",
                tokens_before=1234,
                usage=Usage(input=100, output=20, cost=UsageCost(total=0.25)),
            )
        )
        storage.append_entry(MessageEntry(id="m5", message=user("m5")))
        context = storage.build_context()
        summary = texts([compaction_summary_message("m1 and m2 happened", 1)])[0]
        assert summary.startswith("The conversation history before this point was compacted")
        assert "<summary>\nm1 and m2 happened\n</summary>" in summary
        assert texts(context.messages) == [summary, "m3", "m4", "m5"]
        # A second compaction wins; a first kept entry that is not on the path keeps nothing.
        storage.append_entry(CompactionEntry(summary="all of it", first_kept_entry_id="nowhere"))
        assert texts(storage.build_context().messages) == [
            texts([compaction_summary_message("all of it", 1)])[0]
        ]
        # Stats still count the compacted messages.
        stats = storage.get_session_stats()
        assert stats.message_count == 5 and stats.cost_total == pytest.approx(0.25)


def test_stats_cover_all_entries(tmp_path: Path) -> None:
    with new_session(tmp_path / "s.jsonl") as storage:
        storage.append_entry(MessageEntry(id="q", message=user("q")))
        storage.append_entry(
            MessageEntry(
                message=assistant("a", input=100, output=50, cache_read=30, cache_write=20, cost=0.01)
            )
        )
        storage.append_entry(
            MessageEntry(
                message=ToolResultMessage(
                    tool_call_id="t",
                    tool_name="x",
                    timestamp=1,
                    usage=Usage(input=5, output=5, cost=UsageCost(total=0.002)),
                )
            )
        )
        storage.append_entry(LeafEntry(target_id="q"))  # the assistant branch is now off the path...
        storage.append_entry(MessageEntry(message=assistant("b", input=10, output=1, cost=0.001)))
        storage.append_entry(
            BranchSummaryEntry(from_id="q", summary="s", usage=Usage(output=7, cost=UsageCost(total=0.1)))
        )
    with reopen(tmp_path / "s.jsonl") as again:
        stats = again.get_session_stats()
    assert stats.message_count == 4  # ...but still counted
    assert stats.cached_tokens == 50  # cache_read + cache_write
    assert stats.uncached_tokens == 100 + 50 + 5 + 5 + 10 + 1 + 7
    assert stats.total_tokens == stats.cached_tokens + stats.uncached_tokens
    assert stats.cost_total == pytest.approx(0.01 + 0.002 + 0.001 + 0.1)
    assert (stats.user_messages, stats.assistant_messages, stats.tool_results) == (1, 2, 1)


# ------------------------------------------------------------------------------------- bad files


def write_lines(path: Path, *lines: bytes | dict[str, object]) -> None:
    path.write_bytes(
        b"".join((line if isinstance(line, bytes) else orjson.dumps(line)) + b"\n" for line in lines)
    )


HEADER = {"type": "session", "version": 1, "id": "s", "cwd": "/", "timestamp": 1}


def message(entry_id: str, parent: str | None, text: str = "x") -> dict[str, object]:
    return {
        "type": "message",
        "id": entry_id,
        "parent_id": parent,
        "timestamp": 1,
        "message": {"role": "user", "content": text, "timestamp": 1},
    }


def test_non_session_files_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    for content in (b"", b"hello world\n", b'{"type": "message"}\n', b"\xff\xfe\x00binary", b"[1,2]\n"):
        path.write_bytes(content)
        with pytest.raises(NotASessionError):
            reopen(path)


def test_malformed_line_in_the_middle_is_corruption_with_its_line_number(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write_lines(path, HEADER, message("a", None), b'{"type": "message", "id": ', message("b", "a"))
    with pytest.raises(SessionCorruptError) as info:
        reopen(path)
    assert info.value.line_number == 3 and "line 3" in str(info.value)
    # strict=False skips it, says so, and keeps every valid entry.
    with reopen(path, strict=False) as lenient:
        assert [e.id for e in lenient.get_entries()] == ["a", "b"]
        assert any("line 3" in warning for warning in lenient.warnings)


def test_invalid_utf8_is_a_typed_error_with_line_number(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write_lines(path, HEADER, message("a", None), b'{"type": "message", "id": "\xff\xfe"}', message("b", "a"))
    with pytest.raises(SessionEncodingError) as info:
        reopen(path)
    assert info.value.line_number == 3


def test_unknown_type_missing_parent_and_duplicate_ids_in_a_file(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write_lines(path, HEADER, message("a", None), {"type": "mystery", "id": "z", "parent_id": "a"})
    with pytest.raises(UnknownEntryTypeError) as unknown:
        reopen(path)
    assert unknown.value.line_number == 3
    write_lines(path, HEADER, message("a", None), message("b", "ghost"))
    with pytest.raises(InvalidParentError):
        reopen(path)
    write_lines(path, HEADER, message("a", None), message("a", None))
    with pytest.raises(SessionCorruptError, match="duplicate"):
        reopen(path)
    # Lenient: the orphan's subtree goes with it, the rest stays.
    write_lines(path, HEADER, message("a", None), message("b", "ghost"), message("c", "b"), message("d", "a"))
    with reopen(path, strict=False) as lenient:
        assert [e.id for e in lenient.get_entries()] == ["a", "d"] and len(lenient.warnings) == 2


def test_invalid_body_is_reported_with_its_line_when_read(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    bad = message("b", "a")
    bad["message"] = {"role": "user", "content": "", "timestamp": 1}  # empty user text breaks SPEC-8.1
    write_lines(path, HEADER, message("a", None), bad)
    with reopen(path) as storage:  # opening only checks what the index needs...
        assert storage.get_entry("a") is not None
        with pytest.raises(InvalidEntryError) as info:  # ...the body is checked when it is read
            storage.build_context()
        assert info.value.line_number == 3
        with pytest.raises(InvalidEntryError):
            storage.validate()
    with pytest.raises(InvalidEntryError):
        reopen(path, lazy=False)


def test_errors_keep_their_codes_through_from_code() -> None:
    error = AgentError.from_code("SESSION_LOCKED", "busy")
    assert type(error).__name__ == "SessionLockedError"


def _user(text: str) -> MessageEntry:
    from agentcore.messages import UserMessage

    return MessageEntry(message=UserMessage(content=text, timestamp=1))


def test_release_keeps_the_index_and_reacquire_reads_what_others_appended(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    kept = JsonlSessionStorage.create(path, cwd="/")
    first = kept.append_entry(_user("one"))
    kept.release()
    with pytest.raises(SessionClosedError):
        kept.append_entry(_user("refused while released"))
    # Another writer may take the lock meanwhile.
    with JsonlSessionStorage.open(path, writer=True) as other:
        second = other.append_entry(_user("two"))
    assert kept.reacquire()
    assert kept.get_leaf_id() == second.id
    third = kept.append_entry(_user("three"))
    assert third.parent_id == second.id
    kept.close()
    with JsonlSessionStorage.open(path) as reader:
        assert [e.id for e in reader.get_entries()] == [first.id, second.id, third.id]


def test_reacquire_refuses_a_replaced_file_and_a_held_lock(tmp_path: Path) -> None:
    from agentcore.errors import SessionLockedError

    path = tmp_path / "s.jsonl"
    kept = JsonlSessionStorage.create(path, cwd="/")
    kept.release()
    holder = JsonlSessionStorage.open(path, writer=True)
    with pytest.raises(SessionLockedError):
        kept.reacquire()
    holder.close()
    path.unlink()
    JsonlSessionStorage.create(path, cwd="/").close()
    assert kept.reacquire() is False
    kept.close()


def test_unsynced_appends_ride_on_the_next_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    synced: list[int] = []
    real = os.fdatasync

    def counting(fd: int) -> None:
        synced.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", counting)
    storage = JsonlSessionStorage.create(tmp_path / "s.jsonl", cwd="/")
    storage.append_entries([_user("held")], sync=False)
    storage.release()  # a release syncs only what the policy left pending, not what the caller holds
    assert synced == []
    assert storage.reacquire()
    storage.append_entry(_user("synced"))
    assert len(synced) == 1  # one fsync made both appends durable
    storage.append_entries([_user("held again")], sync=False)
    storage.sync()
    assert len(synced) == 2
    storage.sync()  # nothing pending
    assert len(synced) == 2
    storage.close()
    with JsonlSessionStorage.open(tmp_path / "s.jsonl") as reader:
        assert [m.text for m in reader.build_context().messages] == ["held", "synced", "held again"]


@pytest.mark.parametrize("writer", [False, True])
def test_a_directory_is_not_a_session_file(tmp_path: Path, writer: bool) -> None:
    directory = tmp_path / "s.jsonl"
    directory.mkdir()
    with pytest.raises(NotASessionError, match="is a directory"):
        JsonlSessionStorage.open(directory, writer=writer)


def test_a_copy_under_another_id_names_it_in_its_header(tmp_path: Path) -> None:
    from agentcore.session import copy_session

    source = tmp_path / "a.jsonl"
    with JsonlSessionStorage.create(source, "/work", {"k": 1}, session_id="a") as storage:
        storage.append_entry(_user("hi"))
    copy_session(source, tmp_path / "b.jsonl", "b")
    with JsonlSessionStorage.open(tmp_path / "b.jsonl") as copy, JsonlSessionStorage.open(source) as original:
        assert copy.get_metadata().id == "b"
        assert copy.get_metadata().model_dump(exclude={"id", "path"}) == original.get_metadata().model_dump(
            exclude={"id", "path"}
        )
        assert copy.get_entries() == original.get_entries()
    with pytest.raises(FileExistsError):
        copy_session(source, tmp_path / "b.jsonl", "b")
    (tmp_path / "junk.jsonl").write_bytes(b"not a header\n")
    with pytest.raises(NotASessionError):
        copy_session(tmp_path / "junk.jsonl", tmp_path / "c.jsonl", "c")
    assert not (tmp_path / "c.jsonl").exists()
