"""The durable conversation's wire contract: workflow input, update/signal payloads, query results.

Shared by the client (``agentcore.client``), the workflow (``workflows/conversation.py``) and the
activities. Defined here, not in the workflow module, because the workflow sandbox re-executes its
module on every run and pydantic model construction there is expensive; this module is passed through.

Every model ignores unknown fields and gives new fields defaults: these payloads are recorded in
running workflow histories, so old histories must keep decoding after an upgrade.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field

from .approvals import ApprovalDecision, PendingApproval
from .compaction import CompactionSettings
from .events import CompactionReason
from .messages import AssistantMessage, Message, UserMessage, WireModel
from .model import Model, QueueMode, ThinkingLevel, ToolExecutionMode
from .schedules import RecurringMessage
from .session.entries import BranchSummaryEntry, CompactionEntry, SessionEntry
from .session.stats import SessionStats
from .tools import ToolSpec
from .wakeups import Wakeup

WORKFLOW_NAME = "agentcore.Conversation"  # don't rename: recorded in histories
EVENTS_TOPIC = "events"

# Update, signal and query names (don't rename: recorded in histories).
UPDATE_PROMPT = "prompt"
UPDATE_CONTINUE = "continue"
UPDATE_RESET = "reset"
UPDATE_SET_MODEL = "set_model"
UPDATE_SET_THINKING_LEVEL = "set_thinking_level"
UPDATE_SET_TOOLS = "set_tools"
UPDATE_SET_SYSTEM_PROMPT = "set_system_prompt"
UPDATE_WAIT_FOR_IDLE = "wait_for_idle"
UPDATE_CLEAR_QUEUES = "clear_queues"
UPDATE_SCHEDULE_WAKEUP = "schedule_wakeup"
UPDATE_CANCEL_WAKEUP = "cancel_wakeup"
UPDATE_APPROVE = "approve"
UPDATE_DENY = "deny"
# Steering and follow-ups are updates (a validator can refuse them, RATE_LIMITED, before anything is
# recorded); the signals of the same purpose stay for histories that recorded them.
UPDATE_STEER = "queue_steering"
UPDATE_FOLLOW_UP = "queue_follow_up"
SIGNAL_STEER = "steer"
SIGNAL_FOLLOW_UP = "follow_up"
SIGNAL_ABORT = "abort"
# Events an activity publishes (model deltas, tool progress): the workflow puts them in its stream.
SIGNAL_ACTIVITY_EVENTS = "activity_events"
# A sub-agent's calls waiting for approval, reported to its parent; a decision taken in the parent,
# sent on to the sub-agent (``workflows/subagents.py``).
SIGNAL_SUBAGENT_APPROVALS = "subagent_approvals"
SIGNAL_DECIDE_APPROVAL = "decide_approval"
QUERY_STATE = "get_state"
QUERY_MESSAGES = "get_messages"
QUERY_STATS = "get_session_stats"
QUERY_QUEUES = "get_queues"
QUERY_APPROVALS = "get_approvals"
# The refusal of a prompt or continue that reached a run continuing as new: the client sends it again
# (same request id) and the next run takes it.
ROLLING_OVER = "ROLLING_OVER"


class ConversationLimits(WireModel):
    """SPEC-9.1 limits, plus when to continue-as-new."""

    max_messages: int = 1000
    max_messages_per_minute: int = 100
    max_concurrent_tools: int = 10
    # Continue-as-new between runs once history passes this many events (or when the server suggests).
    # Kept low on purpose: a worker that takes over a conversation replays its history, and 100
    # conversations replaying 8,000 events each on a small machine overran the workflow task timeout;
    # under worker kills 1,000 had fewer long tasks and more turns a second than 2,000 in all ten
    # alternated pairs (bench/log/067-continue-as-new-at-1000.md, bench/log/068-roll-over-in-run-end-task.md).
    continue_as_new_after_events: int = 1_000
    # Events kept in the workflow's in-memory stream log (and carried across continue-as-new).
    retained_events: int = 500
    retained_event_bytes: int = 2 * 1024 * 1024
    # Messages carried across continue-as-new are capped by size; the session file has them all.
    # Together with the carried events (a quarter of this) the continue-as-new input stays under
    # Temporal's 256 KB payload warning.
    carried_message_bytes: int = 160 * 1024
    # How long a worker may hold a workflow task; also how long the server waits before it hands a
    # task lost on the way (a network cut, a worker killed) to a worker again: a conversation that
    # was mid-turn resumes at most this long after the link returns. Temporal's default, 10 s. A
    # longer one (30 s) only helps a worker that takes over many long histories at once on a loaded
    # machine (docs/network-faults.md says where that was measured).
    workflow_task_timeout_seconds: float = 10.0
    # Activity timeouts (seconds). Tests shrink the heartbeats to make worker crashes visible fast.
    llm_timeout_seconds: float = 600.0
    llm_heartbeat_seconds: float = 10.0
    llm_max_attempts: int = 8
    tool_heartbeat_seconds: float = 10.0
    tool_max_attempts: int = 5
    # No longer read: every model and tool call is a regular activity (docs/versioning.md, "No local
    # activities, by design"). Kept so that limits and carried state that name them still load.
    local_model_calls: bool = True
    local_tool_calls: bool = True
    # Wake-ups pending at once (``schedule_wakeup``, ``wakeup_tool``): bounds the state carried
    # across continue-as-new, and what a model can pile up.
    max_pending_wakeups: int = 50

    def refusal(
        self, message_count: int, recent_times: Sequence[int], now_ms: int, incoming: int
    ) -> str | None:
        """Why ``incoming`` more messages must be refused (SPEC-9.1), or None. ``recent_times`` are
        the times (ms) messages were accepted at; those older than a minute do not count."""
        if message_count + incoming > self.max_messages:
            return (
                f"Conversation holds {message_count} messages; the limit is {self.max_messages} "
                "(SPEC-9.1). Start a new session or fork this one."
            )
        recent = within_last_minute(recent_times, now_ms)
        if len(recent) + incoming > self.max_messages_per_minute:
            wait = 60 - (now_ms - recent[0]) / 1000 if recent else 60
            return (
                f"Over {self.max_messages_per_minute} messages per minute (SPEC-9.1); retry in {wait:.1f} s."
            )
        return None


def within_last_minute(times: Sequence[int], now_ms: int) -> list[int]:
    """The times (ms) of ``times`` less than a minute before ``now_ms``: the per-minute limit's window."""
    return [t for t in times if now_ms - t < 60_000]


