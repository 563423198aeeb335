"""Call resilience: the worker watch, the resend policy for updates and queries, error mapping.

``WorkerWatch`` (one per ``AgentClient``, shared by its ``DurableAgent``s) turns a call that no
worker will answer into ``NoWorkerError``; ``ConversationCalls`` (one per ``DurableAgent``) sends a
conversation's updates, queries and signals, sends refused ones again where that is safe, and maps
the server's errors to agentcore's.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import TaskQueueKind, TaskQueueType
from temporalio.api.errordetails.v1 import NamespaceNotFoundFailure
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import (
    DescribeTaskQueueRequest,
    GetWorkflowExecutionHistoryReverseRequest,
)
from temporalio.client import (
    Client,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from ..errors import (
    EVENTS_AHEAD_OF_TASK,
    AgentError,
    AgentNotFoundError,
    NamespaceNotFoundError,
    NoWorkerError,
    ValidationError,
    WorkflowTaskFailingError,
)
from ..protocol import ROLLING_OVER, Accepted

T = TypeVar("T", bound=BaseModel)
R = TypeVar("R")

# A query refused with EVENTS_AHEAD_OF_TASK is sent again at once, this many times at most.
QUERY_REFUSALS_RETRIED = 3
TRANSIENT_RPC_STATUSES = frozenset(
    {
        RPCStatusCode.UNAVAILABLE,
        RPCStatusCode.DEADLINE_EXCEEDED,
        RPCStatusCode.RESOURCE_EXHAUSTED,
        RPCStatusCode.ABORTED,
        RPCStatusCode.CANCELLED,  # the server's side of the call ended (our own cancel is not an RPCError)
    }
)

# How long an update keeps being resent while the server refuses it for a failed workflow task.
UPDATE_REFUSED_RETRY_SECONDS = 60.0
# The server's refusal of an update whose workflow task completed without a word on it: sent again.
UNPROCESSED_UPDATE = "UnprocessedUpdate"

_TASK_FAILING_UNKNOWN = "its worker is overloaded, or the workflow fails: see the worker's log"

# A call that needs the conversation's worker (an update, a query) and is not answered within
# ``WORKER_CHECK_SECONDS`` asks the server which workers poll the conversation's task queue, and again
# while it waits (twice as long each time, up to ``WORKER_CHECK_MAX_SECONDS``). None seen within
# ``WORKER_GONE_SECONDS`` (longer than a worker's long poll, which renews about every minute) raises
# ``NoWorkerError``. A busy or restarting worker is waited for.
WORKER_CHECK_SECONDS = 5.0
WORKER_CHECK_MAX_SECONDS = 60.0
WORKER_GONE_SECONDS = 90.0
# ... and still none ``WORKER_CONFIRM_SECONDS`` later: a restarted server's poller list is empty until
# the workers poll again (their reconnect backoff stays under ~10 s).
WORKER_CONFIRM_SECONDS = 20.0


# Temporal's blob size limit: the server refuses a larger payload with an untyped RPC error (or, for
# an update, only once it has reached the workflow). Checked here so the caller gets a typed error.
MAX_PAYLOAD_BYTES = 2 * 1024 * 1024


def check_payload_size(name: str, request: BaseModel) -> None:
    """``ValidationError`` if ``request`` is over ``MAX_PAYLOAD_BYTES``, before it is sent."""
    size = len(request.model_dump_json())
    if size > MAX_PAYLOAD_BYTES:
        raise ValidationError(
            f"{name}: the request is {size / 1_000_000:.1f} MB; Temporal refuses payloads over "
            f"{MAX_PAYLOAD_BYTES / 1_048_576:.0f} MB. Pass large content by reference (a file a tool reads)."
        )


def refusals_waited(timeout: float | None) -> float | None:
    """A wait with a timeout (``run``, ``wait_for_idle``) waits refusals out until then: such a
    conversation is not idle yet. One without a timeout raises after the usual minute: a
    conversation whose task fails for good would otherwise hold it (and ``recover``, ``fork``)
    forever."""
    return math.inf if timeout else None


def namespace_not_found(err: RPCError) -> NamespaceNotFoundError | None:
    """The error to raise when ``err`` says the namespace itself does not exist (a NOT_FOUND the
    server gives for any call in a missing namespace, not only for a missing conversation)."""
    if err.status != RPCStatusCode.NOT_FOUND:
        return None
    for detail in err.grpc_status.details:
        if detail.Is(NamespaceNotFoundFailure.DESCRIPTOR):
            failure = NamespaceNotFoundFailure()
            detail.Unpack(failure)
            return NamespaceNotFoundError(f"namespace {failure.namespace!r} does not exist on this cluster")
    return None


class WorkerWatch:
    """Whether calls that need a worker can still be answered: one per ``AgentClient``, so what the
    server said of a task queue's pollers serves every conversation of that client."""

    def __init__(self, client: Client) -> None:
        self.client = client
        # Task queue -> the latest poll of a worker the server reported (epoch seconds): see
        # ``worker_answered``.
        self._polled: dict[str, float] = {}

    async def worker_answered(
        self, call: Awaitable[R], task_queue: Callable[[], Awaitable[str | None]], what: str
    ) -> R:
        """``call``'s result, or ``NoWorkerError`` once no worker polls ``task_queue()``.

        Raised when no poll is seen at two checks ``WORKER_CONFIRM_SECONDS`` apart (so about 25 s
        after the call with no worker at all). Only a call still unanswered after
        ``WORKER_CHECK_SECONDS`` costs anything, and then little:
        the server is asked for the queue's pollers at intervals that double up to a minute (a
        ``wait_for_idle`` may wait hours for a person), and not while the latest poll it reported
        for that queue, to any call of this client, is within ``WORKER_GONE_SECONDS`` (calls that
        wait on a busy worker, as a burst's do, ask about once a minute between them). The call is
        cancelled when it gives up."""
        task = asyncio.ensure_future(call)
        interval = WORKER_CHECK_SECONDS
        none_since: float | None = None
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=interval)
                if done:
                    return task.result()
                interval = min(2 * interval, WORKER_CHECK_MAX_SECONDS)
                queue = await task_queue()
                if queue is None or await self._worker_polls(queue):
                    none_since = None
                    continue
                # None seen: a server that just restarted knows no poller until the workers' next
                # polls (within their retry backoff), so it must still be so a while later.
                now = time.monotonic()
                if none_since is None:
                    none_since, interval = now, WORKER_CONFIRM_SECONDS
                elif now - none_since >= WORKER_CONFIRM_SECONDS:
                    raise NoWorkerError(
                        f"no worker polls task queue {queue!r} (none in the last {WORKER_GONE_SECONDS:.0f} s): "
                        f"{what}. Start one (`agentcore worker`, or `create_worker` in your process)"
                    )
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    async def _worker_polls(self, queue: str) -> bool:
        """Whether a worker polled ``queue`` within ``WORKER_GONE_SECONDS`` (or the server could not
        say: the caller then waits on, as before)."""
        if time.time() - self._polled.get(queue, 0.0) < WORKER_GONE_SECONDS:
            return True
        try:
            described = await self.client.workflow_service.describe_task_queue(
                DescribeTaskQueueRequest(
                    namespace=self.client.namespace,
                    task_queue=TaskQueue(name=queue, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL),
                    task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
                )
            )
        except RPCError:
            return True
        polled = max((poller.last_access_time.ToSeconds() for poller in described.pollers), default=0)
        self._polled[queue] = polled
        return time.time() - polled < WORKER_GONE_SECONDS


