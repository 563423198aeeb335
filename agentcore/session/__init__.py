"""Sessions: the conversation's durable record as an append-only JSONL tree (SPEC-4, SPEC-10.2).

    storage = JsonlSessionStorage.create("sessions/abc.jsonl", cwd="/work", metadata={"system_prompt": "..."})
    storage.append_entry(ModelChangeEntry(model=model))
    storage.append_entry(MessageEntry(message=UserMessage(content="hi", timestamp=now_ms)))
    context = JsonlSessionStorage.open("sessions/abc.jsonl").build_context()

Spec methods map to snake_case: ``getMetadata`` -> ``get_metadata``, ``appendEntry`` -> ``append_entry``,
``getEntry`` -> ``get_entry``, ``findEntries`` -> ``find_entries``, ``getSessionStats`` ->
``get_session_stats``, ``getEntries`` -> ``get_entries``. Errors are ``agentcore.errors.SessionError``
subclasses, re-exported here. Nothing in this package imports Temporal.
"""

from __future__ import annotations

from ..errors import (
    EntryNotFoundError,
    InvalidEntryError,
    InvalidParentError,
    InvalidSessionIdError,
    NotASessionError,
    PathOutsideRootError,
    SessionClosedError,
    SessionCorruptError,
    SessionEncodingError,
    SessionError,
    SessionExistsError,
    SessionLockedError,
    SessionNotFoundError,
    SessionVersionError,
    UnknownEntryTypeError,
)
from .branching import (
    FORKED_FROM_METADATA_KEY,
    PARENT_SESSION_METADATA_KEY,
    abandoned_messages,
    branch,
    branch_entries,
    copy_session,
    fork_session,
    session_copy_bytes,
)
from .context import (
    SessionContext,
    branch_summary_message,
    build_context,
    compaction_summary_message,
    context_from_entries,
)
from .entries import (
    ENTRY_ADAPTER,
    ENTRY_TYPES,
    FORMAT_VERSION,
    SYSTEM_PROMPT_CUSTOM_TYPE,
    SYSTEM_PROMPT_METADATA_KEY,
    ActiveToolsChangeEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    EntryType,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionEntry,
    SessionHeader,
    SessionInfoEntry,
    SessionTreeEntry,
    ThinkingLevelChangeEntry,
)
from .migrate import MIGRATIONS, migrate
from .paths import SESSION_ID_RE, SessionPaths, check_session_id
from .ratelimit import RateLimiter, StorageRateLimits
from .registry import DEFAULT_REGISTRY, SessionRegistry
from .stats import SessionStats
from .storage import (
    FSYNC_ALWAYS,
    FsyncPolicy,
    GetEntriesOptions,
    JsonlSessionStorage,
    SessionMetadata,
    SessionOptions,
    migrate_file,
)

__all__ = [
    "DEFAULT_REGISTRY",
    "ENTRY_ADAPTER",
    "ENTRY_TYPES",
    "FORMAT_VERSION",
    "FORKED_FROM_METADATA_KEY",
    "FSYNC_ALWAYS",
    "MIGRATIONS",
    "SESSION_ID_RE",
    "SYSTEM_PROMPT_CUSTOM_TYPE",
    "SYSTEM_PROMPT_METADATA_KEY",
    "ActiveToolsChangeEntry",
    "BranchSummaryEntry",
    "CompactionEntry",
    "CustomEntry",
    "EntryNotFoundError",
    "EntryType",
    "FsyncPolicy",
    "GetEntriesOptions",
    "InvalidEntryError",
    "InvalidParentError",
    "InvalidSessionIdError",
    "JsonlSessionStorage",
    "LabelEntry",
    "LeafEntry",
    "MessageEntry",
    "ModelChangeEntry",
    "NotASessionError",
    "PARENT_SESSION_METADATA_KEY",
    "PathOutsideRootError",
    "RateLimiter",
    "SessionClosedError",
    "SessionContext",
    "SessionCorruptError",
    "SessionEncodingError",
    "SessionEntry",
    "SessionError",
    "SessionExistsError",
    "SessionHeader",
    "SessionInfoEntry",
    "SessionLockedError",
    "SessionMetadata",
    "SessionNotFoundError",
    "SessionOptions",
    "SessionPaths",
    "SessionRegistry",
    "SessionStats",
    "SessionTreeEntry",
    "SessionVersionError",
    "StorageRateLimits",
    "ThinkingLevelChangeEntry",
    "UnknownEntryTypeError",
    "abandoned_messages",
    "branch",
    "branch_entries",
    "branch_summary_message",
    "build_context",
    "check_session_id",
    "compaction_summary_message",
    "context_from_entries",
    "copy_session",
    "fork_session",
    "session_copy_bytes",
    "migrate",
    "migrate_file",
]