class ConversationConfig(WireModel):
    system_prompt: str = ""
    model: Model
    thinking_level: ThinkingLevel = ThinkingLevel.OFF
    tools: list[ToolSpec] = Field(default_factory=list)
    # Tool names asked for but not yet described by the worker's registry (resolved on start).
    tool_names: list[str] = Field(default_factory=list)
    steering_mode: QueueMode = QueueMode.ONE_AT_A_TIME
    follow_up_mode: QueueMode = QueueMode.ONE_AT_A_TIME
    tool_execution: ToolExecutionMode = ToolExecutionMode.PARALLEL
    max_tokens: int | None = None
    temperature: float | None = None
    compaction: CompactionSettings = Field(default_factory=CompactionSettings)


class QueuedMessage(WireModel):
    """A steering or follow-up message with its client-made id (a repeat is applied once)."""

    id: str
    message: UserMessage


class PendingRun(WireModel):
    id: str
    # ``resume``: run the tool calls of the last assistant message, none answered yet (a conversation
    # recovered while calls waited for approval), then go on as a run does.
    kind: Literal["prompt", "continue", "resume"]
    messages: list[Message] = Field(default_factory=list)
    # continue from an assistant tail: the messages came from the steering queue (pi's rule).
    skip_initial_steering_poll: bool = False


class SubagentRun(WireModel):
    """A conversation started by a sub-agent tool's call (``agentcore.subagents``): it runs its task
    once and ends, returning the call's result to the parent."""

    parent_session_id: str
    tool_call_id: str
    tool_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    # 1 for a child of the conversation a person talks to; its own sub-agents run one deeper.
    depth: int = 1
    # The deepest its descendants may run: the smallest ``max_depth`` of the tools that led here.
    max_depth: int = 2


class RetryNote(WireModel):
    """A model call that was retried (``llm_retry``): the assistant message it finally made (its
    session entry id), the attempt that made it and why the attempt before it failed. A page loaded
    later shows the same notice a live one showed."""

    entry_id: str
    attempt: int
    error_message: str | None = None


