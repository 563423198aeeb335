"""``SessionIndex``: the in-memory index of a session file's entries (id -> raw dict, file order,
parents, leaf, labels, stats), the tree walks over it and the lazy validation of entries.

Entries are indexed from their raw dicts; pydantic validates one only when it is first asked for
(``_entry``). Everything the index needs (type, id, parent, leaf and label targets) is checked as a
line is indexed.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pydantic

from ...errors import (
    EntryNotFoundError,
    InvalidEntryError,
    InvalidParentError,
    SessionClosedError,
    SessionCorruptError,
    SessionEncodingError,
    UnknownEntryTypeError,
)
from ...messages import describe_validation_error
from ..context import SessionContext, build_context, extend_context
from ..entries import ENTRY_ADAPTER, ENTRY_TYPES, SYSTEM_PROMPT_METADATA_KEY, SessionEntry, SessionHeader
from ..lines import ParsedLine
from ..stats import StatsAccumulator


@contextmanager
def gc_paused() -> Iterator[None]:
    # Bulk parsing allocates hundreds of thousands of small dicts; the cyclic GC would rescan them
    # all repeatedly (measured: 1.2 s vs 0.18 s for 100k entries). None of them form cycles.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class SessionIndex:
    """The entries of one session file as indexed so far; ``JsonlSessionStorage`` builds on it."""

    def __init__(self, path: Path, *, strict: bool) -> None:
        self.path = path
        self.strict = strict
        self.warnings: list[str] = []  # lines skipped with strict=False, and torn writes found
        self._lock = threading.RLock()
        self._header: SessionHeader | None = None
        self._order: list[str] = []
        self._raw: dict[str, dict[str, Any]] = {}  # not validated yet
        self._entries: dict[str, SessionEntry] = {}  # validated
        self._types: dict[str, str] = {}
        self._parents: dict[str, str | None] = {}
        self._line_of: dict[str, int] = {}
        self._labels: dict[str, str] = {}
        self._leaf_id: str | None = None
        self._context_memo: SessionContext | None = None  # see ``_file_context``
        self._name: str | None = None
        self._stats = StatsAccumulator()

    def _index_line(self, line: ParsedLine) -> None:
        try:
            if line.error is not None:
                error_type = SessionEncodingError if line.bad_encoding else SessionCorruptError
                raise error_type(line.error, line_number=line.line_number)
            self._index_raw(line.value, line.line_number)
        except SessionCorruptError as exc:
            if self.strict:
                raise
            self.warnings.append(f"skipped {exc}")

    def _index_raw(self, raw: Any, line_number: int | None) -> None:
        if not isinstance(raw, dict):
            raise SessionCorruptError("an entry must be a JSON object", line_number=line_number)
        kind = raw.get("type")
        # isinstance first: a list or object here is unhashable, and ``in`` would raise TypeError.
        if not isinstance(kind, str) or kind not in ENTRY_TYPES:
            raise UnknownEntryTypeError(f"unknown entry type {kind!r}", line_number=line_number)
        entry_id = raw.get("id")
        if not isinstance(entry_id, str) or not entry_id:
            raise InvalidEntryError("an entry needs a non-empty string id", line_number=line_number)
        if entry_id in self._types:
            raise SessionCorruptError(f"duplicate entry id {entry_id!r}", line_number=line_number)
        parent_id = raw.get("parent_id")
        if parent_id is not None and (not isinstance(parent_id, str) or parent_id not in self._types):
            raise InvalidParentError(
                f"entry {entry_id!r} has unknown parent {parent_id!r}", line_number=line_number
            )
        target_id = raw.get("target_id")
        if (
            kind in ("leaf", "label")
            and target_id is not None
            and (not isinstance(target_id, str) or target_id not in self._types)
        ):
            raise InvalidParentError(
                f"{kind} entry {entry_id!r} targets unknown entry {target_id!r}", line_number=line_number
            )
        self._order.append(entry_id)
        self._raw[entry_id] = raw
        self._types[entry_id] = kind
        self._parents[entry_id] = parent_id
        if line_number is not None:
            self._line_of[entry_id] = line_number
        if kind == "leaf":
            self._leaf_id = target_id
        else:
            self._leaf_id = entry_id
        if kind == "label" and isinstance(target_id, str):
            label = raw.get("label")
            if label:
                self._labels[target_id] = str(label)
            else:
                self._labels.pop(target_id, None)
        elif kind == "session_info" and isinstance(raw.get("name"), str):
            self._name = raw["name"]
        self._stats.add(raw)

    def _entry(self, entry_id: str) -> SessionEntry:
        entry = self._entries.get(entry_id)
        if entry is not None:
            return entry
        raw = self._raw[entry_id]
        try:
            entry = ENTRY_ADAPTER.validate_python(raw)
        except pydantic.ValidationError as exc:
            raise InvalidEntryError(
                f"entry {entry_id!r} is invalid: {describe_validation_error(exc)}",
                line_number=self._line_of.get(entry_id),
            ) from None
        self._entries[entry_id] = entry
        self._raw.pop(entry_id, None)  # validated once; the model is all we keep
        return entry

    def _validate_all(self) -> None:
        with self._lock, gc_paused():
            for entry_id in self._order:
                self._entry(entry_id)

    def validate(self) -> None:
        """Validate every entry now (``open`` only checks what the index needs)."""
        self._validate_all()

    def _file_context(self, entry_id: str | None) -> SessionContext:
        """The context at ``entry_id`` of the file (kept: don't change it). The one built last is kept:
        a conversation's next call mostly asks for an entry a few messages below it, and then only
        those are read (entries never change once in the file, so neither does a context)."""
        if entry_id is not None and entry_id not in self._types:
            raise EntryNotFoundError(f"no entry {entry_id!r} in {str(self.path)!r}")
        memo = self._context_memo
        stop = memo.leaf_id if memo is not None else None
        below: list[str] = []  # from entry_id up to the kept context's entry, or to the root
        current = entry_id
        while current is not None and current != stop:
            below.append(current)
            current = self._parents[current]
        below.reverse()
        context = None
        if memo is not None and current is not None:  # the kept context's entry is on the path
            context = extend_context(memo, below, self._types.__getitem__, self._entry)
        if context is None:
            path = below if current is None else self._path_ids(entry_id)
            context = build_context(
                path, self._types.__getitem__, self._entry, system_prompt=self._system_prompt()
            )
        self._context_memo = context
        return context

    def _system_prompt(self) -> str | None:
        system_prompt = self._require_header().metadata.get(SYSTEM_PROMPT_METADATA_KEY)
        return system_prompt if isinstance(system_prompt, str) else None

    def _path_ids(self, entry_id: str | None) -> list[str]:
        """Ids from the root to ``entry_id``. Parents always precede children in the file, so this
        walk terminates."""
        if entry_id is None:
            return []
        if entry_id not in self._types:
            raise EntryNotFoundError(f"no entry {entry_id!r} in {str(self.path)!r}")
        path: list[str] = []
        current: str | None = entry_id
        while current is not None:
            path.append(current)
            current = self._parents[current]
        path.reverse()
        return path

    def _require_header(self) -> SessionHeader:
        if self._header is None:  # pragma: no cover - create/open always set it
            raise SessionClosedError("session has no header")
        return self._header
