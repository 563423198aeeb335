"""``JsonlSessionStorage``: one session file, append-only, with an in-memory index (SPEC-4.2).

Reading: ``open`` reads the file once and indexes every entry (id -> raw dict, file order, parents,
leaf, labels, stats). Entries are parsed with orjson but *validated* with pydantic only when first
asked for (``get_entry``, ``build_context``, ...): a 100,000-entry file opens in a fraction of the
time eager validation takes, and an invalid body still raises ``InvalidEntryError`` naming its line
the moment anything reads it (``validate()`` checks them all; ``open(..., lazy=False)`` does it at
once). Everything the index needs (type, id, parent, leaf and label targets) is checked on open.

Writing: one writer per file, enforced with ``flock`` held from ``open(writer=True)``/``create`` to
``close``. An append writes whole lines in one ``write`` call, updates the index without re-reading,
and fsyncs per the ``FsyncPolicy``. Existing bytes are never rewritten (see ``lines`` for torn tails).

Strictness: a complete line that cannot be read (malformed JSON, bad UTF-8, unknown type, missing
parent, duplicate id) raises ``SessionCorruptError`` (or a subclass) naming its line. With
``strict=False`` such lines are skipped and described in ``warnings`` instead; entries that hung from
a skipped one are skipped too, since their parent is gone.

All methods are synchronous (file I/O on a local disk is fast; activities call them from threads) and
thread-safe. Reads and writes wait on the SPEC-9.2 rate limits (``StorageRateLimits``).

Modules::

    options.py  FsyncPolicy, GetEntriesOptions, SessionOptions, SessionMetadata
    index.py    SessionIndex: the in-memory index and tree walks, lazy validation
    file.py     SessionFile: the descriptor, its flock, reading new lines in, fsync, guards
    jsonl.py    JsonlSessionStorage: create/open, the SPEC-4.2 queries, the append path; migrate_file
"""

from __future__ import annotations

from .jsonl import JsonlSessionStorage, migrate_file
from .options import FSYNC_ALWAYS, FsyncPolicy, GetEntriesOptions, SessionMetadata, SessionOptions

__all__ = [
    "FSYNC_ALWAYS",
    "FsyncPolicy",
    "GetEntriesOptions",
    "JsonlSessionStorage",
    "SessionMetadata",
    "SessionOptions",
    "migrate_file",
]
