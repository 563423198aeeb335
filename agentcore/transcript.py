"""The durable conversation's transcript bookkeeping: messages in memory, entries for the session file.

Pure and deterministic (ids and time are injected), so the workflow can own it: every message or
setting change becomes a session entry with an id from ``workflow.uuid4()``, chained by ``parent_id``.
Entries stay *unwritten* until an activity confirms it appended them; appends are idempotent on the
id, so sending an entry twice (a retried or re-sent batch) is harmless and a lost batch is re-sent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from .messages import AssistantMessage, Message
from .session.entries import (
    BranchSummaryEntry,
    CompactionEntry,
    EntryBase,
    LeafEntry,
    MessageEntry,
    SessionEntry,
)
from .session.stats import SessionStats, StatsAccumulator


class Transcript:
    def __init__(
        self,
        *,
        new_id: Callable[[], str],
        now_ms: Callable[[], int],
        messages: list[Message] | None = None,
        first_message_index: int = 0,
        leaf_id: str | None = None,
        unwritten: list[SessionEntry] | None = None,
        entry_ids: list[str | None] | None = None,
        task: Callable[[], int] | None = None,
    ) -> None:
        self._new_id = new_id
        self._now_ms = now_ms
        # Which workflow task is running (a number that grows from one task to the next), and the
        # one each unwritten entry was made in: see ``split_committed``.
        self._task = task
        self._made_in: dict[str, int] = {}
        self.messages: list[Message] = list(messages or [])
        # Index of ``messages[0]`` in the whole conversation (older ones were not carried over).
        self.first_message_index = first_message_index
        self.leaf_id = leaf_id
        self.unwritten: list[SessionEntry] = list(unwritten or [])
        # The session entry of each message (None for a synthetic one, e.g. a compaction summary):
        # what a client names to fork, branch or label at a message.
        self.entry_ids: list[str | None] = (
            list(entry_ids)
            if entry_ids is not None and len(entry_ids) == len(self.messages)
            else [None] * len(self.messages)
        )

    @property
    def message_count(self) -> int:
        return self.first_message_index + len(self.messages)

    @property
    def last_message(self) -> Message | None:
        return self.messages[-1] if self.messages else None

    def new_entry_id(self) -> str:
        return self._new_id()

    def add(self, entry: SessionEntry) -> SessionEntry:
        """Chain a workflow-made entry after the leaf and queue it for writing."""
        entry.id = entry.id or self._new_id()
        entry.timestamp = entry.timestamp or self._now_ms()
        entry.parent_id = self.leaf_id
        self.unwritten.append(entry)
        if self._task is not None:
            self._made_in[entry.id] = self._task()
        if not isinstance(entry, LeafEntry):
            self.leaf_id = entry.id
        return entry

    def add_message(self, message: Message, *, written_as: str | None = None, entry_id: str = "") -> None:
        """Append a message; ``written_as`` is the entry id an activity already wrote it under, else
        it is queued for writing (as ``entry_id`` if given)."""
        self.messages.append(message)
        if written_as is not None:
            self.leaf_id = written_as
        else:
            self.add(MessageEntry(id=entry_id, message=message))
        self.entry_ids.append(self.leaf_id)

    def split_committed(self) -> tuple[list[SessionEntry], list[SessionEntry]]:
        """The unwritten entries made in earlier workflow tasks, and those made in the running one.

        An earlier task's entries are in the workflow's history: any replay makes them the same. The
        running task's are not yet; if it is lost (its worker dies), the next attempt makes them
        again, maybe different (a timestamp, a tool's result), so they must not be written from
        inside it (by a local activity). Entries carried over from another run count as earlier.
        """
        if self._task is None:
            return list(self.unwritten), []
        current = self._task()
        committed = [e for e in self.unwritten if self._made_in.get(e.id, -1) < current]
        return committed, [e for e in self.unwritten if self._made_in.get(e.id, -1) >= current]

    def reset(self) -> None:
        self.replace_messages([], [])
        self.add(LeafEntry(target_id=None))
        self.leaf_id = None

    def replace_messages(self, messages: list[Message], entry_ids: list[str | None]) -> None:
        """A new context (after reset, compaction or a branch): the conversation goes on from it."""
        self.messages = list(messages)
        self.entry_ids = list(entry_ids)
        self.first_message_index = 0

    def mark_written(self, entries: list[SessionEntry]) -> None:
        written = {entry.id for entry in entries}
        self.unwritten = [entry for entry in self.unwritten if entry.id not in written]
        for entry_id in written:
            self._made_in.pop(entry_id, None)

    def carry_tail(
        self, max_bytes: int, size_of: Callable[[Message], int]
    ) -> tuple[list[Message], list[str | None], int]:
        """The newest messages that fit in ``max_bytes``, their entry ids, and the first one's index."""
        kept = newest_within(self.messages, max_bytes, size_of)
        return kept, self.entry_ids[len(self.messages) - len(kept) :], self.message_count - len(kept)


T = TypeVar("T")


def newest_within(messages: Sequence[T], max_bytes: int, size_of: Callable[[T], int]) -> list[T]:
    """The longest suffix of ``messages`` whose sizes add up to at most ``max_bytes``."""
    kept: list[T] = []
    total = 0
    for message in reversed(messages):
        total += size_of(message)
        if total > max_bytes:
            break
        kept.append(message)
    kept.reverse()
    return kept


__all__ = ["EntryBase", "Transcript", "add_message_to_stats", "newest_within"]


def add_entry_usage_to_stats(
    stats: SessionStats, entry: CompactionEntry | BranchSummaryEntry
) -> SessionStats:
    """``stats`` plus the model usage of a compaction or branch summary (it was a model call too)."""
    return _accumulate(
        stats, {"type": entry.type, "usage": entry.usage.model_dump(mode="json") if entry.usage else None}
    )


def _accumulate(stats: SessionStats, raw_entry: dict[str, Any]) -> SessionStats:
    accumulator = StatsAccumulator()
    for key in accumulator.totals:
        accumulator.totals[key] = getattr(stats, key)
    accumulator.cost_total = stats.cost_total
    accumulator.add(raw_entry)
    return accumulator.snapshot()


def add_message_to_stats(stats: SessionStats, message: Message) -> SessionStats:
    """``stats`` plus one message: the workflow's running totals, counted as the session file counts."""
    view: dict[str, Any] = {"role": message.role}
    usage = getattr(message, "usage", None)
    if usage is not None:
        view["usage"] = usage.model_dump(mode="json")
    if isinstance(message, AssistantMessage):
        view["content"] = [{"type": block.type} for block in message.content]
    return _accumulate(stats, {"type": "message", "message": view})