class ConversationInput(WireModel):
    """Start input, and the carry-over of a continue-as-new."""

    session_id: str
    config: ConversationConfig
    limits: ConversationLimits = Field(default_factory=ConversationLimits)
    # The transcript held in memory (all of it, or its tail after continue-as-new).
    messages: list[Message] = Field(default_factory=list)
    # The session entry id of each message (same length as ``messages``; None: synthetic/unknown).
    message_entry_ids: list[str | None] = Field(default_factory=list)
    first_message_index: int = 0
    leaf_id: str | None = None
    # Entries created by the workflow but not yet known to be in the session file.
    unwritten: list[SessionEntry] = Field(default_factory=list)
    session_created: bool = False
    session_metadata: dict[str, Any] = Field(default_factory=dict)
    steering_queue: list[QueuedMessage] = Field(default_factory=list)
    follow_up_queue: list[QueuedMessage] = Field(default_factory=list)
    # A run (prompt or continue) that was accepted but not started before continue-as-new.
    pending_run: PendingRun | None = None
    seen_ids: list[str] = Field(default_factory=list)
    recent_message_times: list[int] = Field(default_factory=list)
    error_message: str | None = None
    search_attributes: bool = False
    run_count: int = 0
    stats: SessionStats | None = None
    # Whether the conversation's last model call ended before its first publish tick (None: none
    # made yet), so the next run knows whether to expect a quick one.
    last_model_call_quick: bool | None = None
    # ``AgentClient.recover`` without the workers' sessions directory: the session file to place
    # under the session id before anything is written (by ``session.import``, in a worker).
    import_session_from: str | None = None
    # Set when this conversation is a sub-agent's run: it ends with the run, returning its result.
    subagent: SubagentRun | None = None
    # Pending wake-ups, soonest first: each is a workflow timer again in the next run.
    wakeups: list[Wakeup] = Field(default_factory=list)
    # Recurring messages (Temporal Schedules this conversation made; ``agentcore.schedules``).
    schedules: list[RecurringMessage] = Field(default_factory=list)
    # Tool calls that waited for approval when the conversation was recovered from its file: they
    # are asked again (keeping their request time and expiry).
    pending_approvals: list[PendingApproval] = Field(default_factory=list)
    # The retried model calls of the messages carried (``DurableState.retries``).
    retries: list[RetryNote] = Field(default_factory=list)
    # ``prompt_and_wait`` calls (``DurableAgent.run``) whose run had not ended: request id -> the
    # message index the run began at. The client sends each again to this run, which answers it.
    waiting_prompts: dict[str, int] = Field(default_factory=dict)


class PromptRequest(WireModel):
    id: str
    messages: list[UserMessage]


class CommandRequest(WireModel):
    """``continue``, ``reset``: only an id, so a retried request is applied once."""

    id: str = ""


class IdleRequest(CommandRequest):
    """``wait_for_idle``; with ``since`` (a message index) the answer carries the messages from there."""

    since: int | None = None


class SetModelRequest(WireModel):
    id: str = ""
    model: Model


class SetThinkingLevelRequest(WireModel):
    id: str = ""
    thinking_level: ThinkingLevel


class SetToolsRequest(WireModel):
    id: str = ""
    tools: list[str]


class SetSystemPromptRequest(WireModel):
    id: str = ""
    system_prompt: str


class AbortRequest(WireModel):
    id: str = ""
    reason: str | None = None


class ApproveRequest(WireModel):
    """``approve``: let a waiting tool call run; ``args`` (when given) replace the model's."""

    id: str = ""
    tool_call_id: str
    args: dict[str, Any] | None = None


class DenyRequest(WireModel):
    id: str = ""
    tool_call_id: str
    reason: str = ""


class SubagentApprovals(WireModel):
    """``subagent_approvals``: every call a sub-agent (and its own sub-agents) waits on, now."""

    session_id: str
    pending: list[PendingApproval] = Field(default_factory=list)


class ForwardedDecision(WireModel):
    """``decide_approval``: a decision taken in the parent for one of this sub-agent's calls."""

    tool_call_id: str
    decision: ApprovalDecision