class CallerOfConversations(Protocol):
    """What a conversation's handle (``DurableAgent``) needs of the client that made it (an
    ``AgentClient``): its Temporal client and its worker watch."""

    @property
    def client(self) -> Client: ...

    @property
    def worker_watch(self) -> WorkerWatch: ...


class ConversationCalls:
    """One conversation's updates, queries and signals: watched for a worker, sent again when the
    server refused them without applying them, and their errors mapped to agentcore's."""

    def __init__(self, watch: WorkerWatch, handle: WorkflowHandle[Any, Any]) -> None:
        self.watch = watch
        self.client = watch.client
        self.handle = handle
        self.session_id = handle.id
        self._task_queue_name: str | None = None

    async def task_queue(self) -> str | None:
        """The conversation's task queue (asked once), or None if the server could not say."""
        if self._task_queue_name is None:
            try:
                self._task_queue_name = (await self.handle.describe()).task_queue
            except RPCError:
                return None
        return self._task_queue_name

    async def answered(self, call: Awaitable[R], what: str) -> R:
        """``call``'s result, or ``NoWorkerError`` once no worker polls the conversation's task queue
        (``WorkerWatch.worker_answered``)."""
        return await self.watch.worker_answered(call, self.task_queue, what)

    async def update(
        self,
        name: str,
        request: BaseModel,
        request_id: str,
        result_type: type[T] = Accepted,  # type: ignore[assignment]
        *,
        refused_for: float | None = None,
    ) -> T:
        """``refused_for``: how long a refusal for a failed workflow task is waited out before
        ``WorkflowTaskFailingError`` (``UPDATE_REFUSED_RETRY_SECONDS`` by default)."""
        check_payload_size(name, request)
        if refused_for is None:
            refused_for = UPDATE_REFUSED_RETRY_SECONDS
        deadline = time.monotonic() + refused_for
        delay = 0.2
        resent = False  # after a ROLLING_OVER refusal
        while True:
            sent = time.monotonic()
            try:
                result: T = await self.answered(
                    self.handle.execute_update(name, request, id=request_id or None, result_type=result_type),
                    f"{name} (request id {request_id!r}) stays with the conversation, and a worker that "
                    "starts takes it up",
                )
                return result
            except WorkflowUpdateFailedError as err:
                cause = err.cause
                if isinstance(cause, ApplicationError) and cause.type == UNPROCESSED_UPDATE:
                    # The server gave it to a workflow task whose worker never saw it (the SDK had
                    # taken that task's events from a query task just before): nothing was applied.
                    # Sent again at once, then after 0.2 s, ...
                    if time.monotonic() > deadline:
                        raise AgentError(f"{name}: {cause.message}", code="UPDATE_FAILED") from None
                    if not resent:
                        resent = True
                        continue
                elif isinstance(cause, ApplicationError):
                    # Refused by a run continuing as new: the next run takes it (same request id).
                    if cause.type == ROLLING_OVER and time.monotonic() - sent > UPDATE_REFUSED_RETRY_SECONDS:
                        # A wait that went on (``run``, ``wait_for_idle``) until the roll-over:
                        # sent again as a new call would be.
                        deadline = time.monotonic() + refused_for
                        resent = False
                    if cause.type != ROLLING_OVER or time.monotonic() > deadline:
                        raise AgentError.from_code(cause.type, cause.message) from None
                    if not resent:
                        # The run mostly continues as new in the workflow task that refused this
                        # (once its handlers are done): sent again at once, then after 0.2 s, ...
                        resent = True
                        continue
                else:
                    raise AgentError(str(cause or err), code="UPDATE_FAILED") from None
            except RPCError as err:
                # The server refuses updates while the workflow's last task failed or timed out (a
                # worker was killed holding it, or is overloaded) until a retried task succeeds.
                # The request id makes sending it again safe, so wait that out (bounded).
                if "Workflow Task in failed state" not in err.message:
                    raise self.map_rpc(err) from None
                if time.monotonic() > deadline:
                    raise WorkflowTaskFailingError(
                        f"{name} (request id {request_id!r}) was refused for {refused_for:.0f} s: the "
                        f"conversation's workflow task keeps failing or timing out ({await self._task_failure()}). "
                        "Nothing was applied; sending it again with the same request id is safe"
                    ) from None
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    async def _task_failure(self) -> str:
        """What the conversation's history says of its last failed workflow task (a failure's
        message, or a timeout); the first failure of a series is recorded, its retries are not."""
        try:
            response = await self.client.workflow_service.get_workflow_execution_history_reverse(
                GetWorkflowExecutionHistoryReverseRequest(
                    namespace=self.client.namespace,
                    execution=WorkflowExecution(workflow_id=self.session_id),
                    maximum_page_size=50,
                ),
                timeout=timedelta(seconds=5),
            )
        except RPCError:
            return _TASK_FAILING_UNKNOWN
        for event in response.history.events:
            if event.HasField("workflow_task_failed_event_attributes"):
                message = event.workflow_task_failed_event_attributes.failure.message
                return f"the last failure: {message[:300]}; see the worker's log"
            if event.HasField("workflow_task_timed_out_event_attributes"):
                return (
                    "the last one timed out: its worker did not finish it within the task timeout, "
                    "overloaded or gone"
                )
            if event.HasField("workflow_task_completed_event_attributes"):
                break
        return _TASK_FAILING_UNKNOWN

    async def signal(self, name: str, payload: BaseModel) -> None:
        """Send the signal ``name`` (its size checked first: no handler can refuse a signal)."""
        check_payload_size(name, payload)
        try:
            await self.handle.signal(name, payload)
        except RPCError as err:
            raise self.map_rpc(err) from None

    async def query(
        self,
        name: str,
        arg: BaseModel | None,
        result_type: type[T],
        rpc_timeout: timedelta | None = None,
    ) -> T:
        """The query ``name``'s answer, sent again (``QUERY_REFUSALS_RETRIED`` times at most) while
        it is refused for history events ahead of their workflow task."""
        for attempt in range(QUERY_REFUSALS_RETRIED + 1):
            query = (
                self.handle.query(name, result_type=result_type, rpc_timeout=rpc_timeout)
                if arg is None
                else self.handle.query(name, arg, result_type=result_type, rpc_timeout=rpc_timeout)
            )
            try:
                result: T = await self.answered(query, f"{name} has no answer")
                return result
            except RPCError as err:
                raise self.map_rpc(err) from None
            except WorkflowQueryFailedError as err:
                # Refused once, changing nothing: it came with history events ahead of their workflow
                # task (``workflows/task_guard.py``). Sent again, it waits for that task.
                if EVENTS_AHEAD_OF_TASK not in str(err) or attempt == QUERY_REFUSALS_RETRIED:
                    raise
        raise AssertionError("unreachable")

    def map_rpc(self, err: RPCError) -> Exception:
        """The error to raise for ``err``: NOT_FOUND means no such conversation (or namespace)."""
        if err.status == RPCStatusCode.NOT_FOUND:
            return namespace_not_found(err) or AgentNotFoundError(
                f"no running conversation with session id {self.session_id!r}"
            )
        return err
