"""``SessionFile``: an open session file on top of its ``SessionIndex``: the descriptor and its
``flock`` (held by a writer from ``open(writer=True)``/``create`` to ``close``, given up by ``release``),
reading what is new in the file into the index, fsyncing per the ``FsyncPolicy``, and the guards and
rate limits every public method passes.

Existing bytes are never rewritten (see ``lines`` for torn tails).
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from typing import Self

import pydantic

from ...errors import NotASessionError, SessionClosedError, SessionCorruptError, SessionLockedError
from ...messages import describe_validation_error
from ..entries import FORMAT_VERSION, SessionHeader
from ..lines import Chunk, TailState, scan
from ..migrate import check_version, migrate
from ..ratelimit import StorageRateLimits
from .index import SessionIndex, gc_paused
from .options import FsyncPolicy


class SessionFile(SessionIndex):
    """The open file behind a ``JsonlSessionStorage``."""

    def __init__(
        self,
        path: Path,
        fd: int,
        *,
        writer: bool,
        strict: bool,
        fsync: FsyncPolicy,
        rate_limits: StorageRateLimits | None,
    ) -> None:
        super().__init__(path, strict=strict)
        self.writer = writer
        self.fsync_policy = fsync
        self.rate_limits = rate_limits if rate_limits is not None else StorageRateLimits()
        self._fd: int | None = fd
        self._version = FORMAT_VERSION
        self._consumed = 0  # bytes of the file read into the index
        self._line_count = 0
        self._tail: TailState = "clean"
        self._unsynced = 0
        self._first_unsynced_at = 0.0
        # Appends made with ``sync=False``: flushed by the next synced append, ``sync()`` or close.
        self._deferred = 0
        self._released = False  # a writer between ``release`` and ``reacquire``: no appends

    def close(self) -> None:
        with self._lock:
            if self._fd is None:
                return
            try:
                if self.writer and (self._unsynced or self._deferred):
                    os.fsync(self._fd)
            finally:
                os.close(self._fd)  # also releases the flock
                self._fd = None

    @property
    def closed(self) -> bool:
        return self._fd is None

    def release(self) -> None:
        """Writer: sync (not ``sync=False`` appends: their caller syncs), give up the file lock but keep
        the index; ``reacquire`` resumes.

        A process that writes a session now and then (an activity worker) keeps its parsed index
        instead of reading the whole file again for every write, while any other process may take
        the lock and append in between.
        """
        with self._lock:
            fd = self._require_writable()
            if self._unsynced:
                self._sync_now()
            fcntl.flock(fd, fcntl.LOCK_UN)
            self._released = True

    def reacquire(self) -> bool:
        """Take the writer's lock again and read what others appended meanwhile.

        ``False`` (lock not taken) when the path no longer names this file (deleted or replaced):
        close this object and open the path afresh. ``SessionLockedError`` if another writer holds it.
        """
        with self._lock:
            fd = self._require_open()
            lock_writer(fd, self.path)
            try:
                current = os.stat(self.path, follow_symlinks=False)
            except FileNotFoundError:
                current = None
            mine = os.fstat(fd)
            if current is None or (current.st_ino, current.st_dev) != (mine.st_ino, mine.st_dev):
                fcntl.flock(fd, fcntl.LOCK_UN)
                return False
            self._released = False
            self._read_new()
            return True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------ reading

    def _read_from(self, offset: int) -> bytes:
        fd = self._require_open()
        size = os.fstat(fd).st_size
        if size < offset:
            raise SessionCorruptError(
                f"{str(self.path)!r} shrank from {offset} to {size} bytes; files are append-only"
            )
        parts: list[bytes] = []
        while offset < size:
            part = os.pread(fd, size - offset, offset)
            if not part:
                break
            parts.append(part)
            offset += len(part)
        return b"".join(parts)

    def _load(self) -> None:
        data = self._read_from(0)
        with gc_paused():
            chunk = scan(data)
        if not chunk.lines or chunk.lines[0].line_number != 1:
            if chunk.tail == "torn" and not chunk.lines and b"\n" not in data and data.startswith(b'{"'):
                raise SessionCorruptError(
                    f"{str(self.path)!r} has an incomplete header (creation was interrupted)"
                )
            raise NotASessionError(f"{str(self.path)!r} does not start with a session header")
        header_line = chunk.lines.pop(0)
        raw_header = header_line.value
        if not isinstance(raw_header, dict) or raw_header.get("type") != "session":
            raise NotASessionError(f"{str(self.path)!r} does not start with a session header")
        self._version = check_version(raw_header.get("version"))
        if self._version < FORMAT_VERSION:
            values = [line.value for line in chunk.lines if line.error is None]
            raw_header, migrated = migrate(raw_header, values)
            for line, value in zip(
                (line for line in chunk.lines if line.error is None), migrated, strict=True
            ):
                line.value = value
        try:
            self._header = SessionHeader.model_validate(raw_header)
        except pydantic.ValidationError as exc:
            raise NotASessionError(
                f"{str(self.path)!r}: invalid session header: {describe_validation_error(exc)}"
            ) from None
        self._ingest(chunk, base=0)

    def _ingest(self, chunk: Chunk, *, base: int) -> None:
        with gc_paused():
            for line in chunk.lines:
                self._index_line(line)
        for line_number in chunk.torn_lines:
            self.warnings.append(f"line {line_number}: skipped a torn write (a crash interrupted an append)")
        self._consumed = base + chunk.consumed
        self._line_count += chunk.line_count
        self._tail = chunk.tail
        if chunk.tail == "torn":
            self.warnings.append(
                f"line {self._line_count + 1}: the last line is a torn write; it is ignored, and the next append closes it off"
            )

    def refresh(self) -> int:
        """Read entries another process appended since the last read; return how many were added."""
        self._limit_read()
        return self._read_new()

    def _read_new(self) -> int:
        with self._lock:
            data = self._read_from(self._consumed)
            base = self._consumed
            if self._tail == "unterminated" and data.startswith(b"\n"):
                # The newline that a writer put after our unterminated last entry ends that line.
                data, base = data[1:], base + 1
                self._tail = "clean"
            if not data:
                return 0
            before = len(self._order)
            self._ingest(scan(data, first_line_number=self._line_count + 1), base=base)
            return len(self._order) - before

    # ------------------------------------------------------------------------------------ syncing

    def _after_write(self) -> None:
        policy = self.fsync_policy
        if policy.mode == "never":
            return
        if policy.mode == "always":
            self._sync_now()
            return
        if not self._unsynced:
            self._first_unsynced_at = time.monotonic()
        self._unsynced += 1
        if (
            self._unsynced >= policy.max_pending
            or time.monotonic() - self._first_unsynced_at >= policy.max_delay
        ):
            self._sync_now()

    def _sync_now(self) -> None:
        fd = self._require_open()
        # fdatasync also persists the size change an append makes; the inode times are not needed.
        os.fdatasync(fd)
        self._unsynced = 0
        self._deferred = 0

    def sync(self) -> None:
        """Force appended entries to disk now (for ``FsyncPolicy.batched``)."""
        with self._lock:
            if self._unsynced or self._deferred:
                self._sync_now()

    # -------------------------------------------------------------------------------------- guards

    def _require_open(self) -> int:
        if self._fd is None:
            raise SessionClosedError(f"session {str(self.path)!r} is closed")
        return self._fd

    def _require_writable(self) -> int:
        fd = self._require_open()
        if not self.writer:
            raise SessionClosedError(
                f"session {str(self.path)!r} was opened read-only (open(..., writer=True))"
            )
        if self._released:
            raise SessionClosedError(f"session {str(self.path)!r} is released; reacquire() it first")
        return fd

    def _limit_read(self) -> None:
        self._require_open()
        self.rate_limits.read()

    def _limit_write(self) -> None:
        self._require_writable()
        self.rate_limits.write()


def lock_writer(fd: int, path: Path) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise SessionLockedError(
            f"session file {str(path)!r} is open for writing by another process or object"
        ) from None


def write_all(fd: int, data: bytes) -> None:
    # O_APPEND puts each write at the end; a short write (a full disk, a signal) continues where it stopped.
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def fsync_directory(directory: Path) -> None:
    # Makes the new directory entry (the hard link) durable, not just the file's bytes.
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
