"""The bytes the loopback server sends: the SSE frames of an OpenAI Chat Completions or Anthropic
Messages stream for a ``Script`` (following the recorded fixtures in providers.md), in-stream error
frames, keep-alives, and each vendor's JSON error bodies."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import orjson

from .script import Protocol, Script

_OPENAI_ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 429: "requests"}
_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def _pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _sse(data: Any, event: str | None = None) -> bytes:
    payload = data if isinstance(data, bytes) else orjson.dumps(data)
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + payload + b"\n\n"


def encode_openai(script: Script, request: Any) -> list[bytes]:
    """The SSE frames of an OpenAI Chat Completions stream (one ``data:`` event per frame)."""
    model = request.get("model", "loopback") if isinstance(request, dict) else "loopback"
    include_usage = bool(
        isinstance(request, dict) and (request.get("stream_options") or {}).get("include_usage")
    )
    envelope: dict[str, Any] = {
        "id": "chatcmpl-loopback",
        "object": "chat.completion.chunk",
        "created": 1727346176,
        "model": model,
        "system_fingerprint": "fp_loopback",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = {
            **envelope,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if include_usage:
            body["usage"] = None
        return _sse(body)

    frames = [chunk({"role": "assistant", "content": ""})]
    frames += [
        chunk({"content": None, script.reasoning_field: piece})
        for piece in _pieces(script.thinking, script.chunk_chars)
    ]
    frames += [chunk({"content": piece}) for piece in _pieces(script.text, script.chunk_chars)]
    for index, call in enumerate(script.tool_calls):
        opening = {
            "index": index,
            "id": call.id or f"call_loopback_{index}",
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        frames.append(chunk({"tool_calls": [opening]}))
        for fragment in _pieces(call.argument_text(), script.fragment_chars):
            frames.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}))
    finish = (
        script.wire_stop_reason
        or {"stop": "stop", "length": "length", "toolUse": "tool_calls"}[script.resolved_stop()]
    )
    frames.append(chunk({}, finish))
    if script.usage is not None and include_usage:
        usage = script.usage
        frames.append(
            _sse(
                {
                    **envelope,
                    "choices": [],
                    "usage": {
                        "prompt_tokens": usage.input + usage.cache_read,
                        "completion_tokens": usage.output,
                        "total_tokens": usage.input + usage.cache_read + usage.output,
                        "prompt_tokens_details": {"cached_tokens": usage.cache_read},
                        "completion_tokens_details": {"reasoning_tokens": 0},
                    },
                }
            )
        )
    frames.append(b"data: [DONE]\n\n")
    return frames


def encode_anthropic(script: Script, request: Any) -> list[bytes]:
    """The SSE frames of an Anthropic Messages stream (one ``event:``/``data:`` pair per frame)."""
    model = request.get("model", "loopback") if isinstance(request, dict) else "loopback"
    usage = script.usage
    message: dict[str, Any] = {
        "id": "msg_loopback",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
    }
    if usage is not None:
        message["usage"] = {
            "input_tokens": usage.input,
            "cache_creation_input_tokens": usage.cache_write,
            "cache_read_input_tokens": usage.cache_read,
            "output_tokens": 1,
            "service_tier": "standard",
        }
    frames = [_sse({"type": "message_start", "message": message}, "message_start")]
    stop = script.resolved_stop()
    index = 0

    def block(start: dict[str, Any], deltas: list[dict[str, Any]], *, close: bool = True) -> None:
        nonlocal index
        frames.append(
            _sse(
                {"type": "content_block_start", "index": index, "content_block": start}, "content_block_start"
            )
        )
        for delta in deltas:
            frames.append(
                _sse({"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta")
            )
        if close:
            frames.append(_sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
        index += 1

    if script.redacted_thinking is not None:
        block({"type": "redacted_thinking", "data": script.redacted_thinking}, [])
    if script.thinking:
        deltas = [
            {"type": "thinking_delta", "thinking": piece}
            for piece in _pieces(script.thinking, script.chunk_chars)
        ]
        deltas.append({"type": "signature_delta", "signature": script.thinking_signature})
        block({"type": "thinking", "thinking": ""}, deltas)
    if script.text:
        block(
            {"type": "text", "text": ""},
            [{"type": "text_delta", "text": piece} for piece in _pieces(script.text, script.chunk_chars)],
        )
    for number, call in enumerate(script.tool_calls):
        fragments = [""] + _pieces(call.argument_text(), script.fragment_chars)
        # A max_tokens cut leaves the last tool block without its content_block_stop (SDK fixture).
        truncated = stop == "length" and number == len(script.tool_calls) - 1
        block(
            {"type": "tool_use", "id": call.id or f"toolu_loopback_{number}", "name": call.name, "input": {}},
            [{"type": "input_json_delta", "partial_json": fragment} for fragment in fragments],
            close=not truncated,
        )
    delta_usage: dict[str, Any] = {"output_tokens": usage.output} if usage is not None else {}
    stop_reason = (
        script.wire_stop_reason or {"stop": "end_turn", "length": "max_tokens", "toolUse": "tool_use"}[stop]
    )
    message_delta: dict[str, Any] = {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
    }
    if delta_usage:
        message_delta["usage"] = delta_usage
    frames.append(_sse(message_delta, "message_delta"))
    frames.append(_sse({"type": "message_stop"}, "message_stop"))
    return frames


def error_body(script: Script, protocol: Protocol, request_headers: dict[str, str]) -> bytes:
    message = script.error_message or phrase(script.status)
    if script.echo_request_headers:
        message += " (request headers: " + ", ".join(f"{k}: {v}" for k, v in request_headers.items()) + ")"
    if protocol == "openai":
        error_type = script.error_type or _OPENAI_ERROR_TYPES.get(script.status, "server_error")
        code = "rate_limit_exceeded" if script.status == 429 else None
        return orjson.dumps({"error": {"message": message, "type": error_type, "param": None, "code": code}})
    error_type = script.error_type or _ANTHROPIC_ERROR_TYPES.get(script.status, "api_error")
    return orjson.dumps(
        {"type": "error", "error": {"type": error_type, "message": message}, "request_id": "req_loopback"}
    )


def overflow_error_body(protocol: Protocol, prompt_tokens: int, context_window: int) -> bytes:
    """The HTTP 400 body each vendor sends for a prompt longer than the model's window."""
    if protocol == "openai":
        message = (
            f"This model's maximum context length is {context_window} tokens. However, your messages "
            f"resulted in {prompt_tokens} tokens. Please reduce the length of the messages."
        )
        return orjson.dumps(
            {
                "error": {
                    "message": message,
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "context_length_exceeded",
                }
            }
        )
    return orjson.dumps(
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": f"prompt is too long: {prompt_tokens} tokens > {context_window} maximum",
            },
            "request_id": "req_loopback",
        }
    )


def stream_error_frame(script: Script, protocol: Protocol) -> bytes:
    if protocol == "openai":
        message = (
            script.error_message or "The server had an error while processing your request. Sorry about that!"
        )
        return _sse({"error": {"message": message, "type": script.error_type or "server_error"}})
    error = {"type": script.error_type or "overloaded_error", "message": script.error_message or "Overloaded"}
    return _sse({"type": "error", "error": error}, "error")


def with_keepalives(frames: list[bytes], protocol: Protocol) -> list[bytes]:
    keepalive = b": keep-alive\n\n" if protocol == "openai" else b'event: ping\ndata: {"type": "ping"}\n\n'
    spaced: list[bytes] = []
    for frame in frames:
        spaced.append(frame)
        spaced.append(keepalive)
    # OpenRouter's comment style too, mid-stream, to prove comments never reach a JSON parser.
    spaced.insert(1, b": OPENROUTER PROCESSING\n\n")
    return spaced


def phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Overloaded" if status == 529 else "Error"
