"""Answers to clients stay under Temporal's payload limit, whatever the conversation holds.

A query's answer or an update's result over 2 MB is refused by the server: ``get_state`` on a
transcript holding several large tool outputs would fail, and an event poll answered with one large
event could never be delivered. The session file always holds everything; what a client is *told*
is bounded here:

- an event larger than ``EVENT_MAX_BYTES`` is published with its longest strings cut (each cut says
  how much was left out) and its images replaced by a line naming them (:func:`shrink_to_fit`); so
  is one over ``EVENT_MAX_BYTES_UNDER_PRESSURE`` once the run's history is large (poll answers are
  recorded in it);
- a list of messages answered to a query keeps its newest messages within ``ANSWER_MAX_BYTES``
  (:func:`newest_in_answer`): ``first_message_index`` says where they start, and ``get_messages`` pages
  through the older ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel

from .transcript import newest_within

# The event stream answers a poll with at most ~1 MB of events, or one event if it is larger; the
# answer carries them base64-encoded (4/3 of their size) and is recorded in the workflow's history.
# A tool result as the worker caps it (512 KB of text) fits in one event whole.
EVENT_MAX_BYTES = 600 * 1024
# Once a run's history passes HISTORY_PRESSURE_BYTES (it continues as new only between runs, and the
# server ends a workflow whose history reaches 50 MB), events are cut to EVENT_MAX_BYTES_UNDER_PRESSURE:
# a run of a hundred large tool results then adds a few megabytes of events, not a hundred.
HISTORY_PRESSURE_BYTES = 8 * 1024 * 1024
EVENT_MAX_BYTES_UNDER_PRESSURE = 16 * 1024
# Messages in one query answer (JSON bytes, estimated): well under the 2 MB limit.
ANSWER_MAX_BYTES = 1024 * 1024
# The message being streamed, answered beside them by ``get_state`` (its longest strings cut beyond).
STREAMING_MAX_BYTES = 384 * 1024
CUT_NOTE = "\n[{count} characters left out here; the session file holds them all]"
_MIN_KEPT = 256  # characters every cut string keeps

M = TypeVar("M", bound=BaseModel)


def json_size(model: BaseModel) -> int:
    return len(orjson.dumps(model.model_dump(mode="json")))


def shrink_to_fit(model: M, max_bytes: int, size: Callable[[BaseModel], int] = json_size) -> M:
    """``model`` with its longest strings cut and images replaced until it is about ``max_bytes``.

    Every string longer than a common length is cut to it (the shortest cut that fits, found by
    bisection), so many medium strings and one huge one are treated alike. Types are kept: the
    result validates as ``model``'s class."""
    current = size(model)
    if current <= max_bytes:
        return model
    data = model.model_dump(mode="json")
    _drop_images(data)
    lengths = sorted((len(s) for s in _strings(data)), reverse=True)
    excess = current - max_bytes
    # The longest length L such that cutting every string to L frees ``excess`` characters, with
    # room for the notes. Bytes and characters differ for non-ASCII text: the loop below re-measures.
    for _ in range(4):
        keep = _cut_length(lengths, excess)
        shrunk = type(model).model_validate(_cut(data, keep))
        current = size(shrunk)
        if current <= max_bytes or keep <= _MIN_KEPT:
            return shrunk
        excess *= 2
    return shrunk


def _cut_length(lengths: list[int], excess: int) -> int:
    low, high = _MIN_KEPT, lengths[0] if lengths else _MIN_KEPT
    while low < high:
        mid = (low + high + 1) // 2
        freed = sum(n - mid - len(CUT_NOTE) - 12 for n in lengths if n > mid + len(CUT_NOTE) + 12)
        if freed >= excess:
            low = mid
        else:
            high = mid - 1
    return low


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def _cut(value: Any, keep: int) -> Any:
    if isinstance(value, str):
        if len(value) <= keep + len(CUT_NOTE) + 12:
            return value
        return value[:keep] + CUT_NOTE.format(count=len(value) - keep)
    if isinstance(value, dict):
        return {key: _cut(item, keep) for key, item in value.items()}
    if isinstance(value, list):
        return [_cut(item, keep) for item in value]
    return value


def _drop_images(value: Any) -> None:
    """Replace each image block (in place) by a text block naming it: cut base64 is no image."""
    if isinstance(value, dict):
        for item in value.values():
            _drop_images(item)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, dict) and item.get("type") == "image" and isinstance(item.get("data"), str):
                value[index] = {
                    "type": "text",
                    "text": f"[{item.get('mime_type', 'image')} image of {len(item['data'])} base64 "
                    "characters left out here; the session file holds it]",
                }
            else:
                _drop_images(item)


def approx_size(message: BaseModel) -> int:
    """A quick upper-bound-ish estimate of a message's JSON size: its strings' lengths plus overhead.

    Fields are read as a mapping (``_fields``): ``getattr`` with a default on a pydantic model that
    lacks the field raises and catches an AttributeError, which made this several times slower
    (``get_state`` sizes every message it answers with, on every call)."""
    fields = _fields(message)
    content = fields.get("content")
    if isinstance(content, str):
        return _utf8_size(content) + 200
    total = 200
    for block in content or ():
        values = _fields(block)
        for field in ("text", "thinking", "thinking_signature", "data"):
            value = values.get(field)
            if isinstance(value, str):
                total += _utf8_size(value) + 40
        arguments = values.get("arguments")
        if arguments:
            total += len(orjson.dumps(arguments, default=str))
    details = fields.get("details")
    if details:
        total += len(orjson.dumps(details, default=str))
    return total


def _fields(model: Any) -> dict[str, Any]:
    """A model's field values by name (extra fields included, for a model that keeps them)."""
    values: dict[str, Any] = getattr(model, "__dict__", {})
    extra = getattr(model, "__pydantic_extra__", None)
    return {**values, **extra} if extra else values


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode())


def newest_in_answer(messages: Sequence[M], max_bytes: int = ANSWER_MAX_BYTES) -> tuple[int, list[M]]:
    """The longest tail of ``messages`` within ``max_bytes`` (estimated), as (index of its first,
    messages). At least the last message is kept, shrunk if it alone is over."""
    kept = newest_within(messages, max_bytes, approx_size) or _alone(messages[-1:], max_bytes)
    return len(messages) - len(kept), kept


def oldest_in_answer(messages: Sequence[M], max_bytes: int = ANSWER_MAX_BYTES) -> list[M]:
    """The longest head of ``messages`` within ``max_bytes`` (at least one, shrunk if over)."""
    return newest_within(messages[::-1], max_bytes, approx_size)[::-1] or _alone(messages[:1], max_bytes)


def _alone(message: Sequence[M], max_bytes: int) -> list[M]:
    return [shrink_to_fit(m, max_bytes) for m in message]
