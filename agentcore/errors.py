"""Error codes (SPEC-7) and the one small exception tree of agentcore.

Failures of the *conversation* are data, not exceptions: a provider failure becomes an
``AssistantMessage`` with ``stop_reason="error"``, a tool failure becomes a ``ToolResultMessage``
with ``is_error=True``. Only misuse raises::

    AgentError                      every agentcore exception; ``.code`` is one of the constants below
    ├── AgentBusyError              AGENT_BUSY: a run is active (prompt, continue, reset, ...)
    ├── InvalidMessageRoleError     INVALID_MESSAGE_ROLE: wrong message role for the operation
    ├── AgentNotFoundError          AGENT_NOT_FOUND: no conversation with that session id
    ├── NamespaceNotFoundError      NAMESPACE_NOT_FOUND: the Temporal namespace does not exist
    ├── ToolNotFoundError           TOOL_NOT_FOUND: a tool name nobody registered
    ├── ToolUnavailableError        TOOL_UNAVAILABLE: a tool's server is down or died mid-call (retryable)
    ├── InvalidParametersError      INVALID_PARAMETERS: arguments fail the tool's schema
    ├── ApprovalNotFoundError       APPROVAL_NOT_FOUND: no tool call with that id waits for a decision
    ├── ApprovalAlreadyResolvedError APPROVAL_ALREADY_RESOLVED: the call was decided already (otherwise)
    ├── ValidationError             VALIDATION_ERROR: a value breaks a SPEC-8 rule (names the field)
    ├── RateLimitError              RATE_LIMITED: over a SPEC-9 limit; nothing was accepted
    ├── CompactionError             COMPACTION_FAILED: the summary model call failed, was aborted or empty
    ├── WakeupInPastError           WAKEUP_IN_PAST: a wake-up asked for a time that is not in the future
    ├── WakeupNotFoundError         WAKEUP_NOT_FOUND: no pending wake-up has that id
    ├── WakeupLimitError            WAKEUP_LIMIT: too many wake-ups pending (``max_pending_wakeups``)
    ├── ScheduleNotFoundError       SCHEDULE_NOT_FOUND: the conversation has no schedule with that id
    ├── EncryptionKeyError          ENCRYPTION_KEY: the payload key is missing, malformed or another one
    ├── NoWorkerError               NO_WORKER: no worker polls the conversation's task queue
    ├── WorkflowTaskFailingError    WORKFLOW_TASK_FAILING: the conversation's workflow task keeps failing
    └── SessionError                SESSION_*: session file problems (see ``agentcore.session``)
        ├── SessionExistsError          SESSION_EXISTS: ``create`` found a file already there
        ├── SessionNotFoundError        SESSION_NOT_FOUND: ``open`` found no file
        ├── SessionCorruptError         SESSION_CORRUPT: a complete line that is not a valid entry
        │   └── SessionEncodingError    SESSION_BAD_ENCODING: a line that is not UTF-8
        ├── NotASessionError            SESSION_NOT_A_SESSION: the first line is not a session header
        ├── SessionVersionError         SESSION_UNSUPPORTED_VERSION: a format version we cannot read/write
        ├── SessionLockedError          SESSION_LOCKED: another writer holds the file
        ├── SessionClosedError          SESSION_CLOSED: the storage was closed, or opened read-only
        ├── UnknownEntryTypeError       SESSION_UNKNOWN_ENTRY_TYPE: not one of the ten entry types
        ├── InvalidEntryError           SESSION_INVALID_ENTRY: an entry whose fields fail validation
        ├── InvalidParentError          SESSION_INVALID_PARENT: a parent (or leaf target) that is not there
        ├── EntryNotFoundError          SESSION_ENTRY_NOT_FOUND: a query names an entry id that is not there
        ├── InvalidSessionIdError       SESSION_INVALID_ID: a session id outside ``[A-Za-z0-9._-]``
        └── PathOutsideRootError        SESSION_PATH_OUTSIDE_ROOT: ``..``, absolute paths, symlinks

The codes double as Temporal ``ApplicationError.type`` so the client can map a refused update back
to the same class (``AgentError.from_code``).
"""

from __future__ import annotations

from typing import ClassVar