class ApprovalsState(WireModel):
    """``get_approvals``: the tool calls waiting for a person, oldest first."""

    pending: list[PendingApproval] = Field(default_factory=list)


class Accepted(WireModel):
    """What an accepted update returns."""

    id: str
    status: Literal["accepted", "duplicate"] = "accepted"
    message_count: int = 0


class Idle(Accepted):
    """What ``wait_for_idle`` returns. Asked with ``since``: the messages from ``start`` on (``since``,
    or the oldest the conversation holds if that is later), as many as the answer's budget holds, at
    least one if there is any (``get_messages`` pages on from ``start + len(messages)``)."""

    messages: list[Message] = Field(default_factory=list)
    start: int = 0


class MessagesQuery(WireModel):
    start: int = 0
    end: int | None = None


class MessagesPage(WireModel):
    messages: list[Message]
    start: int
    total: int
    # Session entry id of each message (fork, branch and label name entries), None where synthetic.
    entry_ids: list[str | None] = Field(default_factory=list)


class QueuesState(WireModel):
    """The queued messages (``get_queues``), or the ones a ``clear_queues`` removed."""

    steering: list[QueuedMessage] = Field(default_factory=list)
    follow_up: list[QueuedMessage] = Field(default_factory=list)


QueueName = Literal["steering", "follow_up", "all"]


class ClearQueuesRequest(WireModel):
    """``clear_queues``: which queue to empty; its id makes a resent request apply once."""

    id: str = ""
    queue: QueueName = "all"


class DurableState(WireModel):
    """``get_state``: SPEC-1.1 fields plus what an operator needs."""

    session_id: str
    system_prompt: str
    model: Model
    thinking_level: ThinkingLevel
    tools: list[ToolSpec]
    messages: list[Message]
    first_message_index: int = 0
    message_count: int = 0
    is_streaming: bool = False
    streaming_message: AssistantMessage | None = None
    pending_tool_calls: list[str] = Field(default_factory=list)
    error_message: str | None = None
    status: Literal["idle", "running", "aborting", "awaiting_approval"] = "idle"
    pending_approvals: list[PendingApproval] = Field(default_factory=list)
    steering_queue_length: int = 0
    follow_up_queue_length: int = 0
    event_offset: int = 0
    leaf_id: str | None = None
    wakeups: list[Wakeup] = Field(default_factory=list)
    schedules: list[RecurringMessage] = Field(default_factory=list)
    # The newest messages whose model call was retried, oldest first (on any branch of the tree).
    retries: list[RetryNote] = Field(default_factory=list)


# ------------------------------------------------------------------------------------ activity inputs


class SessionCreate(WireModel):
    """How to create the session file if it does not exist yet (first write of a conversation)."""

    cwd: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class StreamInput(WireModel):
    """``llm.stream``: references, not the transcript (history stays flat per turn).

    The activity appends ``entries`` (idempotent on id), rebuilds the context at ``leaf_id`` from the
    session file, calls the provider, appends the assistant message as ``result_entry_id`` and returns it.
    """

    session_id: str
    model: Model
    system_prompt: str = ""
    thinking_level: ThinkingLevel = ThinkingLevel.OFF
    tool_names: list[str] = Field(default_factory=list)
    entries: list[SessionEntry] = Field(default_factory=list)
    leaf_id: str | None = None
    result_entry_id: str
    max_tokens: int | None = None
    temperature: float | None = None
    create: SessionCreate | None = None
    # A context-overflow error is then returned without being recorded: the workflow compacts and
    # retries the call once instead.
    compact_on_overflow: bool = False
    # Failed attempts already made at this call: attempt numbers continue from them.
    prior_attempts: int = 0
    # Not read since conversations make no local attempts (docs/versioning.md); kept, as a wire
    # model never loses a field.
    pending_entries: list[SessionEntry] = Field(default_factory=list)
    speed_unknown: bool = False
    local_wait_seconds: float | None = None


