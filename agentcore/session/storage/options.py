"""The storage's option and result types: when to fsync, what ``get_entries`` returns, SPEC-10.2
session options and ``get_metadata``'s answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import pydantic

from ...messages import WireModel
from ..entries import EntryType


@dataclass(frozen=True)
class FsyncPolicy:
    """When appended bytes are forced to disk.

    ``always`` (the default): every ``append_entry``/``append_entries`` call returns only once its
    lines are durable. ``batched``: fsync once ``max_pending`` appends or ``max_delay`` seconds have
    accumulated (checked on append; ``sync()`` and ``close()`` flush the rest), trading the last few
    entries on a power loss for throughput. ``never``: leave it to the OS (tests, scratch sessions).
    """

    mode: Literal["always", "batched", "never"] = "always"
    max_pending: int = 64
    max_delay: float = 0.2

    @classmethod
    def batched(cls, max_pending: int = 64, max_delay: float = 0.2) -> FsyncPolicy:
        return cls("batched", max_pending, max_delay)


FSYNC_ALWAYS = FsyncPolicy()


class GetEntriesOptions(WireModel):
    """What ``get_entries`` returns: file order, or the path root -> leaf (``on_path``) or root ->
    ``path_to``; then only those after ``after_id`` in that order, of ``type``, at most ``limit``."""

    type: EntryType | list[EntryType] | None = None
    on_path: bool = False
    path_to: str | None = None
    after_id: str | None = None
    limit: int | None = pydantic.Field(default=None, ge=0)


class SessionOptions(WireModel):
    """SPEC-10.2 session options."""

    path: str
    cwd: str | None = None  # default: the current directory
    metadata: dict[str, Any] = pydantic.Field(default_factory=dict)


class SessionMetadata(WireModel):
    """``get_metadata()``: the header, plus the latest ``session_info`` name."""

    id: str
    path: str
    cwd: str
    timestamp: int
    version: int
    metadata: dict[str, Any] = pydantic.Field(default_factory=dict)
    name: str | None = None
