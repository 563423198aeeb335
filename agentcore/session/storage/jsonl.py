"""``JsonlSessionStorage``: creating and opening a session file, the SPEC-4.2 queries and the append
path; ``migrate_file``."""

from __future__ import annotations

import fcntl
import os
import stat
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
import pydantic

from ...errors import (
    EntryNotFoundError,
    InvalidEntryError,
    InvalidParentError,
    NotASessionError,
    SessionExistsError,
    SessionNotFoundError,
    SessionVersionError,
    UnknownEntryTypeError,
)
from ...messages import describe_validation_error
from ..context import SessionContext, build_context, extend_context, own_copy
from ..entries import (
    ENTRY_ADAPTER,
    ENTRY_TYPES,
    FORMAT_VERSION,
    EntryBase,
    EntryType,
    LeafEntry,
    SessionEntry,
    SessionHeader,
)
from ..lines import TORN_MARKER
from ..paths import SESSION_ID_RE, SessionPaths, StrPath
from ..ratelimit import StorageRateLimits
from ..stats import SessionStats
from .file import SessionFile, fsync_directory, lock_writer, write_all
from .index import gc_paused
from .options import FSYNC_ALWAYS, FsyncPolicy, GetEntriesOptions, SessionMetadata, SessionOptions


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class JsonlSessionStorage(SessionFile):
    """A session file. Build one with ``create`` or ``open``; use it as a context manager."""

    # ------------------------------------------------------------------------------- construction

    @classmethod
    def create(
        cls,
        path: StrPath,
        cwd: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        *,
        session_id: str | None = None,
        root: StrPath | SessionPaths | None = None,
        fsync: FsyncPolicy = FSYNC_ALWAYS,
        rate_limits: StorageRateLimits | None = None,
        timestamp: int | None = None,
    ) -> JsonlSessionStorage:
        """Write a new session file (refusing an existing one) and return its writer.

        ``session_id`` defaults to the file name without ``.jsonl`` when that is a valid id, else a
        uuid4 hex. The header is written to a temporary file, fsynced and locked, then hard-linked
        into place: a crash never leaves a half-written header, and no other writer can slip in.
        """
        target = _confine(path, root)
        if session_id is None:
            session_id = target.stem if SESSION_ID_RE.match(target.stem) else uuid.uuid4().hex
        header = SessionHeader(
            id=session_id,
            cwd=cwd if cwd is not None else os.getcwd(),
            timestamp=timestamp or _now_ms(),
            metadata=dict(metadata or {}),
        )
        header_line = orjson.dumps(header.model_dump(mode="json")) + b"\n"
        if target.exists() or target.is_symlink():
            raise SessionExistsError(f"session file {str(target)!r} already exists")
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
        fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            write_all(fd, header_line)
            os.fsync(fd)
            try:
                os.link(temporary, target)
            except FileExistsError:
                raise SessionExistsError(f"session file {str(target)!r} already exists") from None
            fsync_directory(target.parent)
        except BaseException:
            os.close(fd)
            raise
        finally:
            temporary.unlink(missing_ok=True)
        storage = cls(target, fd, writer=True, strict=True, fsync=fsync, rate_limits=rate_limits)
        storage._header = header
        storage._consumed = len(header_line)
        storage._line_count = 1
        return storage

    @classmethod
    def open(
        cls,
        path: StrPath,
        *,
        writer: bool = False,
        strict: bool = True,
        lazy: bool = True,
        root: StrPath | SessionPaths | None = None,
        fsync: FsyncPolicy = FSYNC_ALWAYS,
        rate_limits: StorageRateLimits | None = None,
    ) -> JsonlSessionStorage:
        """Open an existing session file. ``writer=True`` takes the file's lock (``SessionLockedError``
        if another writer has it, in this process or another)."""
        target = _confine(path, root)
        flags = (os.O_RDWR | os.O_APPEND) if writer else os.O_RDONLY
        if root is not None:
            flags |= os.O_NOFOLLOW  # closes the race between the symlink check and the open
        try:
            fd = os.open(target, flags)
        except FileNotFoundError:
            raise SessionNotFoundError(f"no session file at {str(target)!r}") from None
        except IsADirectoryError:  # opened for writing
            raise NotASessionError(f"{str(target)!r} is a directory, not a session file") from None
        if stat.S_ISDIR(os.fstat(fd).st_mode):  # opened for reading: that succeeds on a directory
            os.close(fd)
            raise NotASessionError(f"{str(target)!r} is a directory, not a session file")
        try:
            if writer:
                lock_writer(fd, target)
            storage = cls(target, fd, writer=writer, strict=strict, fsync=fsync, rate_limits=rate_limits)
            storage._load()
            if writer and storage._version < FORMAT_VERSION:
                raise SessionVersionError(
                    f"{str(target)!r} is in session format {storage._version}; "
                    f"write to an upgraded copy (migrate_file) instead"
                )
            if not lazy:
                storage._validate_all()
        except BaseException:
            os.close(fd)
            raise
        return storage

    @classmethod
    def from_options(cls, options: SessionOptions, **kwargs: Any) -> JsonlSessionStorage:
        """Open ``options.path`` for writing, creating it (with ``cwd`` and ``metadata``) if missing."""
        if Path(options.path).exists():
            return cls.open(options.path, writer=True, **kwargs)
        return cls.create(options.path, options.cwd, options.metadata, **kwargs)

    # ------------------------------------------------------------------------- SPEC-4.2 queries

    def get_metadata(self) -> SessionMetadata:
        self._limit_read()
        header = self._require_header()
        return SessionMetadata(
            id=header.id,
            path=str(self.path),
            cwd=header.cwd,
            timestamp=header.timestamp,
            version=self._version,
            metadata=dict(header.metadata),
            name=self._name,
        )

    def get_leaf_id(self) -> str | None:
        self._limit_read()
        return self._leaf_id

    def get_entry(self, entry_id: str) -> SessionEntry | None:
        self._limit_read()
        with self._lock:
            return self._entry(entry_id) if entry_id in self._types else None

    def get_label(self, entry_id: str) -> str | None:
        self._limit_read()
        return self._labels.get(entry_id)

    def find_entries(self, type: EntryType) -> list[SessionEntry]:
        """Every entry of ``type``, in file order."""
        self._limit_read()
        with self._lock:
            return [self._entry(entry_id) for entry_id in self._order if self._types[entry_id] == type]

    def get_entries(self, options: GetEntriesOptions | None = None) -> list[SessionEntry]:
        self._limit_read()
        options = options or GetEntriesOptions()
        with self._lock:
            if options.path_to is not None:
                ids: Sequence[str] = self._path_ids(options.path_to)
            elif options.on_path:
                ids = self._path_ids(self._leaf_id)
            else:
                ids = self._order
            if options.after_id is not None:
                try:
                    ids = ids[ids.index(options.after_id) + 1 :]
                except ValueError:
                    raise EntryNotFoundError(
                        f"after_id {options.after_id!r} is not among the entries queried"
                    ) from None
            if options.type is not None:
                wanted = {options.type} if isinstance(options.type, str) else set(options.type)
                ids = [entry_id for entry_id in ids if self._types[entry_id] in wanted]
            if options.limit is not None:
                ids = ids[: options.limit]
            return [self._entry(entry_id) for entry_id in ids]

    def get_session_stats(self) -> SessionStats:
        self._limit_read()
        with self._lock:
            return self._stats.snapshot()

    def build_context(
        self, leaf_id: str | None = None, *, pending: Sequence[SessionEntry] = ()
    ) -> SessionContext:
        """Messages, model, thinking level, active tools and system prompt at ``leaf_id`` (default:
        the current leaf). See ``context.build_context`` for the rules.

        ``pending``: entries not in the file (not to be written yet) that the path may run through,
        as if appended; ``leaf_id`` may name one of them.
        """
        self._limit_read()
        overlay = {entry.id: entry for entry in pending}
        with self._lock, gc_paused():
            current = leaf_id if leaf_id is not None else self._leaf_id
            ahead: list[str] = []
            while current is not None and current in overlay:
                ahead.append(current)
                current = overlay[current].parent_id
            ahead.reverse()
            in_file = self._file_context(current)
            if ahead:
                extended = extend_context(
                    in_file, ahead, lambda entry_id: overlay[entry_id].type, overlay.__getitem__
                )
                if extended is not None:
                    return extended
                return build_context(
                    self._path_ids(current) + ahead,
                    lambda entry_id: overlay[entry_id].type if entry_id in overlay else self._types[entry_id],
                    lambda entry_id: overlay[entry_id] if entry_id in overlay else self._entry(entry_id),
                    system_prompt=self._system_prompt(),
                )
            return own_copy(in_file)

    # ------------------------------------------------------------------------------------ writing

    def append_entry(self, entry: SessionEntry | Mapping[str, Any]) -> SessionEntry:
        """Append one entry; see ``append_entries``."""
        return self.append_entries([entry])[0]

    def append_entries(
        self, entries: Iterable[SessionEntry | Mapping[str, Any]], *, sync: bool = True
    ) -> list[SessionEntry]:
        """Append entries in one write (and at most one fsync); return them as stored.

        A missing ``id`` becomes a uuid4 hex, a missing ``timestamp`` the wall clock, a missing
        ``parent_id`` the current leaf (for the first entry of the batch; each next one hangs from the
        one before). An entry whose id is already in the file is not written again: the stored one is
        returned, so a retried activity is harmless. The batch counts as one write for rate limiting.

        ``sync=False`` leaves the fsync to the next synced append or ``sync()`` (one fsync covers
        every byte written before it): for a caller that keeps its own copy until then.
        """
        batch = [_coerce(entry) for entry in entries]
        self._limit_write()
        with self._lock:
            fd = self._require_writable()
            results: list[SessionEntry] = []
            staged: dict[str, tuple[SessionEntry, dict[str, Any]]] = {}
            leaf = self._leaf_id
            for entry in batch:
                if entry.id and (entry.id in self._types or entry.id in staged):
                    results.append(staged[entry.id][0] if entry.id in staged else self._entry(entry.id))
                    continue
                entry = entry.model_copy(
                    update={
                        "id": entry.id or uuid.uuid4().hex,
                        "timestamp": entry.timestamp or _now_ms(),
                        "parent_id": entry.parent_id if entry.parent_id is not None else leaf,
                    }
                )
                self._check_references(entry, staged)
                staged[entry.id] = (entry, entry.model_dump(mode="json"))
                results.append(entry)
                leaf = entry.target_id if isinstance(entry, LeafEntry) else entry.id
            if not staged:
                return results
            prefix = {"clean": b"", "unterminated": b"\n", "torn": TORN_MARKER + b"\n"}[self._tail]
            payload = prefix + b"".join(orjson.dumps(raw) + b"\n" for _, raw in staged.values())
            try:
                write_all(fd, payload)
            except OSError:
                # Part of the payload may be on disk: index whatever complete lines made it, so a
                # retry does not write them twice, and note a torn tail for the next append.
                self._read_new()
                raise
            if sync:
                self._after_write()
            else:
                self._deferred += 1
            line_number = self._line_count + (1 if self._tail == "torn" else 0)
            for entry, raw in staged.values():
                line_number += 1
                self._index_raw(raw, line_number)
                self._entries[entry.id] = entry
                self._raw.pop(entry.id, None)
            self._line_count = line_number
            self._consumed += len(payload)
            self._tail = "clean"
            return results

    def _check_references(self, entry: SessionEntry, staged: Mapping[str, object]) -> None:
        def known(entry_id: str) -> bool:
            return entry_id in self._types or entry_id in staged

        if entry.parent_id is not None and not known(entry.parent_id):
            raise InvalidParentError(f"entry {entry.id!r}: parent {entry.parent_id!r} does not exist")
        target_id = getattr(entry, "target_id", None)
        if target_id is not None and not known(target_id):
            raise InvalidParentError(f"{entry.type} entry {entry.id!r}: target {target_id!r} does not exist")