# SPEC-7.1 agent errors
AGENT_BUSY = "AGENT_BUSY"
INVALID_MESSAGE_ROLE = "INVALID_MESSAGE_ROLE"
AGENT_NOT_FOUND = "AGENT_NOT_FOUND"
NAMESPACE_NOT_FOUND = "NAMESPACE_NOT_FOUND"
TOOL_NOT_FOUND = "TOOL_NOT_FOUND"
# SPEC-7.2 tool errors
EXECUTION_TIMEOUT = "EXECUTION_TIMEOUT"
EXECUTION_ABORTED = "EXECUTION_ABORTED"
TOOL_NOT_SUPPORTED = "TOOL_NOT_SUPPORTED"
INVALID_PARAMETERS = "INVALID_PARAMETERS"
# Tool approvals (``agentcore.approvals``): refusals of approve / deny, and the results of calls that
# never ran because a person said no or did not answer in time.
APPROVAL_NOT_FOUND = "APPROVAL_NOT_FOUND"
APPROVAL_ALREADY_RESOLVED = "APPROVAL_ALREADY_RESOLVED"
TOOL_DENIED = "TOOL_DENIED"
APPROVAL_TIMEOUT = "APPROVAL_TIMEOUT"
# agentcore's own
VALIDATION_ERROR = "VALIDATION_ERROR"
RATE_LIMITED = "RATE_LIMITED"
OUTCOME_UNKNOWN = "OUTCOME_UNKNOWN"
COMPACTION_FAILED = "COMPACTION_FAILED"
WAKEUP_IN_PAST = "WAKEUP_IN_PAST"
WAKEUP_NOT_FOUND = "WAKEUP_NOT_FOUND"
WAKEUP_LIMIT = "WAKEUP_LIMIT"
SCHEDULE_NOT_FOUND = "SCHEDULE_NOT_FOUND"
ENCRYPTION_KEY = "ENCRYPTION_KEY"
NO_WORKER = "NO_WORKER"
WORKFLOW_TASK_FAILING = "WORKFLOW_TASK_FAILING"
# A query refused once: it brought history events ahead of their workflow task
# (``workflows/task_guard.py``). The client sends it again.
EVENTS_AHEAD_OF_TASK = "EVENTS_AHEAD_OF_TASK"
SESSION_ERROR = "SESSION_ERROR"
SESSION_EXISTS = "SESSION_EXISTS"
SESSION_NOT_FOUND = "SESSION_NOT_FOUND"
SESSION_CORRUPT = "SESSION_CORRUPT"
SESSION_BAD_ENCODING = "SESSION_BAD_ENCODING"
SESSION_NOT_A_SESSION = "SESSION_NOT_A_SESSION"
SESSION_UNSUPPORTED_VERSION = "SESSION_UNSUPPORTED_VERSION"
SESSION_LOCKED = "SESSION_LOCKED"
SESSION_CLOSED = "SESSION_CLOSED"
SESSION_UNKNOWN_ENTRY_TYPE = "SESSION_UNKNOWN_ENTRY_TYPE"
SESSION_INVALID_ENTRY = "SESSION_INVALID_ENTRY"
SESSION_INVALID_PARENT = "SESSION_INVALID_PARENT"
SESSION_INVALID_ID = "SESSION_INVALID_ID"
SESSION_ENTRY_NOT_FOUND = "SESSION_ENTRY_NOT_FOUND"
SESSION_PATH_OUTSIDE_ROOT = "SESSION_PATH_OUTSIDE_ROOT"
# Tool results that are failures without a SPEC-7.2 code of their own (see ``agentcore.tool_exec``).
EXECUTION_ERROR = "EXECUTION_ERROR"  # execute raised
INVALID_TOOL_RESULT = "INVALID_TOOL_RESULT"  # execute returned something other than AgentToolResult
TOOL_CALL_TRUNCATED = "TOOL_CALL_TRUNCATED"  # the response hit the output token limit mid-call
# A sub-agent tool whose child would run deeper than its ``max_depth`` (``agentcore.subagent_tool``).
SUBAGENT_DEPTH_EXCEEDED = "SUBAGENT_DEPTH_EXCEEDED"
TOOL_UNAVAILABLE = (
    "TOOL_UNAVAILABLE"  # the process or server behind a tool is down (``ToolUnavailableError``)
)


class AgentError(Exception):
    """Base of every agentcore exception. ``code`` is a SPEC-7 (or agentcore) error code."""

    code: ClassVar[str] = "AGENT_ERROR"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code  # type: ignore[misc]  # instance override for codes without a subclass

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    @staticmethod
    def from_code(code: str | None, message: str) -> AgentError:
        """Rebuild the typed error a refused Temporal update carried (``ApplicationError.type``)."""
        cls = _BY_CODE.get(code or "")
        if cls is None:
            return AgentError(message, code=code or "AGENT_ERROR")
        return cls(message)


class AgentBusyError(AgentError):
    code = AGENT_BUSY


class InvalidMessageRoleError(AgentError):
    code = INVALID_MESSAGE_ROLE


class AgentNotFoundError(AgentError):
    code = AGENT_NOT_FOUND


class NamespaceNotFoundError(AgentError):
    """The namespace a client names is not on the Temporal cluster (not a missing conversation)."""

    code = NAMESPACE_NOT_FOUND


class ToolNotFoundError(AgentError):
    code = TOOL_NOT_FOUND


class ToolUnavailableError(AgentError):
    """Raised by a tool whose backing server is unreachable or died mid-call (an MCP server, say).

    Unlike other exceptions from ``execute`` it is not turned into an error result: the durable runtime
    lets Temporal retry the call (a retry-safe tool) or records its outcome as unknown (the others)."""

    code = TOOL_UNAVAILABLE