class ActivityEvents(WireModel):
    """One batch of the events an activity publishes, in order (``SIGNAL_ACTIVITY_EVENTS``).

    The workflow is the only writer of its event stream: it numbers every event, sizes it against
    the retention budget and keeps the deltas of the message being streamed, without reading the
    stream's internals. Each event is a serialized ``Payload``, base64, as the stream stores it (the
    workflow passes it on without decoding it). ``(publisher_id, sequence)`` makes a batch sent
    twice (a signal retried) apply once. A model call's deltas name the call (its result entry id)
    and the attempt: the workflow takes them only from the call in flight and its newest attempt,
    so a late batch (an attempt superseded during a network cut) never reaches subscribers."""

    publisher_id: str
    sequence: int
    items: list[str] = Field(default_factory=list)
    call_id: str = ""
    attempt: int = 0


class StreamResult(WireModel):
    message: AssistantMessage
    # How many message_update events the activity already published to the stream itself.
    deltas_published: int = 0
    # The attempt that made the result (a retry's number; 0: not known).
    attempt: int = 0
    # The provider refused the context as too long and nothing was recorded (``compact_on_overflow``).
    overflow: bool = False
    # Not set since conversations make no local attempts (docs/versioning.md); kept, as a wire model
    # never loses a field.
    handoff: bool = False
    declined: bool = False
    local_seconds: float = 0.0


class ToolCallInput(WireModel):
    session_id: str
    tool_name: str
    tool_call_id: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    retry_safe: bool = True
    timeout_seconds: float
    # Not read since conversations make no local attempts (docs/versioning.md); kept, as a wire
    # model never loses a field.
    local_wait_seconds: float | None = None
    stop: bool = False


class AppendInput(WireModel):
    session_id: str
    entries: list[SessionEntry]
    create: SessionCreate | None = None


class ImportSessionInput(WireModel):
    session_id: str
    source: str  # an absolute path the workers can read


class DescribeToolsInput(WireModel):
    names: list[str]


class DescribeToolsResult(WireModel):
    tools: list[ToolSpec]
    unknown: list[str] = Field(default_factory=list)
    # Not set since ``tools.describe`` runs only as a regular activity; kept (a wire model never
    # loses a field).
    declined: bool = False


class CompactInput(WireModel):
    """``session.compact``: summarise the older part of the path at ``leaf_id`` into a compaction entry."""

    session_id: str
    model: Model
    entries: list[SessionEntry] = Field(default_factory=list)
    leaf_id: str | None = None
    entry_id: str
    reason: CompactionReason = "manual"
    instructions: str | None = None
    settings: CompactionSettings = Field(default_factory=CompactionSettings)
    create: SessionCreate | None = None


class CompactResult(WireModel):
    """The new entry (None: nothing worth compacting) and the context the conversation goes on from."""

    entry: CompactionEntry | None = None
    messages: list[Message] = Field(default_factory=list)
    message_entry_ids: list[str | None] = Field(default_factory=list)
    tokens_before: int = 0
    tokens_after: int | None = None


class CompactRequest(WireModel):
    id: str = ""
    instructions: str | None = None


class BranchRequest(WireModel):
    """Move the conversation back to ``target_entry_id`` (None: to the very start)."""

    id: str = ""
    target_entry_id: str | None
    # A summary of the branch being left, given by the caller; or ``summarize`` asks the model for one.
    summary: str | None = None
    summarize: bool = False
    instructions: str | None = None


class BranchInput(WireModel):
    """``session.branch``: append the leaf move (and a branch summary) under the workflow's ids."""

    session_id: str
    model: Model
    entries: list[SessionEntry] = Field(default_factory=list)
    leaf_id: str | None = None
    target_entry_id: str | None = None
    summary: str | None = None
    summarize: bool = False
    instructions: str | None = None
    leaf_entry_id: str
    summary_entry_id: str
    settings: CompactionSettings = Field(default_factory=CompactionSettings)
    create: SessionCreate | None = None


class BranchResult(WireModel):
    leaf_id: str | None = None
    summary: str | None = None
    summary_entry: BranchSummaryEntry | None = None
    messages: list[Message] = Field(default_factory=list)
    message_entry_ids: list[str | None] = Field(default_factory=list)
    # The settings the new path records (None: none, or a worker from before they were returned).
    model: Model | None = None
    thinking_level: ThinkingLevel | None = None
    active_tools: list[str] | None = None
    system_prompt: str | None = None


class LabelRequest(WireModel):
    id: str = ""
    target_entry_id: str
    label: str | None = None


class SessionNameRequest(WireModel):
    id: str = ""
    name: str
