"""Provider failures: what went wrong, whether a retry can help, and how long the server asked to wait.

Providers never raise to their caller. Internally a failure is a ``ProviderFailure`` (raised inside the
stream and caught by the shared driver in ``base``), which becomes the final ``error`` event: an
``AssistantMessage`` with ``stop_reason="error"`` and a readable ``error_message``, plus the
classification (``retryable``, ``retry_after_seconds``, ``status_code``) that Temporal's retry policy
acts on. We never retry here: one place (the activity's retry policy) owns retries.

Classification follows the vendor SDKs (providers.md section 5): ``x-should-retry`` wins; 408, 409,
429 and every 5xx (529 "overloaded" included) are retryable; other 4xx are not. A context overflow is
never retryable (the same request would fail again) and its message starts with
``CONTEXT_OVERFLOW_PREFIX`` so the loop can compact instead.
"""

from __future__ import annotations

import email.utils
import math
import re
import time
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

import orjson

from ..messages import AssistantMessage

CONTEXT_OVERFLOW_PREFIX = "Context overflow: "

_RETRYABLE_STATUS = frozenset({408, 409, 429})
# The longest ``retry-after`` a call waits out; a provider asking for more fails the call at once.
MAX_RETRY_AFTER_SECONDS = 60.0
# Text that identifies a context overflow in OpenAI, Anthropic and OpenAI-compatible servers' errors.
_OVERFLOW_RE = re.compile(
    r"prompt is too long|maximum context length|context[_ ]length[_ ]exceeded|exceeds the context window"
    r"|model_context_window_exceeded|context window (?:is )?exceeded|input is too long for",
    re.IGNORECASE,
)
# Mid-stream error types (Anthropic ``error.type``, OpenAI ``error.type``/``code``) worth retrying.
_RETRYABLE_STREAM_TYPES = frozenset(
    {
        "overloaded_error",
        "api_error",
        "rate_limit_error",
        "timeout_error",
        "server_error",
        "rate_limit_exceeded",
        "requests",
        "tokens",
        "service_unavailable",
        "internal_error",
    }
)
_RETRYABLE_TEXT_RE = re.compile(
    r"overloaded|rate.?limit|too many requests|server.?error|internal.?error|service.?unavailable|try again",
    re.IGNORECASE,
)
_MAX_MESSAGE_CHARS = 500


class ProviderFailure(Exception):
    """A classified provider failure (internal: streams turn it into their final ``error`` event)."""

    def __init__(
        self,
        provider: str,
        detail: str,
        *,
        retryable: bool,
        status_code: int | None = None,
        retry_after_seconds: float | None = None,
        kind: str = "http",
    ) -> None:
        super().__init__(detail)
        self.provider = provider
        self.detail = detail
        self.retryable = retryable and not is_overflow_text(detail)
        self.status_code = status_code
        self.retry_after_seconds = retry_after_seconds
        self.kind = kind  # "http" | "stream" | "connection" | "truncated" | "refusal" | "config"
        self.context_overflow = is_overflow_text(detail)

    def describe(self) -> str:
        """The ``error_message``: ``HTTP 429 from openai: Rate limit reached (retryable; retry after 2.0s)``."""
        if self.kind == "http":
            head = f"HTTP {self.status_code} from {self.provider}: {self.detail}"
        elif self.kind == "stream":
            head = f"Stream error from {self.provider}: {self.detail}"
        elif self.kind == "connection":
            head = f"Connection error talking to {self.provider}: {self.detail}"
        else:
            head = f"{self.detail} ({self.provider})"
        if self.retryable and self.retry_after_seconds is not None:
            verdict = f"retryable; retry after {self.retry_after_seconds:.1f}s"
        else:
            verdict = "retryable" if self.retryable else "not retryable"
        text = f"{head} ({verdict})"
        return CONTEXT_OVERFLOW_PREFIX + text if self.context_overflow else text


def is_overflow_text(text: str) -> bool:
    return bool(_OVERFLOW_RE.search(text))


def is_context_overflow(message: AssistantMessage) -> bool:
    """True when the provider refused the request because the context is too long (compact, don't retry)."""
    return (
        message.stop_reason == "error"
        and message.error_message is not None
        and message.error_message.startswith(CONTEXT_OVERFLOW_PREFIX)
    )


def classify_http_status(
    status: int, body: bytes | str, headers: Mapping[str, str]
) -> tuple[bool, float | None, str]:
    """``(retryable, retry_after_seconds, message)`` for a non-2xx response; ``message`` is the
    provider's own error text (from its JSON error body) or the start of the body."""
    message = error_text_from_body(body) or _reason_phrase(status)
    retryable = status in _RETRYABLE_STATUS or status >= 500
    should_retry = _header(headers, "x-should-retry")
    if should_retry == "true":
        retryable = True
    elif should_retry == "false":
        retryable = False
    if is_overflow_text(message):
        retryable = False
    delay = retry_after_seconds(headers) if retryable else None
    if delay is not None and delay > MAX_RETRY_AFTER_SECONDS:
        # A quota spent for the day, not a moment's rate limit: say so now rather than wait for it.
        message = (
            f"{message} (the provider asks to retry after {delay:,.0f}s, "
            f"more than the {MAX_RETRY_AFTER_SECONDS:.0f}s a call waits)"
        )
        retryable, delay = False, None
    return retryable, delay, message


def classify_stream_error(error_type: str, message: str) -> bool:
    """Whether an error event that arrived after HTTP 200 is worth retrying (overloaded, server errors)."""
    if is_overflow_text(message):
        return False
    return error_type in _RETRYABLE_STREAM_TYPES or bool(_RETRYABLE_TEXT_RE.search(message))


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """The delay the server asked for: ``retry-after-ms``, then ``retry-after`` (seconds or HTTP date).
    A value that is no finite number of seconds (``1e999``, ``nan``) counts as none."""
    milliseconds = _header(headers, "retry-after-ms")
    if milliseconds:
        try:
            if math.isfinite(seconds := float(milliseconds) / 1000.0):
                return max(0.0, seconds)
        except ValueError:
            pass
    value = _header(headers, "retry-after")
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def error_text_from_body(body: bytes | str) -> str:
    """The provider's message from an error body: OpenAI ``{"error":{"message"}}``, Anthropic
    ``{"type":"error","error":{"type","message"}}``; otherwise the body's start."""
    raw = body.encode() if isinstance(body, str) else body
    try:
        parsed: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _clip(raw.decode("utf-8", "replace").strip())
    return _clip(error_text_from_json(parsed)) or _clip(raw.decode("utf-8", "replace").strip())


def error_text_from_json(parsed: Any) -> str:
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict):
        message = str(error.get("message") or "")
        code = error.get("code")
        # OpenAI puts the telling part in ``code`` (``context_length_exceeded``); keep it visible.
        if isinstance(code, str) and code and code not in message:
            message = f"{message} [{code}]" if message else code
        return message or str(error.get("type") or "")
    if isinstance(error, str):
        return error
    if isinstance(parsed, dict) and isinstance(parsed.get("message"), str):
        return str(parsed["message"])
    return ""


def error_type_from_json(parsed: Any) -> str:
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict):
        return str(error.get("type") or error.get("code") or "")
    return ""


def redact(text: str, secret: str | None) -> str:
    """Remove an API key from text a server sent back (some echo the request's headers)."""
    if not secret or len(secret) < 4:
        return text
    return text.replace(secret, "[redacted]")


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:
        value = headers.get(name.title())
    return value.strip().lower() if isinstance(value, str) else None


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE_CHARS else text[:_MAX_MESSAGE_CHARS] + "..."


def _reason_phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "error"
