"""The conversation's side of its session file: whether it exists, whether writes are blocked, and
when the entries a run's last workflow task made are flushed.

Model calls, compactions and branches write the entries the file lacks with their own activity; what
is left after a run (an aborted batch, a refused call, a wake-up's note) waits up to ``FLUSH_DELAY``
for the next run to write it (``ConversationWorkflow._defer_flush``), unless someone waits for the
file (``wait_for_idle``).
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from agentcore.protocol import SessionCreate

# Entries a run's last workflow task made wait this long for the next run to write them.
FLUSH_DELAY = timedelta(seconds=1)


class SessionWriter:
    def __init__(self, created: bool, metadata: dict[str, Any]) -> None:
        self._created = created
        self._metadata = metadata
        # A write failed: the entries are kept and no write is tried until the next run.
        self._blocked = False
        # Why the session file a recovery named could not be placed (the conversation then ends).
        self._import_error: ApplicationError | None = None
        # Keeps approval waits from writing the same entries twice at once.
        self._lock = asyncio.Lock()
        # Paced: a deferred flush waited its whole FLUSH_DELAY (a person was reading the answer) and no
        # run has since come while one waited, or within FLUSH_DELAY of the one before it.
        self._paced = False
        self._run_ended_at: datetime | None = None
        # ``wait_for_idle`` calls waiting: they want the flush now.
        self._idle_waiters = 0

    @property
    def created(self) -> bool:
        return self._created

    @property
    def metadata(self) -> dict[str, Any]:
        return dict(self._metadata)

    @property
    def blocked(self) -> bool:
        return self._blocked

    @property
    def import_error(self) -> ApplicationError | None:
        return self._import_error

    @property
    def lock(self) -> asyncio.Lock:
        return self._lock

    @property
    def paced(self) -> bool:
        return self._paced

    @property
    def waited_for(self) -> bool:
        """Whether a ``wait_for_idle`` call waits for the file."""
        return self._idle_waiters > 0

    def create(self, system_prompt: str) -> SessionCreate | None:
        """How to create the session file, until an activity has created it."""
        if self._created:
            return None
        metadata = {"system_prompt": system_prompt, **self._metadata}
        return SessionCreate(cwd=metadata.pop("cwd", None), metadata=metadata)

    def written(self) -> None:
        """An activity wrote to the session file: it exists now."""
        self._created = True

    def block(self) -> None:
        self._blocked = True

    def import_failed(self, error: ApplicationError) -> None:
        self._import_error = error

    def waiter_came(self) -> None:
        self._idle_waiters += 1

    def waiter_left(self) -> None:
        self._idle_waiters -= 1

    def run_started(self, now: datetime) -> None:
        """A run starts: writes are tried again, and one within ``FLUSH_DELAY`` of the last is not paced."""
        if self._run_ended_at is not None and now - self._run_ended_at < FLUSH_DELAY:
            self._paced = False  # back to back again
        self._blocked = False

    def run_ended(self, now: datetime) -> None:
        self._run_ended_at = now

    def flush_waited(self, *, timed_out: bool, run_came: bool) -> None:
        """A deferred flush's wait ended: paced when it waited its whole delay with no run asked for,
        and not once a run came while it waited."""
        if timed_out:
            self._paced = not run_came
        elif run_came:
            self._paced = False
