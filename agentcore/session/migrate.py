"""Format versions and the migration chain.

Files are never rewritten in place. A reader migrates an older file in memory, step by step
(``MIGRATIONS[v]`` turns version ``v`` into ``v + 1``), on the raw JSON dicts before they are indexed.
A writer refuses an older file (its new lines would be in a newer format than its header says);
``migrate_file`` writes an upgraded copy to a new path instead.

Version 1 is the first format, so the chain is empty today. When the format changes in a way old
readers cannot take (a renamed field, a changed meaning), bump ``FORMAT_VERSION`` and add the step
here, with a checked-in fixture of the old version under ``tests/fixtures``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import SessionVersionError
from .entries import FORMAT_VERSION

RawEntry = dict[str, Any]
Migration = Callable[[RawEntry, list[RawEntry]], tuple[RawEntry, list[RawEntry]]]

MIGRATIONS: dict[int, Migration] = {}


def check_version(version: Any) -> int:
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise SessionVersionError(f"session header has an invalid format version {version!r}")
    if version > FORMAT_VERSION:
        raise SessionVersionError(
            f"session format version {version} is newer than this agentcore reads ({FORMAT_VERSION}); upgrade agentcore"
        )
    return version


def migrate(
    raw_header: RawEntry, raw_entries: list[RawEntry], *, target: int = FORMAT_VERSION
) -> tuple[RawEntry, list[RawEntry]]:
    """Bring a header and its entries from ``raw_header["version"]`` up to ``target``."""
    version = check_version(raw_header.get("version"))
    while version < target:
        step = MIGRATIONS.get(version)
        if step is None:
            raise SessionVersionError(f"no migration from session format version {version}")
        raw_header, raw_entries = step(raw_header, raw_entries)
        version += 1
        raw_header = {**raw_header, "version": version}
    return raw_header, raw_entries
