"""The conversation's inbox: what clients sent that waits for a run, and what refuses more.

The steering and follow-up queues, the request ids seen (a command sent again applies once), the
times messages were accepted at (SPEC-9.1's per-minute limit) and the ``prompt_and_wait`` calls
waiting for their run. All of it is carried across continue-as-new (``ConversationInput``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agentcore import errors
    from agentcore.messages import Message
    from agentcore.model import QueueMode
    from agentcore.protocol import (
        ConversationInput,
        ConversationLimits,
        QueuedMessage,
        QueueName,
        QueuesState,
        within_last_minute,
    )

from .shared import now_ms, refuse

SEEN_IDS_KEPT = 2_000
# ``prompt_and_wait`` calls whose start is kept while their run goes on (the oldest give way).
WAITING_PROMPTS_KEPT = 100


class Inbox:
    def __init__(
        self,
        limits: ConversationLimits,
        message_count: Callable[[], int],
        *,
        steering: Iterable[QueuedMessage] = (),
        follow_up: Iterable[QueuedMessage] = (),
        seen_ids: Iterable[str] = (),
        recent_message_times: Iterable[int] = (),
        waiting_prompts: dict[str, int] | None = None,
        now_ms: Callable[[], int] = now_ms,
    ) -> None:
        self._limits = limits
        # The conversation's messages (the transcript's count): queued ones count on top of them.
        self._message_count = message_count
        self._now_ms = now_ms
        self._steering = list(steering)
        self._follow_up = list(follow_up)
        self._seen: OrderedDict[str, None] = OrderedDict((i, None) for i in seen_ids)
        self._recent = list(recent_message_times)
        # ``prompt_and_wait`` request id -> the message count its answer starts at.
        self._waiting = dict(waiting_prompts or {})

    @classmethod
    def carried(cls, inp: ConversationInput, message_count: Callable[[], int]) -> Inbox:
        """The inbox a run starts with: what the run before it (or the start) handed over."""
        return cls(
            inp.limits,
            message_count,
            steering=inp.steering_queue,
            follow_up=inp.follow_up_queue,
            seen_ids=inp.seen_ids,
            recent_message_times=inp.recent_message_times,
            waiting_prompts=inp.waiting_prompts,
        )

    # What continue-as-new carries (copies).
    @property
    def steering(self) -> list[QueuedMessage]:
        return list(self._steering)

    @property
    def follow_up(self) -> list[QueuedMessage]:
        return list(self._follow_up)

    @property
    def seen_ids(self) -> list[str]:
        return list(self._seen)

    @property
    def recent_message_times(self) -> list[int]:
        return list(self._recent)

    @property
    def waiting_prompts(self) -> dict[str, int]:
        return dict(self._waiting)

    @property
    def queued(self) -> tuple[int, int]:
        """How many steering and follow-up messages wait."""
        return len(self._steering), len(self._follow_up)

    def seen(self, request_id: str) -> bool:
        return bool(request_id) and request_id in self._seen

    def first_time(self, request_id: str) -> bool:
        """Whether a command is new (not seen yet); remembered from now on."""
        if self.seen(request_id):
            return False
        self.remember(request_id)
        return True

    def remember(self, request_id: str) -> None:
        if not request_id:
            return
        self._seen[request_id] = None
        while len(self._seen) > SEEN_IDS_KEPT:
            self._seen.popitem(last=False)

    def check_rate(self, incoming: int) -> None:
        """RATE_LIMITED (SPEC-9.1) unless ``incoming`` more messages fit; queued messages count as held
        (each becomes a message of the conversation)."""
        refusal = self.refusal(incoming)
        if refusal is not None:
            raise refuse(errors.RATE_LIMITED, refusal)

    def refusal(self, incoming: int) -> str | None:
        """Why ``incoming`` more messages do not fit (SPEC-9.1), or None."""
        return self._limits.refusal(self.held(), self._recent, self._now_ms(), incoming)

    def held(self) -> int:
        """The conversation's messages with the queued ones."""
        return self._message_count() + len(self._steering) + len(self._follow_up)

    def count_messages(self, count: int) -> None:
        """``count`` messages were accepted now (the per-minute limit's window)."""
        now = self._now_ms()
        self._recent = [*within_last_minute(self._recent, now), *[now] * count]

    def rate_window_opens_at(self) -> int:
        """When (ms) the oldest message of the last minute leaves the per-minute window."""
        return within_last_minute(self._recent, self._now_ms())[0] + 60_000

    def queue_steering(self, item: QueuedMessage) -> bool:
        """Queue ``item`` (once per id); whether it is new."""
        return self._queue(item, self._steering)

    def queue_follow_up(self, item: QueuedMessage) -> bool:
        return self._queue(item, self._follow_up)

    def _queue(self, item: QueuedMessage, queue: list[QueuedMessage]) -> bool:
        if self.seen(item.id):
            return False
        self.remember(item.id)
        self.count_messages(1)
        queue.append(item)
        return True

    def add_follow_up(self, item: QueuedMessage) -> None:
        """A message the conversation made itself (a wake-up's note), counted by its caller."""
        self._follow_up.append(item)

    def take_steering(self, mode: QueueMode) -> list[Message]:
        return _take(self._steering, mode)

    def take_follow_up(self, mode: QueueMode) -> list[Message]:
        return _take(self._follow_up, mode)

    def clear(self, queue: QueueName = "all") -> QueuesState:
        """Empty the steering and/or follow-up queue; returns what it removed."""
        removed = QueuesState()
        if queue in ("steering", "all"):
            removed.steering = list(self._steering)
            self._steering.clear()
        if queue in ("follow_up", "all"):
            removed.follow_up = list(self._follow_up)
            self._follow_up.clear()
        return removed

    def waiting_since(self, request_id: str) -> int | None:
        """Where the answer of a ``prompt_and_wait`` call already accepted starts, if it waits."""
        return self._waiting.get(request_id)

    def wait_for_run(self, request_id: str, since: int) -> None:
        self._waiting[request_id] = since
        while len(self._waiting) > WAITING_PROMPTS_KEPT:  # (callers that went away)
            del self._waiting[next(iter(self._waiting))]

    def done_waiting(self, request_id: str) -> None:
        self._waiting.pop(request_id, None)


def _take(queue: list[QueuedMessage], mode: QueueMode) -> list[Message]:
    if not queue:
        return []
    taken = queue[:] if mode == QueueMode.ALL else queue[:1]
    del queue[: len(taken)]
    return [item.message for item in taken]