def _coerce(entry: SessionEntry | Mapping[str, Any]) -> SessionEntry:
    if isinstance(entry, EntryBase):
        return entry
    if not isinstance(entry, Mapping):
        raise InvalidEntryError(f"expected a session entry or a dict, got {type(entry).__name__}")
    kind = entry.get("type")
    if kind not in ENTRY_TYPES:
        raise UnknownEntryTypeError(f"unknown entry type {kind!r}; expected one of {sorted(ENTRY_TYPES)}")
    try:
        return ENTRY_ADAPTER.validate_python(dict(entry))
    except pydantic.ValidationError as exc:
        raise InvalidEntryError(f"invalid {kind} entry: {describe_validation_error(exc)}") from None


def _confine(path: StrPath, root: StrPath | SessionPaths | None) -> Path:
    if root is None:
        return Path(path)
    paths = root if isinstance(root, SessionPaths) else SessionPaths(root)
    return paths.confine(path)


def migrate_file(source: StrPath, destination: StrPath) -> JsonlSessionStorage:
    """Write ``source`` (any readable format version) as a new file in the current format; return its
    writer. The original is left untouched."""
    with JsonlSessionStorage.open(source, rate_limits=StorageRateLimits.unlimited()) as old:
        header = old._require_header()
        entries = old.get_entries()
        leaf_id = old.get_leaf_id()
    new = JsonlSessionStorage.create(
        destination, header.cwd, header.metadata, session_id=header.id, timestamp=header.timestamp
    )
    if entries:
        new.append_entries(entries)
        if new.get_leaf_id() != leaf_id:
            new.append_entry(LeafEntry(target_id=leaf_id))
    return new
