"""Session file access for activities, and the ``session.append`` activity.

Any worker may run any activity of a conversation, so no process keeps a session's write lock between
activities: each write opens the file as its writer (an OS lock: a stalled worker that wakes up late
waits for the lock and then finds its entries already there, by id), appends, and closes. Appends are
idempotent on entry id, so a retried activity never doubles a line.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from agentcore.errors import SessionError, SessionExistsError, SessionLockedError
from agentcore.protocol import AppendInput, SessionCreate
from agentcore.session import JsonlSessionStorage, SessionPaths
from agentcore.session.ratelimit import StorageRateLimits
from agentcore.session.storage import FSYNC_ALWAYS, FsyncPolicy

T = TypeVar("T")

# How long a write waits for another process to release the session's lock before failing the
# attempt (Temporal then retries it).
LOCK_WAIT_SECONDS = 10.0


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

    def path_for(self, session_id: str) -> Path:
        return self.paths.path_for(session_id)

    def _open_writer(self, session_id: str, create: SessionCreate | None) -> JsonlSessionStorage:
        path = self.paths.path_for(session_id)
        limits = self._rate_limits.setdefault(session_id, StorageRateLimits())
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
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

    async def write(
        self, session_id: str, create: SessionCreate | None, work: Callable[[JsonlSessionStorage], T]
    ) -> T:
        """Run ``work`` on the session's writer, in a thread (file I/O and fsync block)."""
        lock = self._locks.setdefault(session_id, asyncio.Lock())
        async with lock:

            def run() -> T:
                storage = self._open_writer(session_id, create)
                try:
                    return work(storage)
                finally:
                    storage.close()

            try:
                return await asyncio.to_thread(run)
            except SessionError as err:
                raise as_application_error(err) from err


def as_application_error(err: SessionError) -> ApplicationError:
    # A locked file is transient (another worker is mid-write); everything else about a session file
    # (corrupt, outside the root, unknown entry type, bad parent) will not fix itself on retry.
    retryable = isinstance(err, SessionLockedError)
    return ApplicationError(str(err), type=err.code, non_retryable=not retryable)


class SessionActivities:
    def __init__(self, store: SessionStore) -> None:
        self.store = store

    @activity.defn(name="session.append")  # don't rename: recorded in histories
    async def append(self, inp: AppendInput) -> None:
        """Append the workflow's entries (idempotent on id)."""
        entries = inp.entries
        await self.store.write(inp.session_id, inp.create, lambda storage: storage.append_entries(entries))
