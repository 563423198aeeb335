"""One writer per session file per process.

A file lock admits one writer per file, and ``flock`` treats two opens in the *same* process as two
writers too. A Temporal worker may run two activities for one conversation at once (an append and a
read, or a retry overlapping a slow attempt), so a worker shares one storage object per path through
this registry instead of opening the file in each activity. The storage object is thread-safe.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .paths import StrPath
from .storage import JsonlSessionStorage


class SessionRegistry:
    """Open writers by resolved path. ``close_all()`` on worker shutdown."""

    def __init__(self) -> None:
        self._writers: dict[Path, JsonlSessionStorage] = {}
        self._lock = threading.Lock()

    def writer(
        self,
        path: StrPath,
        *,
        create: bool = False,
        cwd: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> JsonlSessionStorage:
        """The process's writer for ``path``, opening it (or creating it, with ``create=True``) once.

        A cached writer is ``refresh()``ed only by the caller's choice: while it holds the lock no
        other process can have appended.
        """
        key = Path(os.path.realpath(path))
        with self._lock:
            storage = self._writers.get(key)
            if storage is not None and not storage.closed:
                return storage
            if create and not key.exists():
                storage = JsonlSessionStorage.create(path, cwd, metadata, **options)
            else:
                storage = JsonlSessionStorage.open(path, writer=True, **options)
            self._writers[key] = storage
            return storage

    def release(self, path: StrPath) -> None:
        """Close the writer for ``path`` (fsyncing what is pending) and drop the lock."""
        with self._lock:
            storage = self._writers.pop(Path(os.path.realpath(path)), None)
        if storage is not None:
            storage.close()

    def close_all(self) -> None:
        with self._lock:
            writers, self._writers = list(self._writers.values()), {}
        for storage in writers:
            storage.close()


# The process-wide registry workers use; tests make their own.
DEFAULT_REGISTRY = SessionRegistry()
