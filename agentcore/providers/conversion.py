"""The shared half of converting a context to a request body: ``normalize_messages`` (a transcript
every provider accepts) and ``Normalizer``, and ``ConversionMemo``/``carry_on``, which let a
conversation's next call convert only the messages that follow the last call's."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ..messages import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from ..model import Model

NO_RESULT_TEXT = "No result provided"


def normalize_messages(messages: Sequence[Message], model: Model) -> list[Message]:
    """A transcript every provider accepts.

    * Failed or aborted assistant turns are dropped: their partial content may end mid tool call, and
      the provider never produced them as a whole.
    * A tool result whose call is gone (dropped with such a turn) is dropped too.
    * A tool call left without a result (the run was interrupted) gets an error result, because both
      APIs reject a transcript where a call is never answered.
    * Images go to a model that cannot see them as a short text note instead.
    """
    normalizer = Normalizer(model)
    normalizer.feed(messages)
    return normalizer.kept + normalizer.unanswered()


class Normalizer:
    """``normalize_messages`` fed a piece at a time: ``kept`` never changes once a message is fed
    past it, so a conversion of it can be kept too (see ``ConversionMemo``). Only the calls still
    waiting for their results at the end (``unanswered``) depend on what comes next."""

    def __init__(self, model: Model) -> None:
        self.kept: list[Message] = []
        self._images = "image" in model.input
        self._known_calls: set[str] = set()
        self._pending: list[ToolCall] = []
        self._pending_timestamp = 0

    def feed(self, messages: Iterable[Message]) -> None:
        kept, images = self.kept, self._images
        for message in messages:
            if isinstance(message, ToolResultMessage):
                call_id = message.tool_call_id
                if call_id not in self._known_calls:
                    continue
                if self._pending:
                    self._pending = [call for call in self._pending if call.id != call_id]
                kept.append(message if images else _without_images(message))
                continue
            if self._pending:
                kept += self.unanswered()
                self._pending = []
            if isinstance(message, AssistantMessage):
                if message.stop_reason in ("error", "aborted"):
                    continue
                calls = message.tool_calls
                if calls:
                    self._pending = calls
                    self._pending_timestamp = message.timestamp
                    self._known_calls.update(call.id for call in calls)
                kept.append(message)
            else:
                kept.append(message if images else _without_images(message))

    def unanswered(self) -> list[Message]:
        """Error results for the calls still waiting for theirs."""
        return [
            ToolResultMessage(
                tool_call_id=call.id,
                tool_name=call.name,
                content=[TextContent(text=NO_RESULT_TEXT)],
                is_error=True,
                timestamp=self._pending_timestamp,
            )
            for call in self._pending
        ]


class ConversionMemo:
    """A conversation's last conversion, for the next call to carry on from.

    Converting a context to a request body takes time in proportion to its length on every model
    call, though a conversation's calls mostly differ by their last few messages. A caller whose
    message objects never change once built passes one memo per conversation as
    ``StreamOptions.conversion_memo``: when a call's messages begin with the previous call's, the
    provider converts only the rest. The worker does (its session store hands every call of a
    conversation the same message objects). Messages are matched by identity (the last few also by
    equality: the worker rebuilds the newest ones per call), so a caller that may change a message
    after a call must pass none; the in-process ``Agent`` passes none.

    A provider asks ``resume`` for its state, feeds it what follows, and gives it back with ``keep``.
    What a provider keeps is shared with later calls and must not change once returned in a request.
    """

    # The previous call's last messages may be equal copies; past this many it converts afresh.
    RECHECK = 32

    __slots__ = ("_key", "_messages", "_state")

    def __init__(self) -> None:
        self._key: Hashable = None
        self._messages: list[Message] = []  # held: their ids stay theirs while kept
        self._state: Any = None

    def resume(self, key: Hashable, messages: Sequence[Message]) -> tuple[Any, int]:
        """The state kept by the last conversion and how many of ``messages`` it covers, or (None,
        0) when ``messages`` do not begin with that conversion's or ``key`` (what the conversion
        depends on besides the messages) differs. The memo is empty afterwards, so a conversion
        that fails half way leaves nothing half done behind."""
        state, previous, same_key = self._state, self._messages, self._key == key
        self._key, self._messages, self._state = None, [], None
        count = len(previous)
        if state is None or not same_key or len(messages) < count:
            return None, 0
        head = max(0, count - self.RECHECK)
        if list(map(id, messages[:head])) != list(map(id, previous[:head])):
            return None, 0
        for old, new in zip(previous[head:], messages[head:count], strict=True):
            if old is not new and old != new:
                return None, 0
        return state, count

    def keep(self, key: Hashable, messages: Sequence[Message], state: Any) -> None:
        """Remember ``state``: the conversion of ``messages``, for ``key``."""
        self._key, self._messages, self._state = key, list(messages), state


@dataclass
class Conversion:
    """A provider's conversion so far (a provider adds its wire entries): ``normalizer`` holds the
    messages it normalized."""

    normalizer: Normalizer


_Conversion = TypeVar("_Conversion", bound=Conversion)


def carry_on(
    memo: ConversionMemo | None, key: Hashable, messages: Sequence[Message], start: Callable[[], _Conversion]
) -> _Conversion:
    """The conversion of ``messages`` so far as normalizing goes: the memo's, fed what followed its
    messages, or ``start()`` fed them all. The provider converts what its normalizer added, then
    gives the state back with ``memo.keep``."""
    state, done = memo.resume(key, messages) if memo is not None else (None, 0)
    if state is None:
        state, done = start(), 0
    state.normalizer.feed(itertools.islice(messages, done, None))
    return state


_WithImages = TypeVar("_WithImages", UserMessage, ToolResultMessage)


def _without_images(message: _WithImages) -> _WithImages:
    """``message`` with each image replaced by a note (for a model that takes none)."""
    if not any(isinstance(block, ImageContent) for block in message.content):
        return message
    content = [
        TextContent(text="(image omitted: this model does not accept images)")
        if isinstance(block, ImageContent)
        else block
        for block in message.content
    ]
    return message.model_copy(update={"content": content})
