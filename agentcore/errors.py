"""Error codes (SPEC-7) and the one small exception tree of agentcore.

Failures of the *conversation* are data, not exceptions: a provider failure becomes an
``AssistantMessage`` with ``stop_reason="error"``, a tool failure becomes a ``ToolResultMessage``
with ``is_error=True``. Only misuse raises::

    AgentError                      every agentcore exception; ``.code`` is one of the constants below
    ├── AgentBusyError              AGENT_BUSY: a run is active (prompt, continue, reset, ...)
    ├── InvalidMessageRoleError     INVALID_MESSAGE_ROLE: wrong message role for the operation
    ├── AgentNotFoundError          AGENT_NOT_FOUND: no conversation with that session id
    ├── ToolNotFoundError           TOOL_NOT_FOUND: a tool name nobody registered
    ├── InvalidParametersError      INVALID_PARAMETERS: arguments fail the tool's schema
    ├── ValidationError             VALIDATION_ERROR: a value breaks a SPEC-8 rule (names the field)
    ├── RateLimitError              RATE_LIMITED: over a SPEC-9 limit; nothing was accepted
    └── SessionError                SESSION_*: session file problems (see ``agentcore.session``)

The codes double as Temporal ``ApplicationError.type`` so the client can map a refused update back
to the same class (``AgentError.from_code``).
"""

from __future__ import annotations

from typing import ClassVar

# SPEC-7.1 agent errors
AGENT_BUSY = "AGENT_BUSY"
INVALID_MESSAGE_ROLE = "INVALID_MESSAGE_ROLE"
AGENT_NOT_FOUND = "AGENT_NOT_FOUND"
TOOL_NOT_FOUND = "TOOL_NOT_FOUND"
# SPEC-7.2 tool errors
EXECUTION_TIMEOUT = "EXECUTION_TIMEOUT"
EXECUTION_ABORTED = "EXECUTION_ABORTED"
TOOL_NOT_SUPPORTED = "TOOL_NOT_SUPPORTED"
INVALID_PARAMETERS = "INVALID_PARAMETERS"
# agentcore's own
VALIDATION_ERROR = "VALIDATION_ERROR"
RATE_LIMITED = "RATE_LIMITED"
OUTCOME_UNKNOWN = "OUTCOME_UNKNOWN"
SESSION_ERROR = "SESSION_ERROR"
# Tool results that are failures without a SPEC-7.2 code of their own (see ``agentcore.tool_exec``).
EXECUTION_ERROR = "EXECUTION_ERROR"  # execute raised
INVALID_TOOL_RESULT = "INVALID_TOOL_RESULT"  # execute returned something other than AgentToolResult
TOOL_CALL_TRUNCATED = "TOOL_CALL_TRUNCATED"  # the response hit the output token limit mid-call


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


class ToolNotFoundError(AgentError):
    code = TOOL_NOT_FOUND


class InvalidParametersError(AgentError):
    code = INVALID_PARAMETERS


class ValidationError(AgentError):
    code = VALIDATION_ERROR


class RateLimitError(AgentError):
    code = RATE_LIMITED


class SessionError(AgentError):
    code = SESSION_ERROR


_BY_CODE: dict[str, type[AgentError]] = {
    cls.code: cls
    for cls in (
        AgentBusyError,
        InvalidMessageRoleError,
        AgentNotFoundError,
        ToolNotFoundError,
        InvalidParametersError,
        ValidationError,
        RateLimitError,
        SessionError,
    )
}
