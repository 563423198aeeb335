"""The session file's line types: the header and the spec's ten entry types (SPEC-4.1).

Every line of a session file is one JSON object. The first is a ``SessionHeader``; every other line is
one ``SessionEntry``, discriminated on ``type``. Entries form a tree through ``parent_id``; the *leaf*
is the current position (the entry the next append hangs from).

``id``, ``timestamp`` and ``parent_id`` may be left out when an entry is built: ``append_entry`` fills
them (a uuid4 hex, the wall clock in ms, the current leaf). A Temporal workflow sets ``id`` itself
(from ``workflow.uuid4()``) so that a retried append activity finds the entry already there and does
nothing.

New fields always get defaults so that files written by an older agentcore keep decoding; unknown
fields are ignored (``WireModel``) so files written by a newer one do too.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import Field, TypeAdapter

from ..messages import Message, Usage, WireModel
from ..model import Model, ThinkingLevel

# Our on-disk format. Bump it (and add a step to ``migrate.MIGRATIONS``) when a change is not additive.
FORMAT_VERSION: Final = 1

EntryType = Literal[
    "message",
    "thinking_level_change",
    "model_change",
    "active_tools_change",
    "compaction",
    "branch_summary",
    "custom",
    "label",
    "session_info",
    "leaf",
]
ENTRY_TYPES: Final[frozenset[str]] = frozenset(EntryType.__args__)  # type: ignore[attr-defined]

# ``custom`` entries are never sent to a model; this one custom type is how a conversation changes its
# system prompt after creation (the initial one lives in the header's ``metadata["system_prompt"]``).
SYSTEM_PROMPT_CUSTOM_TYPE: Final = "agentcore.system_prompt"
SYSTEM_PROMPT_METADATA_KEY: Final = "system_prompt"


class SessionHeader(WireModel):
    """The first line of a session file. Not part of the entry tree."""

    type: Literal["session"] = "session"
    version: int = FORMAT_VERSION
    id: str
    cwd: str
    timestamp: int = Field(gt=0, description="creation time, milliseconds since the Unix epoch")
    metadata: dict[str, Any] = Field(default_factory=dict)


class EntryBase(WireModel):
    # Empty id / zero timestamp mean "not set yet": append fills them. ``parent_id=None`` on an entry
    # being appended means "the current leaf"; on a stored entry it means a root.
    id: str = ""
    parent_id: str | None = None
    timestamp: int = Field(default=0, ge=0, description="milliseconds since the Unix epoch")


class MessageEntry(EntryBase):
    type: Literal["message"] = "message"
    message: Message


class ThinkingLevelChangeEntry(EntryBase):
    type: Literal["thinking_level_change"] = "thinking_level_change"
    thinking_level: ThinkingLevel


class ModelChangeEntry(EntryBase):
    """The whole ``Model``, not just its id: recovery must restore the base_url, limits and prices."""

    type: Literal["model_change"] = "model_change"
    model: Model


class ActiveToolsChangeEntry(EntryBase):
    """The names of the tools the model may call from here on (specs live in the worker's registry)."""

    type: Literal["active_tools_change"] = "active_tools_change"
    active_tools: list[str]


class CompactionEntry(EntryBase):
    """Everything on the path before ``first_kept_entry_id`` is replaced by ``summary`` in the context."""

    type: Literal["compaction"] = "compaction"
    summary: str
    first_kept_entry_id: str | None = None
    tokens_before: int = 0
    usage: Usage | None = None
    details: Any = None


class BranchSummaryEntry(EntryBase):
    """A summary of the branch the conversation came back from (``from_id`` was its leaf)."""

    type: Literal["branch_summary"] = "branch_summary"
    from_id: str
    summary: str
    usage: Usage | None = None
    details: Any = None


class CustomEntry(EntryBase):
    """Application data kept with the conversation; never sent to a model."""

    type: Literal["custom"] = "custom"
    custom_type: str
    data: Any = None


class LabelEntry(EntryBase):
    """Names ``target_id`` (a bookmark); an empty or null label clears it."""

    type: Literal["label"] = "label"
    target_id: str
    label: str | None = None


class SessionInfoEntry(EntryBase):
    type: Literal["session_info"] = "session_info"
    name: str


class LeafEntry(EntryBase):
    """Moves the current position to ``target_id`` (``None``: before the first entry).

    Its own ``parent_id`` records where the conversation was when it moved; the entry itself never
    becomes the leaf.
    """

    type: Literal["leaf"] = "leaf"
    target_id: str | None


SessionEntry = Annotated[
    MessageEntry
    | ThinkingLevelChangeEntry
    | ModelChangeEntry
    | ActiveToolsChangeEntry
    | CompactionEntry
    | BranchSummaryEntry
    | CustomEntry
    | LabelEntry
    | SessionInfoEntry
    | LeafEntry,
    Field(discriminator="type"),
]
# The spec's name for the union.
SessionTreeEntry = SessionEntry

ENTRY_ADAPTER: TypeAdapter[SessionEntry] = TypeAdapter(SessionEntry)
