"""The message being streamed: what subscribers were shown of it, and the retries of model calls.

Queries rebuild the partial message from the deltas its model activity published (folded on demand,
so streaming costs the workflow nothing); its last ``llm_retry`` becomes a ``RetryNote`` when it ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadConverter

with workflow.unsafe.imports_passed_through():
    from agentcore.events import LlmRetryEvent
    from agentcore.messages import AssistantMessage
    from agentcore.partial import apply_deltas
    from agentcore.protocol import RetryNote

# How many retried model calls ``get_state`` remembers (``retries``): the newest.
RETRIES_KEPT = 200


class StreamedMessage:
    def __init__(
        self,
        retries: list[RetryNote],
        *,
        converter: Callable[[], PayloadConverter] = workflow.payload_converter,
    ) -> None:
        self._converter = converter
        self._message: AssistantMessage | None = None
        # The events an activity published for the message being streamed (deltas, a retry notice),
        # as payloads: ``partial`` folds them into the message, on demand.
        self._payloads: list[Payload] = []
        # The last ``llm_retry`` of the message being streamed; at its end it becomes a ``RetryNote``.
        self._retry: LlmRetryEvent | None = None
        # The newest messages whose model call was retried (``get_state``'s ``retries``), oldest first.
        self._retries = list(retries)

    @property
    def message(self) -> AssistantMessage | None:
        """The message being streamed (as its ``message_start`` event had it), or None."""
        return self._message

    @property
    def retries(self) -> list[RetryNote]:
        """The newest retried messages, oldest first (a copy)."""
        return list(self._retries)

    def start(self, message: AssistantMessage) -> None:
        """``message_start``: deltas the model activity publishes from here on rebuild the partial."""
        self._message = message
        self._payloads = []
        self._retry = None

    def end(self) -> None:
        """``message_end``: nothing is streamed any more (``record_retry`` keeps the retry)."""
        self._message = None
        self._payloads = []

    def stop(self) -> None:
        """The run ended: no message is being streamed."""
        self._message = None

    def note_retry(self, event: LlmRetryEvent) -> None:
        self._retry = event

    def add(self, payloads: list[Payload]) -> None:
        """Events an activity published (already in the event log): kept while a message streams."""
        if self._message is None:
            return
        for payload in payloads:
            self._payloads.append(payload)
            if b"llm_retry" in payload.data:  # a cheap look before decoding (deltas are many)
                event = self._converter().from_payloads([payload])[0]
                if isinstance(event, dict) and event.get("type") == "llm_retry":
                    self._retry = LlmRetryEvent.model_validate(event)

    def record_retry(self, entry_id: str | None) -> None:
        """The message being streamed ended as ``entry_id``: keep its retry, if its call had one."""
        retry, self._retry = self._retry, None
        if retry is None or entry_id is None:
            return
        self._retries.append(
            RetryNote(entry_id=entry_id, attempt=retry.attempt, error_message=retry.error_message)
        )
        del self._retries[:-RETRIES_KEPT]

    def partial(self, *, deltas_only: bool = False) -> AssistantMessage | None:
        """What subscribers were shown of the message being streamed: the deltas its model activity
        published since the last ``llm_retry``, folded into a copy of it; None if there are none.
        ``deltas_only``: a block's text as its deltas make it, not as its ``*_end`` event restates it
        (a UI that shows deltas shows that)."""
        if self._message is None:
            return None
        converter = self._converter()
        deltas: list[dict[str, Any]] = []
        for payload in self._payloads:
            event = converter.from_payloads([payload])[0]
            if not isinstance(event, dict):
                continue
            if event.get("type") == "message_update":
                delta = event.get("assistant_message_event") or {}
                if not (deltas_only and delta.get("type") in ("text_end", "thinking_end")):
                    deltas.append(delta)
            elif event.get("type") == "llm_retry":
                deltas.clear()  # the failed attempt's text is void: the retry streams the message afresh
        if not deltas:
            return None
        partial = self._message.model_copy(deep=True)
        apply_deltas(partial, deltas)
        return partial
