"""Confine session files to a sessions root.

A session id arrives from clients (it is also the workflow id), so it must never name a file outside
the root: ids are restricted to ``[A-Za-z0-9._-]`` (no separators, no leading dot), and any path is
refused if it contains ``..``, resolves outside the root, or is itself a symlink (a link inside the
root could point anywhere, and the check would race with whoever can create links there).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..errors import InvalidSessionIdError, PathOutsideRootError

SESSION_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
SESSION_FILE_SUFFIX = ".jsonl"

StrPath = str | os.PathLike[str]


def check_session_id(session_id: str) -> str:
    if not isinstance(session_id, str) or not SESSION_ID_RE.match(session_id):
        raise InvalidSessionIdError(
            f"session id {session_id!r} must match {SESSION_ID_RE.pattern} (letters, digits, '.', '_', '-')"
        )
    return session_id


class SessionPaths:
    """The sessions root: ``SessionPaths(root).path_for(session_id)`` is ``root/<id>.jsonl``."""

    def __init__(self, root: StrPath) -> None:
        self.root = Path(root).resolve()

    def path_for(self, session_id: str) -> Path:
        return self.confine(check_session_id(session_id) + SESSION_FILE_SUFFIX)

    def confine(self, path: StrPath) -> Path:
        """``path`` (relative to the root, or absolute inside it) resolved; refuses anything that escapes."""
        candidate = Path(path)
        if ".." in candidate.parts:
            raise PathOutsideRootError(f"{str(path)!r}: '..' is not allowed in a session path")
        if not candidate.is_absolute():
            candidate = self.root / candidate
        if candidate.is_symlink():
            raise PathOutsideRootError(f"{str(path)!r} is a symlink; session files must be regular files")
        resolved = candidate.resolve()
        if resolved == self.root or not resolved.is_relative_to(self.root):
            raise PathOutsideRootError(f"{str(path)!r} is outside the sessions root {str(self.root)!r}")
        return resolved