class InvalidParametersError(AgentError):
    code = INVALID_PARAMETERS


class ApprovalNotFoundError(AgentError):
    code = APPROVAL_NOT_FOUND


class ApprovalAlreadyResolvedError(AgentError):
    code = APPROVAL_ALREADY_RESOLVED


class ValidationError(AgentError):
    code = VALIDATION_ERROR


class RateLimitError(AgentError):
    code = RATE_LIMITED


class CompactionError(AgentError):
    """A compaction (or branch summary) could not be made; the session is left unchanged.

    ``aborted``: the abort signal fired. ``context_overflow``: even the summary request was too long
    for the model (the caller may retry with a smaller ``keep_recent_tokens`` or a larger model).
    """

    code = COMPACTION_FAILED

    def __init__(self, message: str, *, aborted: bool = False, context_overflow: bool = False) -> None:
        super().__init__(message)
        self.aborted = aborted
        self.context_overflow = context_overflow


class WakeupInPastError(AgentError):
    code = WAKEUP_IN_PAST


class WakeupNotFoundError(AgentError):
    code = WAKEUP_NOT_FOUND


class WakeupLimitError(AgentError):
    code = WAKEUP_LIMIT


class ScheduleNotFoundError(AgentError):
    code = SCHEDULE_NOT_FOUND


class SessionError(AgentError):
    code = SESSION_ERROR


class SessionExistsError(SessionError):
    code = SESSION_EXISTS


class SessionNotFoundError(SessionError):
    code = SESSION_NOT_FOUND


class SessionCorruptError(SessionError):
    """A complete line of a session file that cannot be read. ``line_number`` is 1-based."""

    code = SESSION_CORRUPT

    def __init__(self, message: str, *, line_number: int | None = None, code: str | None = None) -> None:
        if line_number is not None:
            message = f"line {line_number}: {message}"
        super().__init__(message, code=code)
        self.line_number = line_number


class SessionEncodingError(SessionCorruptError):
    code = SESSION_BAD_ENCODING


class NotASessionError(SessionError):
    code = SESSION_NOT_A_SESSION


class SessionVersionError(SessionError):
    code = SESSION_UNSUPPORTED_VERSION


class SessionLockedError(SessionError):
    code = SESSION_LOCKED


class SessionClosedError(SessionError):
    code = SESSION_CLOSED


class UnknownEntryTypeError(SessionCorruptError):
    """Raised on append (no line number) and on read (with the line number)."""

    code = SESSION_UNKNOWN_ENTRY_TYPE


class InvalidEntryError(SessionCorruptError):
    code = SESSION_INVALID_ENTRY


class InvalidParentError(SessionCorruptError):
    code = SESSION_INVALID_PARENT


class EntryNotFoundError(SessionError):
    code = SESSION_ENTRY_NOT_FOUND


class InvalidSessionIdError(SessionError):
    code = SESSION_INVALID_ID


class PathOutsideRootError(SessionError):
    code = SESSION_PATH_OUTSIDE_ROOT


class EncryptionKeyError(AgentError, ValueError):
    """``AGENTCORE_ENCRYPTION_KEY`` is missing, malformed, or not the key a payload was encrypted with
    (``agentcore.temporal.codec``)."""

    code = ENCRYPTION_KEY


class NoWorkerError(AgentError):
    """A call that needs the conversation's worker (an update, a query) found no worker polling its
    task queue. An update sent stays with the conversation, and a worker that starts applies it."""

    code = NO_WORKER


class WorkflowTaskFailingError(AgentError):
    """The server refused an update for longer than ``UPDATE_REFUSED_RETRY_SECONDS`` because the
    conversation's last workflow task failed or timed out and no retry of it has succeeded yet: its
    worker is overloaded past the task timeout, or the workflow code fails (the worker's log and the
    Web UI say which). Nothing was applied; sending again with the same request id is safe."""

    code = WORKFLOW_TASK_FAILING


_BY_CODE: dict[str, type[AgentError]] = {
    cls.code: cls
    for cls in (
        AgentBusyError,
        InvalidMessageRoleError,
        AgentNotFoundError,
        NamespaceNotFoundError,
        ToolNotFoundError,
        InvalidParametersError,
        ApprovalNotFoundError,
        ApprovalAlreadyResolvedError,
        ValidationError,
        RateLimitError,
        CompactionError,
        WakeupInPastError,
        WakeupNotFoundError,
        WakeupLimitError,
        ScheduleNotFoundError,
        EncryptionKeyError,
        NoWorkerError,
        WorkflowTaskFailingError,
        SessionError,
        SessionExistsError,
        SessionNotFoundError,
        SessionCorruptError,
        SessionEncodingError,
        NotASessionError,
        SessionVersionError,
        SessionLockedError,
        SessionClosedError,
        UnknownEntryTypeError,
        InvalidEntryError,
        InvalidParentError,
        EntryNotFoundError,
        InvalidSessionIdError,
        PathOutsideRootError,
    )
}
