"""Branches and forks: moving a conversation back to an earlier entry, or copying it into a new session.

- ``branch(storage, target_id, summary)``: within one session, move the leaf back to ``target_id``
  (a ``leaf`` entry) and, with a summary of the abandoned branch, hang a ``branch_summary`` from the
  target so the model keeps what was learned there. Nothing is deleted; the old branch stays in the tree.
- ``fork_session(source, from_entry_id, target)``: a new session file whose context at its leaf is the
  source's context at ``from_entry_id``. Entries keep their ids (a compaction's ``first_kept_entry_id``
  still resolves), and the header's metadata names the parent session and the entry forked from.
- ``abandoned_messages``: the messages of the branch a move would leave (its summary request, which
  calls a model, is ``agentcore.compaction``'s: sessions never call one).

``branch_entries`` builds the entries without writing them, for a workflow that makes its own ids.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

from ..errors import EntryNotFoundError, NotASessionError
from ..messages import Message, Usage
from .context import branch_summary_message, compaction_summary_message
from .entries import (
    BranchSummaryEntry,
    CompactionEntry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    SessionEntry,
)
from .paths import SessionPaths, StrPath
from .ratelimit import StorageRateLimits
from .storage import FSYNC_ALWAYS, FsyncPolicy, GetEntriesOptions, JsonlSessionStorage

PARENT_SESSION_METADATA_KEY = "parent_session"
FORKED_FROM_METADATA_KEY = "forked_from"
# ``branch_summary.from_id`` when the abandoned position was before the first entry (pi's "root").
ROOT_ID = "root"


def _require_position(storage: JsonlSessionStorage, entry_id: str | None) -> None:
    """A position to move to must exist and be a real entry (a ``leaf`` entry is a move, not a place)."""
    if entry_id is None:
        return
    entry = storage.get_entry(entry_id)
    if entry is None:
        raise EntryNotFoundError(f"no entry {entry_id!r} in {str(storage.path)!r}")
    if isinstance(entry, LeafEntry):
        raise EntryNotFoundError(f"entry {entry_id!r} is a leaf move, not a position in the conversation")


# --------------------------------------------------------------------------------------------- fork


def session_copy_bytes(source_path: StrPath, session_id: str) -> bytes:
    """The bytes of the session file ``source_path`` as the session ``session_id``: every entry line
    as it is, under a header that names ``session_id`` (recovering a file under another id)."""
    data = Path(source_path).read_bytes()
    head, newline, rest = data.partition(b"\n")
    try:
        header = orjson.loads(head.removeprefix(b"\xef\xbb\xbf"))
    except orjson.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or header.get("type") != "session":
        raise NotASessionError(f"{str(source_path)!r} does not start with a session header")
    if header.get("id") == session_id:
        return data
    return orjson.dumps({**header, "id": session_id}) + newline + rest


def copy_session(source_path: StrPath, target_path: StrPath, session_id: str) -> None:
    """Write the session file ``source_path`` to ``target_path`` as the session ``session_id``
    (``session_copy_bytes``), synced before it appears; ``FileExistsError`` if the target exists."""
    data = session_copy_bytes(source_path, session_id)
    target = Path(target_path)
    partial = target.with_name(f".{target.name}.{os.getpid()}.copy")
    try:
        with open(partial, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.link(partial, target)  # never over a file that is there
    finally:
        partial.unlink(missing_ok=True)


def fork_session(
    source_path: StrPath,
    from_entry_id: str,
    target_path: StrPath,
    *,
    session_id: str | None = None,
    root: StrPath | SessionPaths | None = None,
    metadata: dict[str, Any] | None = None,
    fsync: FsyncPolicy = FSYNC_ALWAYS,
    timestamp: int | None = None,
) -> JsonlSessionStorage:
    """Create ``target_path`` holding the path root -> ``from_entry_id`` of ``source_path``; return
    its writer (leaf: ``from_entry_id``).

    Copies keep their ids, timestamps and content, so ``build_context()`` on the fork equals
    ``build_context(from_entry_id)`` on the source. Labels on the path whose target is not on it (they
    bookmark another branch) are left out; the next copied entry then hangs from the one before, which
    changes no context. The header copies the source's ``cwd`` and metadata (its system prompt among
    them) and adds ``parent_session`` ``{"id", "path"}`` and ``forked_from``; ``metadata`` adds more.
    """
    with JsonlSessionStorage.open(
        source_path, root=root, rate_limits=StorageRateLimits.unlimited()
    ) as source:
        _require_position(source, from_entry_id)
        source_meta = source.get_metadata()
        path = source.get_entries(GetEntriesOptions(path_to=from_entry_id))
    copied_ids = {entry.id for entry in path}
    copies: list[SessionEntry] = []
    parent: str | None = None
    for entry in path:
        if isinstance(entry, LabelEntry) and entry.target_id not in copied_ids:
            continue
        copies.append(entry.model_copy(update={"parent_id": parent}))
        parent = entry.id
    header_metadata = {
        **source_meta.metadata,
        PARENT_SESSION_METADATA_KEY: {"id": source_meta.id, "path": str(Path(source_meta.path))},
        FORKED_FROM_METADATA_KEY: from_entry_id,
        **(metadata or {}),
    }
    fork = JsonlSessionStorage.create(
        target_path,
        source_meta.cwd,
        header_metadata,
        session_id=session_id,
        root=root,
        fsync=fsync,
        timestamp=timestamp,
    )
    try:
        if copies:
            fork.append_entries(copies)
    except BaseException:
        fork.close()
        raise
    return fork


# ------------------------------------------------------------------------------------------- branch


def branch_entries(
    old_leaf_id: str | None,
    target_entry_id: str | None,
    summary: str | None = None,
    *,
    summary_usage: Usage | None = None,
    details: Any = None,
    new_id: Callable[[], str] | None = None,
    timestamp: int = 0,
) -> list[SessionEntry]:
    """The entries that move the leaf from ``old_leaf_id`` back to ``target_entry_id``: a ``leaf``
    entry, then (with a summary) a ``branch_summary`` hanging from the target, which becomes the new
    leaf. Ids come from ``new_id`` when given (a workflow's ``uuid4``), else ``append`` fills them."""

    def make_id() -> str:
        return new_id() if new_id is not None else ""

    entries: list[SessionEntry] = [
        LeafEntry(id=make_id(), parent_id=old_leaf_id, timestamp=timestamp, target_id=target_entry_id)
    ]
    if summary:
        entries.append(
            BranchSummaryEntry(
                id=make_id(),
                parent_id=target_entry_id,
                timestamp=timestamp,
                from_id=old_leaf_id or ROOT_ID,
                summary=summary,
                usage=summary_usage,
                details=details,
            )
        )
    return entries


def branch(
    storage: JsonlSessionStorage,
    target_entry_id: str | None,
    summary: str | None = None,
    *,
    summary_usage: Usage | None = None,
    details: Any = None,
    new_id: Callable[[], str] | None = None,
    timestamp: int = 0,
) -> list[SessionEntry]:
    """Move ``storage``'s leaf back to ``target_entry_id`` (None: before the first entry) and, with
    ``summary``, record what the abandoned branch learned; return the appended entries."""
    _require_position(storage, target_entry_id)
    entries = branch_entries(
        storage.get_leaf_id(),
        target_entry_id,
        summary,
        summary_usage=summary_usage,
        details=details,
        new_id=new_id,
        timestamp=timestamp,
    )
    return storage.append_entries(entries)


def _common_ancestor_index(old_path: Sequence[str], new_path: Sequence[str]) -> int:
    """Index in ``old_path`` of the last entry both paths share (-1: none)."""
    shared = -1
    for index, (old, new) in enumerate(zip(old_path, new_path, strict=False)):
        if old != new:
            break
        shared = index
    return shared


def abandoned_messages(
    storage: JsonlSessionStorage, target_entry_id: str | None, *, from_leaf_id: str | None = None
) -> list[Message]:
    """What the model saw on the branch being left: the messages after the common ancestor of
    ``from_leaf_id`` (default: the leaf) and ``target_entry_id``, with compactions and branch
    summaries on it turned into their summary messages."""
    old_leaf = from_leaf_id if from_leaf_id is not None else storage.get_leaf_id()
    if old_leaf is None:
        return []
    old_path = storage.get_entries(GetEntriesOptions(path_to=old_leaf))
    new_ids = (
        [entry.id for entry in storage.get_entries(GetEntriesOptions(path_to=target_entry_id))]
        if target_entry_id is not None
        else []
    )
    shared = _common_ancestor_index([entry.id for entry in old_path], new_ids)
    messages: list[Message] = []
    for entry in old_path[shared + 1 :]:
        if isinstance(entry, MessageEntry):
            messages.append(entry.message)
        elif isinstance(entry, BranchSummaryEntry):
            messages.append(branch_summary_message(entry.summary, entry.timestamp))
        elif isinstance(entry, CompactionEntry):
            messages.append(compaction_summary_message(entry.summary, entry.timestamp))
    return messages
