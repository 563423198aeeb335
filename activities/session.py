"""Session file access for activities, and the ``session.append`` and ``session.import`` activities.

Any worker may run any activity of a conversation, so no process keeps a session's write lock between
activities: each write takes the file's writer lock (an OS lock: a stalled worker that wakes up late
waits for the lock and then finds its entries already there, by id), appends, and releases it. Appends
are idempotent on entry id, so a retried activity never doubles a line.

A worker keeps the parsed index of the sessions it wrote recently (lock released) and, on the next
write, reads only what other processes appended since: reading the whole file on every write made a
turn's CPU grow with the conversation (bench/log/003-session-index-kept.md: 44 -> 184 ms of worker CPU
per tool turn from turn 10 to turn 500).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from agentcore.errors import (
    SessionError,
    SessionExistsError,
    SessionLockedError,
    SessionNotFoundError,
)
from agentcore.protocol import AppendInput, ImportSessionInput, SessionCreate
from agentcore.session import (
    JsonlSessionStorage,
    SessionPaths,
    copy_session,
    session_copy_bytes,
)
from agentcore.session.ratelimit import StorageRateLimits
from agentcore.session.storage import FSYNC_ALWAYS, FsyncPolicy

T = TypeVar("T")

# How long a write waits for another process to release the session's lock before failing the
# attempt (Temporal then retries it).
LOCK_WAIT_SECONDS = 10.0
# Sessions whose parsed index a worker keeps between writes (one open file descriptor each).
KEPT_SESSIONS = 256


async def _acquire(lock: asyncio.Lock, session_id: str, wait: float | None) -> None:
    if wait is None:
        await lock.acquire()
        return
    # Not ``wait_for``: on Python 3.11 a timeout racing the acquire can lose it, leaking the lock.
    acquiring = asyncio.ensure_future(lock.acquire())
    try:
        await asyncio.wait({acquiring}, timeout=wait)
    except BaseException:  # cancelled meanwhile: give the lock back if it was taken after all
        acquiring.cancel()
        acquiring.add_done_callback(lambda task: None if task.cancelled() else lock.release())
        raise
    if not acquiring.done():
        acquiring.cancel()
    try:
        await acquiring  # acquired after all, or cancelled while still waiting (then not acquired)
    except asyncio.CancelledError:
        error = SessionLockedError(f"session {session_id!r} is being written by this worker")
        raise as_application_error(error) from None


class SessionStore:
    """Session files under one root directory; session ids can never escape it."""

    def __init__(self, root: str | Path, *, fsync: FsyncPolicy = FSYNC_ALWAYS) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.paths = SessionPaths(self.root)
        self.fsync = fsync
        # One writer per session within this process (the OS lock covers other processes).
        self._locks: dict[str, asyncio.Lock] = {}
        # SPEC-9.2 limits are per session, not per opened file object: keep one limiter pair each.
        self._rate_limits: dict[str, StorageRateLimits] = {}
        # Released writers, most recently used last; writes run in threads, hence the lock.
        self._kept: OrderedDict[str, JsonlSessionStorage] = OrderedDict()
        self._kept_lock = threading.Lock()

    def path_for(self, session_id: str) -> Path:
        return self.paths.path_for(session_id)

    def _open_writer(
        self, session_id: str, create: SessionCreate | None, lock_wait: float
    ) -> JsonlSessionStorage:
        path = self.paths.path_for(session_id)
        limits = self._rate_limits.setdefault(session_id, StorageRateLimits())
        deadline = time.monotonic() + lock_wait
        while True:
            try:
                if create is not None and not path.exists():
                    try:
                        return JsonlSessionStorage.create(
                            path,
                            create.cwd,
                            create.metadata,
                            session_id=session_id,
                            root=self.root,
                            fsync=self.fsync,
                            rate_limits=limits,
                        )
                    except SessionExistsError:
                        pass  # another attempt created it first: open it
                return JsonlSessionStorage.open(
                    path, writer=True, root=self.root, fsync=self.fsync, rate_limits=limits
                )
            except SessionLockedError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _resume_writer(self, session_id: str, lock_wait: float) -> JsonlSessionStorage | None:
        """The kept writer of this session, locked again and caught up; None to open the file."""
        with self._kept_lock:
            storage = self._kept.pop(session_id, None)
        if storage is None:
            return None
        deadline = time.monotonic() + lock_wait
        try:
            while True:
                try:
                    if storage.reacquire():
                        return storage
                    break  # the path names another file now
                except SessionLockedError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.01)
        except SessionLockedError:
            storage.close()
            raise
        except SessionError:
            pass  # e.g. the file shrank: open it afresh, which reports what is wrong
        storage.close()
        return None

    def _keep(self, session_id: str, storage: JsonlSessionStorage) -> None:
        try:
            storage.release()
        except BaseException:
            storage.close()
            raise
        evicted = []
        with self._kept_lock:
            self._kept[session_id] = storage
            while len(self._kept) > KEPT_SESSIONS:
                evicted.append(self._kept.popitem(last=False)[1])
        for oldest in evicted:
            with contextlib.suppress(Exception):
                oldest.close()

    async def write(
        self,
        session_id: str,
        create: SessionCreate | None,
        work: Callable[[JsonlSessionStorage], T],
        *,
        lock_wait: float | None = None,
    ) -> T:
        """Run ``work`` on the session's writer, in a thread (file I/O and fsync block).

        The file's lock (another writer holds it) is waited for ``LOCK_WAIT_SECONDS``, then
        ``SESSION_LOCKED``. ``lock_wait`` bounds that wait instead, and the wait for this process's
        own write of the same session too (otherwise unbounded: writes here take turns).
        """
        lock = self._locks.setdefault(session_id, asyncio.Lock())
        await _acquire(lock, session_id, lock_wait)
        lock_wait = LOCK_WAIT_SECONDS if lock_wait is None else lock_wait
        try:

            def run() -> T:
                storage = self._resume_writer(session_id, lock_wait) or self._open_writer(
                    session_id, create, lock_wait
                )
                try:
                    result = work(storage)
                except BaseException:
                    storage.close()  # its index may be half-updated: the next write reads the file
                    raise
                self._keep(session_id, storage)
                return result

            try:
                return await asyncio.to_thread(run)
            except SessionError as err:
                raise as_application_error(err) from err
        finally:
            lock.release()


def as_application_error(err: SessionError) -> ApplicationError:
    # A locked file is transient (another worker is mid-write); everything else about a session file
    # (corrupt, outside the root, unknown entry type, bad parent) will not fix itself on retry.
    retryable = isinstance(err, SessionLockedError)
    # Benign: the error is the answer (a bad entry id, a busy file), not a worker fault; the SDK then
    # logs no traceback for it.
    return ApplicationError(
        err.message, type=err.code, non_retryable=not retryable, category=ApplicationErrorCategory.BENIGN
    )


class SessionActivities:
    def __init__(self, store: SessionStore) -> None:
        self.store = store

    @activity.defn(name="session.append")  # don't rename: recorded in histories
    async def append(self, inp: AppendInput) -> None:
        """Append the workflow's entries (idempotent on id), heartbeating if that takes a while (the
        workflow gives it a heartbeat timeout, so a worker that dies mid-write is noticed soon)."""
        entries = inp.entries

        def append(storage: JsonlSessionStorage) -> None:
            storage.append_entries(entries)

        await heartbeating(self.store.write(inp.session_id, inp.create, append))

    @activity.defn(name="session.import")
    async def import_session(self, inp: ImportSessionInput) -> None:
        """Place the session file ``inp.source`` under ``inp.session_id`` in this worker's sessions
        directory: a conversation recovered by a client that does not know that directory.

        Idempotent: a file already there that is the source, or a copy of it, is kept. A different
        file there, or a source this worker cannot read, fails the import for good."""
        await asyncio.to_thread(self._import, inp)

    def _import(self, inp: ImportSessionInput) -> None:
        source = Path(inp.source)
        target = self.store.path_for(inp.session_id)
        if not source.is_file():
            raise as_application_error(
                SessionNotFoundError(
                    f"this worker cannot read the session file {inp.source}; recover with "
                    "AgentClient(sessions_dir=...) or place the file in the workers' sessions directory"
                )
            )
        try:
            if target.exists() and os.path.samefile(source, target):
                return
            try:
                copy_session(source, target, inp.session_id)  # its header names this session
            except FileExistsError:
                # Placed by an earlier attempt of this import, or another file: that one is kept.
                if target.read_bytes() != session_copy_bytes(source, inp.session_id):
                    raise SessionExistsError(
                        f"the workers' sessions directory already holds another {target.name}"
                    ) from None
        except SessionError as err:
            raise as_application_error(err) from None
        except OSError as err:  # unreadable, or the directory is not writable: no retry fixes that
            raise as_application_error(
                SessionNotFoundError(f"cannot import {inp.source} as {target.name}: {err.strerror or err}")
            ) from None


def retrieve_exception(task: asyncio.Future[Any]) -> None:
    """Done callback of work left running in the background whose failure another attempt reports
    (a parked model call): its exception is taken here instead of being logged as "never retrieved"."""
    if not task.cancelled():
        task.exception()


async def heartbeating(work: Awaitable[T], interval: float = 0.08) -> T:
    """Await ``work`` in an activity, heartbeating every ``interval`` once it takes that long.

    A quick write sends none (each beat is a server write).
    """

    async def beat() -> None:
        while True:
            await asyncio.sleep(interval)
            activity.heartbeat()

    beater = asyncio.create_task(beat())
    try:
        return await work
    finally:
        beater.cancel()
