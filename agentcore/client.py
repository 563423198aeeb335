"""``AgentClient``: start, attach to, list and recover durable conversations.

    agents = await AgentClient.connect(task_queue="agentcore")   # TEMPORAL_* variables / profile file
    agent = await agents.start("support-42", AgentOptions(model=model, tools=["search_wines"]))
    await agent.prompt("Which Rioja do we have under $30?")
    await agent.wait_for_idle()

A ``DurableAgent`` has the in-process ``Agent``'s methods; each is a Temporal update, signal or query
on the conversation's workflow. Refused commands raise the same typed errors as in-process
(``AgentBusyError``, ``InvalidMessageRoleError``, ``RateLimitError``, ...); a session that does not
exist raises ``AgentNotFoundError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import math
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

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
    WithStartWorkflowOperation,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDConflictPolicy
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from .approvals import PendingApproval, undecided_requests
from .compaction import CompactionSettings
from .errors import (
    EVENTS_AHEAD_OF_TASK,
    EXECUTION_ABORTED,
    AgentError,
    AgentNotFoundError,
    EncryptionKeyError,
    NamespaceNotFoundError,
    NoWorkerError,
    ValidationError,
    WorkflowTaskFailingError,
)
from .events import AGENT_EVENT_ADAPTER, AgentEvent, CompactionEndEvent
from .messages import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    UserMessage,
    describe_validation_error,
)
from .model import Model, ThinkingLevel, parse_thinking_level
from .protocol import (
    EVENTS_TOPIC,
    ROLLING_OVER,
    UPDATE_CLEAR_QUEUES,
    UPDATE_FOLLOW_UP,
    UPDATE_STEER,
    WORKFLOW_NAME,
    AbortRequest,
    Accepted,
    ApprovalsState,
    ApproveRequest,
    BranchRequest,
    BranchResult,
    ClearQueuesRequest,
    CommandRequest,
    CompactRequest,
    ConversationConfig,
    ConversationInput,
    ConversationLimits,
    DenyRequest,
    DurableState,
    Idle,
    IdleRequest,
    LabelRequest,
    MessagesPage,
    MessagesQuery,
    PromptRequest,
    QueuedMessage,
    QueueName,
    QueuesState,
    SessionNameRequest,
    SetModelRequest,
    SetSystemPromptRequest,
    SetThinkingLevelRequest,
    SetToolsRequest,
)
from .runtime import AbortSignal
from .schedules import (
    UPDATE_ADD_SCHEDULE,
    UPDATE_DELETE_SCHEDULE,
    AddScheduleRequest,
    DeleteScheduleRequest,
    RecurringMessage,
    check_schedule,
    parse_every,
)
from .search_attributes import AGENT_MODEL, AGENT_SESSION_ID, AGENT_STATUS
from .session import (
    GetEntriesOptions,
    JsonlSessionStorage,
    SessionPaths,
    SessionStats,
    check_session_id,
)
from .session.branching import copy_session, fork_session
from .state import AgentOptions
from .temporal.connect import ConnectionSettings, ensure_data_converter, search_attribute_keys
from .temporal.payloads import PAYLOADS_SUBDIR
from .tools import AgentTool, ToolSpec
from .transcript import newest_within
from .wakeups import (
    CancelWakeupRequest,
    ScheduleWakeupRequest,
    Wakeup,
    aware,
    check_note,
    due_time,
    pending_wakeups,
)

logger = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)
R = TypeVar("R")
Listener = Callable[[AgentEvent, AbortSignal], Any]
PromptInput = str | Message | Sequence[Message]

# ``DurableAgent.events``: how long a subscription keeps polling again through failures that pass
# (the server restarting, overloaded), and its pauses in between.
RECONNECT_TIMEOUT = timedelta(minutes=2)
RECONNECT_FIRST_PAUSE = 0.1
RECONNECT_MAX_PAUSE = 2.0
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


def _now_ms() -> int:
    return int(time.time() * 1000)


def _new_id() -> str:
    return uuid.uuid4().hex


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


def user_messages(value: PromptInput, images: Sequence[ImageContent] | None = None) -> list[UserMessage]:
    """Turn a prompt argument into validated user messages (text plus images, a message, a list)."""
    try:
        messages: list[UserMessage] = []
        if isinstance(value, str):
            content: list[TextContent | ImageContent] = [TextContent(text=value), *(images or [])]
            messages.append(UserMessage(content=content, timestamp=_now_ms()))
        items = [] if isinstance(value, str) else [value] if isinstance(value, BaseModel) else list(value)
        for item in items:
            if not isinstance(item, UserMessage):
                role = getattr(item, "role", type(item).__name__)
                from .errors import InvalidMessageRoleError

                raise InvalidMessageRoleError(f"a prompt takes user messages, not {role!r}")
            messages.append(item)
        # Validate again from plain data: a message or image built with ``model_construct`` (or
        # mutated after construction) skips pydantic's checks, and the workflow would refuse it with
        # an untyped decoding error instead.
        return [UserMessage.model_validate(message.model_dump()) for message in messages]
    except AgentError:
        raise
    except Exception as exc:
        raise ValidationError(describe_validation_error(exc)) from None


def _tool_names(tools: Sequence[AgentTool | ToolSpec | str]) -> list[str]:
    return [tool if isinstance(tool, str) else tool.name for tool in tools]


class SessionSummary(BaseModel):
    session_id: str
    run_id: str | None = None
    status: str
    start_time: float | None = None
    model: str | None = None
    agent_status: str | None = None
    message_count: int | None = None
    cost_usd: float | None = None


class AgentClient:
    def __init__(
        self,
        client: Client,
        *,
        task_queue: str = "agentcore",
        sessions_dir: str | Path | None = None,
        limits: ConversationLimits | None = None,
        payloads_dir: str | Path | None = None,
    ) -> None:
        # A prompt of 256 KB or more (an image, say) goes to the workers' payload store when this
        # client can reach it (default: beside the sessions); without one it is sent inline.
        if payloads_dir is None and sessions_dir is not None:
            payloads_dir = Path(sessions_dir) / PAYLOADS_SUBDIR
        self.client = ensure_data_converter(client, payloads_dir)
        self.task_queue = task_queue
        self.sessions_dir = Path(sessions_dir) if sessions_dir is not None else None
        self.limits = limits or ConversationLimits()
        self._search_attributes: bool | None = None
        # Task queue -> the latest poll of a worker the server reported (epoch seconds): see
        # ``_worker_answered``.
        self._polled: dict[str, float] = {}

    @classmethod
    async def connect(
        cls,
        *,
        task_queue: str = "agentcore",
        sessions_dir: str | Path | None = None,
        limits: ConversationLimits | None = None,
        settings: ConnectionSettings | None = None,
        **client_options: Any,
    ) -> AgentClient:
        """An ``AgentClient`` on a new connection made as every agentcore process makes one
        (``agentcore.temporal.connect``: the ``TEMPORAL_*`` variables and the ``temporal`` CLI's
        profile file, ``settings`` over both; ``client_options`` go to ``Client.connect``)."""
        from .temporal.connect import connect

        client = await connect(settings=settings, **client_options)
        return cls(client, task_queue=task_queue, sessions_dir=sessions_dir, limits=limits)

    async def _uses_search_attributes(self) -> bool:
        # Upserting an attribute the server does not know fails the workflow task, so only use them
        # when the namespace has them registered (the embedded server and the compose setup do).
        if self._search_attributes is None:
            try:
                from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest

                response = await self.client.operator_service.list_search_attributes(
                    ListSearchAttributesRequest(namespace=self.client.namespace)
                )
                self._search_attributes = all(
                    name in response.custom_attributes for name in search_attribute_keys()
                )
            except RPCError:
                self._search_attributes = False
        return self._search_attributes

    async def start(
        self,
        session_id: str | None = None,
        options: AgentOptions | None = None,
        *,
        metadata: dict[str, Any] | None = None,
        limits: ConversationLimits | None = None,
        compaction: CompactionSettings | None = None,
        prompt: PromptInput | None = None,
        **fields: Any,
    ) -> DurableAgent:
        """Start a new conversation (a workflow with id ``session_id``) from ``AgentOptions``.

        ``limits`` (SPEC-9.1 limits, timeouts) and ``compaction`` (when and how much to compact)
        default to the client's and to ``CompactionSettings()``. With ``prompt``, the conversation
        starts with that prompt's run, as ``agent.prompt(prompt)`` right after would, in one call to
        the server (update-with-start): the workflow's first task takes the prompt. Returns once the
        prompt is accepted; a refused prompt raises its typed error, the conversation started."""
        messages = user_messages(prompt) if prompt is not None else None
        options = options or AgentOptions(**fields)
        session_id = check_session_id(session_id or _new_id())  # it names the session file too
        config = ConversationConfig(
            system_prompt=options.system_prompt,
            model=options.model,
            thinking_level=options.thinking_level,
            tool_names=_tool_names(options.tools),
            steering_mode=options.steering_mode,
            follow_up_mode=options.follow_up_mode,
            tool_execution=options.tool_execution,
            max_tokens=options.max_tokens,
            temperature=options.temperature,
            compaction=compaction or CompactionSettings(),
        )
        inp = ConversationInput(
            session_id=session_id,
            config=config,
            limits=limits or self.limits,
            messages=list(options.messages),
            session_metadata=dict(metadata or {}),
        )
        if messages is not None:
            request_id = _new_id()
            request = PromptRequest(id=request_id, messages=messages)
            _check_payload_size("prompt", request)
            return await self._start(inp, ("prompt", request))
        return await self._start(inp)

    async def _start(
        self, inp: ConversationInput, update: tuple[str, PromptRequest] | None = None
    ) -> DurableAgent:
        inp.search_attributes = await self._uses_search_attributes()
        search_attributes = None
        if inp.search_attributes:
            keys = search_attribute_keys()
            search_attributes = TypedSearchAttributes(
                [
                    SearchAttributePair(keys[AGENT_SESSION_ID], inp.session_id),
                    SearchAttributePair(
                        keys[AGENT_MODEL], f"{inp.config.model.provider}/{inp.config.model.id}"
                    ),
                    SearchAttributePair(keys[AGENT_STATUS], "idle"),
                ]
            )
        start: dict[str, Any] = {
            "args": [inp, None],
            "id": inp.session_id,
            "task_queue": self.task_queue,
            "id_conflict_policy": WorkflowIDConflictPolicy.FAIL,
            "search_attributes": search_attributes,
            "static_summary": f"agent {inp.config.model.provider}/{inp.config.model.id}",
            "task_timeout": timedelta(seconds=inp.limits.workflow_task_timeout_seconds),
        }
        try:
            if update is None:
                handle = await self.client.start_workflow(WORKFLOW_NAME, **start)
                return DurableAgent(self, handle)
            name, request = update
            operation: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
                WORKFLOW_NAME, **start
            )
            try:
                updating = self.client.execute_update_with_start_workflow(
                    name, request, start_workflow_operation=operation, id=request.id, result_type=Accepted
                )
                await self._worker_answered(
                    updating,
                    self._own_task_queue,
                    f"the conversation started, and its prompt (request id {request.id!r}) stays with it "
                    "for a worker that starts to take up",
                )
            except WorkflowUpdateFailedError as err:  # the prompt refused, the conversation started
                cause = err.cause
                if isinstance(cause, ApplicationError):
                    raise AgentError.from_code(cause.type, cause.message) from None
                raise AgentError(str(cause or err), code="UPDATE_FAILED") from None
            except Exception:
                # The start failed too, and its handle holds the same error; or (``NoWorkerError``)
                # it started and the cancelled call left the handle cancelled. Taken either way, or
                # asyncio reports it as never retrieved.
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await operation.workflow_handle()
                raise
            return DurableAgent(self, await operation.workflow_handle())
        except WorkflowAlreadyStartedError:
            raise AgentError(f"session {inp.session_id!r} is already running", code="AGENT_EXISTS") from None

    async def _worker_answered(
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

    async def _own_task_queue(self) -> str:
        return self.task_queue

    async def attach(self, session_id: str) -> DurableAgent:
        """A handle on a running conversation; ``AgentNotFoundError`` if there is none."""
        handle = self.client.get_workflow_handle(check_session_id(session_id))
        try:
            description = await handle.describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise namespace_not_found(err) or AgentNotFoundError(
                    f"no conversation with session id {session_id!r}"
                ) from None
            raise
        if description.status != WorkflowExecutionStatus.RUNNING:
            raise AgentNotFoundError(
                f"conversation {session_id!r} is not running ({description.status.name if description.status else '?'}); "
                "recover it from its session file"
            )
        return DurableAgent(self, handle)

    async def list(self, query: str | None = None, *, limit: int = 100) -> list[SessionSummary]:
        """Conversations, newest first: status, and model / message count / cost where indexed.
        One row each: the runs a conversation continued-as-new from are left out."""
        clause = f'WorkflowType = "{WORKFLOW_NAME}" AND ExecutionStatus != "ContinuedAsNew"' + (
            f" AND ({query})" if query else ""
        )
        summaries = []
        async for execution in self.client.list_workflows(clause, limit=limit):
            attributes = {key.name: value for key, value in execution.typed_search_attributes}
            summaries.append(
                SessionSummary(
                    session_id=execution.id,
                    run_id=execution.run_id,
                    status=execution.status.name if execution.status else "UNKNOWN",
                    start_time=execution.start_time.timestamp() if execution.start_time else None,
                    model=attributes.get(AGENT_MODEL),
                    agent_status=attributes.get(AGENT_STATUS),
                    message_count=attributes.get("AgentMessageCount"),
                    cost_usd=attributes.get("AgentCostUsd"),
                )
            )
        return summaries

    async def fork(self, session_id: str, from_entry_id: str, new_session_id: str) -> DurableAgent:
        """A new conversation whose context is ``session_id``'s path up to ``from_entry_id``.

        A new workflow and a new session file (its header names the parent session); the original goes
        on untouched. Needs ``sessions_dir`` (the directory the workers write sessions to)."""
        if self.sessions_dir is None:
            raise ValidationError("fork needs AgentClient(sessions_dir=...), the workers' sessions directory")
        source = await self.attach(session_id)
        await source.wait_for_idle()  # everything the workflow holds is in the file
        # Absolute paths inside the root: a relative sessions directory (the default
        # ``.agentcore/sessions``) would otherwise be joined to the root a second time.
        paths = SessionPaths(self.sessions_dir)
        target = paths.path_for(new_session_id)
        fork_session(
            paths.path_for(session_id), from_entry_id, target, session_id=new_session_id, root=paths
        ).close()
        return await self.recover(target, session_id=new_session_id)

    async def recover(
        self, session_path: str | Path, *, session_id: str | None = None, options: AgentOptions | None = None
    ) -> DurableAgent:
        """Start a new workflow from a JSONL session file (SPEC-11.1 session recovery).

        The conversation continues at the file's leaf with the model, thinking level, tools and system
        prompt it records. The file is placed in the sessions directory the workers use, under the
        session id (``session_id`` or the id in its header): by this client when it was given that
        directory (``sessions_dir``), else by a worker, which must then be able to read
        ``session_path`` (``SessionNotFoundError`` / ``SessionExistsError`` if it cannot place it).
        """
        path = Path(session_path)
        with JsonlSessionStorage.open(path) as storage:
            header = storage.get_metadata()
            context = storage.build_context()
            stats = storage.get_session_stats()
            leaf_id = storage.get_leaf_id()
            wakeups = pending_wakeups(storage.find_entries("custom"))
            # Calls that waited for approval when the file was last written: asked again.
            undecided = undecided_requests(
                storage.get_entries(GetEntriesOptions(on_path=True, type="custom"))
            )
        # Everything is checked before the file is copied: a refused recovery writes nothing, and a
        # header id such as "../../x" can never place the copy outside the sessions directory.
        session_id = check_session_id(session_id or header.id)
        model = context.model or (options.model if options else None)
        if model is None:
            raise ValidationError("the session file records no model; pass options with one")
        if self.sessions_dir is not None:
            self.sessions_dir.mkdir(parents=True, exist_ok=True)
            target = SessionPaths(self.sessions_dir).path_for(session_id)
            if target.resolve() != path.resolve():
                try:
                    copy_session(path, target, session_id)  # its header names the new session
                except FileExistsError:
                    raise AgentError(
                        f"{target} already exists; pass another session_id", code="AGENT_EXISTS"
                    ) from None
        limits = self.limits
        messages = newest_within(
            context.messages, limits.carried_message_bytes, lambda m: len(m.model_dump_json())
        )
        first_index = len(context.messages) - len(messages)
        entry_ids: list[str | None] = list(context.message_entry_ids[first_index:])
        config = ConversationConfig(
            system_prompt=context.system_prompt or "",
            model=model,
            thinking_level=context.thinking_level,
            tool_names=list(context.active_tools or []),
            **(
                {}
                if options is None
                else {"steering_mode": options.steering_mode, "follow_up_mode": options.follow_up_mode}
            ),
        )
        inp = ConversationInput(
            session_id=session_id,
            config=config,
            limits=limits,
            messages=messages,
            message_entry_ids=entry_ids,
            first_message_index=first_index,
            leaf_id=leaf_id,
            session_created=True,
            session_metadata=dict(header.metadata),
            stats=stats,
            import_session_from=None if self.sessions_dir is not None else str(path.resolve()),
            wakeups=wakeups,
            pending_approvals=_unanswered(undecided, messages),
        )
        agent = await self._start(inp)
        if inp.import_session_from is not None:
            await agent._imported()
        return agent


def _unanswered(requests: list[PendingApproval], messages: list[Message]) -> list[PendingApproval]:
    """The requests for tool calls of the last message (an assistant's) that nothing answered."""
    last = messages[-1] if messages else None
    if not isinstance(last, AssistantMessage):
        return []
    calls = {call.id for call in last.tool_calls}
    return [request for request in requests if request.tool_call_id in calls]


# How long an update keeps being resent while the server refuses it for a failed workflow task.
UPDATE_REFUSED_RETRY_SECONDS = 60.0
# The server's refusal of an update whose workflow task completed without a word on it: sent again.
UNPROCESSED_UPDATE = "UnprocessedUpdate"


def _refusals_waited(timeout: float | None) -> float | None:
    """A wait with a timeout (``run``, ``wait_for_idle``) waits refusals out until then: such a
    conversation is not idle yet. One without a timeout raises after the usual minute: a
    conversation whose task fails for good would otherwise hold it (and ``recover``, ``fork``)
    forever."""
    return math.inf if timeout else None


_TASK_FAILING_UNKNOWN = "its worker is overloaded, or the workflow fails: see the worker's log"


# How long ``terminate`` waits for a conversation to name its schedules: a worker that runs it answers
# in milliseconds; one that does not (none running, or its tasks failing) must not stop a terminate.
TERMINATE_ASK_SECONDS = 5.0

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


def _check_payload_size(name: str, request: BaseModel) -> None:
    size = len(request.model_dump_json())
    if size > MAX_PAYLOAD_BYTES:
        raise ValidationError(
            f"{name}: the request is {size / 1_000_000:.1f} MB; Temporal refuses payloads over "
            f"{MAX_PAYLOAD_BYTES / 1_048_576:.0f} MB. Pass large content by reference (a file a tool reads)."
        )


class _RunSignal:
    """The ``signal`` a durable listener gets with each event (SPEC-5.2): the abort of the run the
    event belongs to, as the in-process ``Agent`` passes its run's signal.

    A new run (``agent_start``) gets a fresh signal. It fires when this handle's ``abort`` is called
    during the run, and, for an abort sent from elsewhere, when the events show it (an assistant
    message or a tool result that ended aborted)."""

    def __init__(self, live: set[AbortSignal]) -> None:
        self._live = live
        self._current = AbortSignal()
        live.add(self._current)

    def for_event(self, event: AgentEvent) -> AbortSignal:
        if event.type == "agent_start":
            self.close()
            self._current = AbortSignal()
            self._live.add(self._current)
        signal = self._current
        if _shows_abort(event):
            signal.abort()
        if event.type == "agent_end":
            self._live.discard(signal)  # the run is over: a later abort is not this run's
        return signal

    def close(self) -> None:
        self._live.discard(self._current)


def _shows_abort(event: AgentEvent) -> bool:
    if event.type == "message_end" and isinstance(event.message, AssistantMessage):
        return event.message.stop_reason == "aborted"
    if event.type == "tool_execution_end" and event.result is not None:
        details = event.result.details
        return isinstance(details, dict) and details.get("error_code") == EXECUTION_ABORTED
    return False


class DurableAgent:
    """A durable conversation, with the in-process ``Agent``'s methods."""

    def __init__(self, agents: AgentClient, handle: WorkflowHandle[Any, Any]) -> None:
        self.agents = agents
        self.client = agents.client
        self.handle = handle
        self.session_id = handle.id
        self._task_queue_name: str | None = None
        self._subscriptions: set[asyncio.Task[None]] = set()
        # The signals this handle's listeners hold for the run they are seeing (see ``_RunSignal``).
        self._run_signals: set[AbortSignal] = set()

    # ------------------------------------------------------------------------------- plumbing

    async def _imported(self) -> None:
        """Return once a worker placed the recovered session file; its typed error if it could not."""
        try:
            await self.wait_for_idle()
        except NoWorkerError:
            raise  # started; a worker that starts places the file
        except AgentError:
            try:
                await self.handle.result()
            except WorkflowFailureError as err:
                if isinstance(err.cause, ApplicationError):
                    raise AgentError.from_code(err.cause.type, err.cause.message) from None
            raise

    async def _task_queue(self) -> str | None:
        """The conversation's task queue (asked once), or None if the server could not say."""
        if self._task_queue_name is None:
            try:
                self._task_queue_name = (await self.handle.describe()).task_queue
            except RPCError:
                return None
        return self._task_queue_name

    async def _update(
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
        _check_payload_size(name, request)
        if refused_for is None:
            refused_for = UPDATE_REFUSED_RETRY_SECONDS
        deadline = time.monotonic() + refused_for
        delay = 0.2
        resent = False  # after a ROLLING_OVER refusal
        while True:
            sent = time.monotonic()
            try:
                result: T = await self.agents._worker_answered(
                    self.handle.execute_update(name, request, id=request_id or None, result_type=result_type),
                    self._task_queue,
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
                    raise self._map_rpc(err) from None
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

    async def _signal(self, name: str, payload: BaseModel) -> None:
        _check_payload_size(name, payload)
        try:
            await self.handle.signal(name, payload)
        except RPCError as err:
            raise self._map_rpc(err) from None

    async def _query(
        self,
        name: str,
        arg: BaseModel | None,
        result_type: type[T],
        rpc_timeout: timedelta | None = None,
    ) -> T:
        for attempt in range(QUERY_REFUSALS_RETRIED + 1):
            query = (
                self.handle.query(name, result_type=result_type, rpc_timeout=rpc_timeout)
                if arg is None
                else self.handle.query(name, arg, result_type=result_type, rpc_timeout=rpc_timeout)
            )
            try:
                result: T = await self.agents._worker_answered(
                    query, self._task_queue, f"{name} has no answer"
                )
                return result
            except RPCError as err:
                raise self._map_rpc(err) from None
            except WorkflowQueryFailedError as err:
                # Refused once, changing nothing: it came with history events ahead of their workflow
                # task (``workflows/task_guard.py``). Sent again, it waits for that task.
                if EVENTS_AHEAD_OF_TASK not in str(err) or attempt == QUERY_REFUSALS_RETRIED:
                    raise
        raise AssertionError("unreachable")

    def _map_rpc(self, err: RPCError) -> Exception:
        if err.status == RPCStatusCode.NOT_FOUND:
            return namespace_not_found(err) or AgentNotFoundError(
                f"no running conversation with session id {self.session_id!r}"
            )
        return err

    # ------------------------------------------------------------------------------- commands

    async def prompt(
        self, value: PromptInput, images: Sequence[ImageContent] | None = None, *, id: str | None = None
    ) -> Accepted:
        """Start a run. Returns once accepted (not when the run ends: ``wait_for_idle`` for that).

        ``id`` makes the call idempotent: a repeat with the same id is applied once."""
        messages = user_messages(value, images)
        request_id = id or _new_id()
        return await self._update("prompt", PromptRequest(id=request_id, messages=messages), request_id)

    async def run(
        self,
        value: PromptInput,
        images: Sequence[ImageContent] | None = None,
        *,
        id: str | None = None,
        timeout: float | None = None,
    ) -> Idle:
        """Start a run and wait for its end: one update where ``prompt`` + ``wait_for_idle`` are two.
        Returns the run's messages, its answer last (``Idle.messages`` from ``Idle.start``, within
        the answer's budget; ``get_messages`` pages on).

        Returned as soon as the run ends, as a subscriber sees ``agent_end``: the run is in the
        conversation's history by then, and its entries reach the session file within a second
        or with the next run (``wait_for_idle`` waits for the file as well).

        ``id`` makes the call idempotent: a repeat is applied once (one that reaches the
        conversation after it continued as new returns ``status="duplicate"`` and no messages).
        Raises ``AgentBusyError`` if a run is active, and ``TimeoutError`` when ``timeout`` (seconds)
        passes first (the run goes on)."""
        messages = user_messages(value, images)
        request_id = id or _new_id()
        request = PromptRequest(id=request_id, messages=messages)
        return await self._waiting(
            self._update("prompt_and_wait", request, request_id, Idle, refused_for=_refusals_waited(timeout)),
            timeout,
        )

    async def continue_(self, *, id: str | None = None) -> Accepted:
        request_id = id or _new_id()
        return await self._update("continue", CommandRequest(id=request_id), request_id)

    async def reset(self, *, id: str | None = None) -> Accepted:
        request_id = id or _new_id()
        return await self._update("reset", CommandRequest(id=request_id), request_id)

    async def set_model(self, model: Model) -> Accepted:
        request_id = _new_id()
        return await self._update("set_model", SetModelRequest(id=request_id, model=model), request_id)

    async def set_thinking_level(self, level: ThinkingLevel | str) -> Accepted:
        request_id = _new_id()
        request = SetThinkingLevelRequest(id=request_id, thinking_level=parse_thinking_level(level))
        return await self._update("set_thinking_level", request, request_id)

    async def set_tools(self, tools: Sequence[AgentTool | ToolSpec | str]) -> Accepted:
        request_id = _new_id()
        return await self._update(
            "set_tools", SetToolsRequest(id=request_id, tools=_tool_names(tools)), request_id
        )

    async def set_system_prompt(self, system_prompt: str) -> Accepted:
        request_id = _new_id()
        request = SetSystemPromptRequest(id=request_id, system_prompt=system_prompt)
        return await self._update("set_system_prompt", request, request_id)

    async def compact(self, instructions: str | None = None, *, id: str | None = None) -> CompactionEndEvent:
        """Summarise the older part of the conversation now (refused while a run is active)."""
        request_id = id or _new_id()
        request = CompactRequest(id=request_id, instructions=instructions)
        return await self._update("compact", request, request_id, CompactionEndEvent)

    async def branch(
        self,
        target_entry_id: str | None,
        *,
        summary: str | None = None,
        summarize: bool = False,
        instructions: str | None = None,
    ) -> BranchResult:
        """Go back to an earlier entry (``get_messages().entry_ids`` names them; None: the start).

        The abandoned branch stays in the session file; ``summary`` (or ``summarize=True``, which asks
        the model) records what was learned there so the conversation keeps it."""
        request_id = _new_id()
        request = BranchRequest(
            id=request_id,
            target_entry_id=target_entry_id,
            summary=summary,
            summarize=summarize,
            instructions=instructions,
        )
        return await self._update("branch", request, request_id, BranchResult)

    async def set_label(self, entry_id: str, label: str | None) -> Accepted:
        """Name an entry (a bookmark); an empty or None label clears it."""
        request_id = _new_id()
        return await self._update(
            "set_label", LabelRequest(id=request_id, target_entry_id=entry_id, label=label), request_id
        )

    async def set_session_name(self, name: str) -> Accepted:
        request_id = _new_id()
        return await self._update(
            "set_session_name", SessionNameRequest(id=request_id, name=name), request_id
        )

    async def steer(self, message: str | UserMessage, *, id: str | None = None) -> str:
        """Queue a steering message (taken after the current turn); returns its id.

        Raises ``RateLimitError`` over a SPEC-9.1 limit; nothing is then queued or recorded."""
        item = QueuedMessage(id=id or _new_id(), message=user_messages(message)[0])
        await self._update(UPDATE_STEER, item, item.id)
        return item.id

    async def follow_up(self, message: str | UserMessage, *, id: str | None = None) -> str:
        """Queue a follow-up (taken when the agent would otherwise stop); returns its id.

        Raises ``RateLimitError`` over a SPEC-9.1 limit; nothing is then queued or recorded."""
        item = QueuedMessage(id=id or _new_id(), message=user_messages(message)[0])
        await self._update(UPDATE_FOLLOW_UP, item, item.id)
        return item.id

    async def approve(self, tool_call_id: str, args: dict[str, Any] | None = None) -> Accepted:
        """Let a tool call waiting for approval run; with ``args`` it runs with those instead.

        Refused before anything is written: ``ApprovalNotFoundError`` (no such call waits),
        ``ApprovalAlreadyResolvedError`` (decided otherwise), ``InvalidParametersError`` (``args``
        fail the tool's schema). Approving again the same way answers ``status="duplicate"``."""
        holder = await self._sub_agent_holding(tool_call_id)
        if holder is not None:
            return await holder.approve(tool_call_id, args)
        request_id = _new_id()
        request = ApproveRequest(id=request_id, tool_call_id=tool_call_id, args=args)
        return await self._update("approve", request, request_id)

    async def deny(self, tool_call_id: str, reason: str = "") -> Accepted:
        """Refuse a tool call waiting for approval: its result is a ``TOOL_DENIED`` error the model
        reads, with ``reason``. Refused as ``approve`` is."""
        holder = await self._sub_agent_holding(tool_call_id)
        if holder is not None:
            return await holder.deny(tool_call_id, reason)
        request_id = _new_id()
        request = DenyRequest(id=request_id, tool_call_id=tool_call_id, reason=reason)
        return await self._update("deny", request, request_id)

    async def _sub_agent_holding(self, tool_call_id: str) -> DurableAgent | None:
        """The sub-agent conversation whose call ``tool_call_id`` is (as this conversation lists it),
        or None when it is this one's own: a decision goes to the conversation that waits, whose
        Update checks it (the edited arguments against its tool's schema) and answers."""
        pending = await self.pending_approvals()
        if any(p.tool_call_id == tool_call_id and p.session_id in (None, self.session_id) for p in pending):
            return None
        for p in pending:
            if p.tool_call_id == tool_call_id and p.session_id:
                return DurableAgent(self.agents, self.client.get_workflow_handle(p.session_id))
        return None

    async def pending_approvals(self) -> list[PendingApproval]:
        """The tool calls waiting for a person, oldest first: this conversation's own, then its
        sub-agents' (``session_id`` names the sub-agent's conversation; approve and deny route there)."""
        return (await self._query("get_approvals", None, ApprovalsState)).pending

    async def abort(self, reason: str | None = None) -> None:
        await self._signal("abort", AbortRequest(id=_new_id(), reason=reason))
        for signal in list(self._run_signals):
            signal.abort(reason)

    async def wait_for_idle(self, timeout: float | None = None, *, since: int | None = None) -> Idle:
        """Wait until no run is active and every entry is in the session file.

        ``since``: a message index (``prompt``'s ``Accepted.message_count``); the result then holds the
        messages from there on (``Idle.messages``, from ``Idle.start``; within the answer's budget,
        ``get_messages`` pages on), the run's answer last: no ``get_state`` needed to read it.
        Raises ``TimeoutError`` when ``timeout`` (seconds) passes first; the conversation goes on.
        While the conversation's workflow task keeps failing, the server refuses the call: it is sent
        again until ``timeout``, and without one for a minute, then ``WorkflowTaskFailingError``."""
        request_id = _new_id()
        request = IdleRequest(id=request_id, since=since)
        return await self._waiting(
            self._update("wait_for_idle", request, request_id, Idle, refused_for=_refusals_waited(timeout)),
            timeout,
        )

    async def _waiting(self, waiting: Awaitable[Idle], timeout: float | None) -> Idle:
        if not timeout:
            return await waiting
        task = asyncio.ensure_future(waiting)
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if task in done:
            return task.result()
        task.cancel()
        # The cancelled update call ends with the SDK's own error: the caller asked for a timeout.
        await asyncio.gather(task, return_exceptions=True)
        raise TimeoutError(f"{self.session_id!r} was not idle after {timeout} s")

    async def schedule_wakeup(
        self, note: str, *, at: datetime | None = None, after: timedelta | None = None
    ) -> str:
        """Run the conversation again at ``at`` (a datetime; naive means local time) or ``after`` a
        while, with a user message carrying ``note`` (a follow-up if a run is going then). Returns
        the wake-up's id. A workflow timer: it survives worker restarts and continue-as-new, and one
        that came due while no worker ran fires (once) when one is back. Refused: a time not in the
        future (``WakeupInPastError``), more than ``limits.max_pending_wakeups`` pending."""
        due_time(datetime.now(UTC), at, after)  # refused here first: no round trip for a bad call
        request_id = _new_id()
        request = ScheduleWakeupRequest(
            id=request_id,
            note=check_note(note),
            due_at=aware(at) if at is not None else None,
            # Relative to the workflow's clock, not this process's.
            delay_seconds=after.total_seconds() if after is not None else None,
        )
        wakeup = await self._update("schedule_wakeup", request, request_id, Wakeup)
        return wakeup.id

    async def cancel_wakeup(self, wakeup_id: str) -> None:
        """Cancel a pending wake-up; ``WakeupNotFoundError`` if none has that id."""
        request_id = _new_id()
        await self._update(
            "cancel_wakeup", CancelWakeupRequest(id=request_id, wakeup_id=wakeup_id), request_id
        )

    async def schedule(
        self, text: str, *, every: timedelta | str | None = None, cron: str | None = None
    ) -> RecurringMessage:
        """Send ``text`` to this conversation ``every`` interval (a timedelta, or ``"1h"``, ``"15m"``)
        or on a ``cron`` expression, through a Temporal Schedule the conversation makes (visible and
        pausable in the Web UI; overlapping runs skipped, a missed one caught up within a minute). Each
        message runs the conversation as a fired wake-up does. ``reset`` deletes the conversation's
        schedules; a schedule whose conversation is gone deletes itself when it next fires."""
        interval = parse_every(every) if isinstance(every, str) else every
        request = AddScheduleRequest(
            id=f"{self.session_id}.schedule.{_new_id()[:8]}",
            text=text,
            every_seconds=interval.total_seconds() if interval is not None else None,
            cron=cron,
        )
        check_schedule(request)
        return await self._update(UPDATE_ADD_SCHEDULE, request, request.id, RecurringMessage)

    async def list_schedules(self) -> list[RecurringMessage]:
        """This conversation's schedules (``describe`` their Temporal Schedule for the next times)."""
        return (await self.get_state()).schedules

    async def delete_schedule(self, schedule_id: str) -> None:
        """Delete one of this conversation's schedules; ``ScheduleNotFoundError`` if it has no such one."""
        request_id = _new_id()
        request = DeleteScheduleRequest(id=request_id, schedule_id=schedule_id)
        await self._update(UPDATE_DELETE_SCHEDULE, request, request_id)

    async def terminate(self, reason: str | None = None) -> None:
        """End the conversation for good, deleting its schedules first (its session file stays:
        ``AgentClient.recover`` starts it again). To stop a turn, ``abort`` instead.

        A conversation that cannot say which schedules it has (no worker runs it, or its workflow
        tasks fail) is terminated all the same after ``TERMINATE_ASK_SECONDS``; its schedules then
        delete themselves when they next fire."""
        ask = timedelta(seconds=TERMINATE_ASK_SECONDS)
        try:
            schedules = (await self._query("get_state", None, DurableState, ask)).schedules
        except (AgentNotFoundError, NamespaceNotFoundError):
            raise
        except (RPCError, WorkflowQueryFailedError, EncryptionKeyError, NoWorkerError):
            schedules = []
        for item in schedules:
            try:
                await self.client.get_schedule_handle(item.id).delete()
            except RPCError as err:
                if err.status != RPCStatusCode.NOT_FOUND:
                    raise
        try:
            await self.handle.terminate(reason=reason or "terminated")
        except RPCError as err:
            raise self._map_rpc(err) from None

    # ------------------------------------------------------------------------------- queries

    async def get_state(self) -> DurableState:
        return await self._query("get_state", None, DurableState)

    async def get_messages(self, start: int = 0, end: int | None = None) -> MessagesPage:
        return await self._query("get_messages", MessagesQuery(start=start, end=end), MessagesPage)

    async def get_session_stats(self) -> SessionStats:
        return await self._query("get_session_stats", None, SessionStats)

    async def get_queues(self) -> QueuesState:
        return await self._query("get_queues", None, QueuesState)

    async def clear_queues(self, queue: QueueName = "all", *, id: str | None = None) -> QueuesState:
        """Empty the ``"steering"`` or ``"follow_up"`` queue, or ``"all"``; returns the messages it
        removed. Nothing is written to the session file (queued messages are not in it yet)."""
        request_id = id or _new_id()
        return await self._update(
            UPDATE_CLEAR_QUEUES, ClearQueuesRequest(id=request_id, queue=queue), request_id, QueuesState
        )

    async def clear_steering_queue(self) -> QueuesState:
        return await self.clear_queues("steering")

    async def clear_follow_up_queue(self) -> QueuesState:
        return await self.clear_queues("follow_up")

    async def clear_all_queues(self) -> QueuesState:
        return await self.clear_queues("all")

    async def has_queued_messages(self) -> bool:
        queues = await self.get_queues()
        return bool(queues.steering or queues.follow_up)

    # ------------------------------------------------------------------------------- events

    async def events(
        self,
        from_offset: int = 0,
        *,
        poll_cooldown: timedelta = timedelta(0),
        reconnect_timeout: timedelta | None = RECONNECT_TIMEOUT,
    ) -> AsyncIterator[tuple[int, AgentEvent]]:
        """Every event from ``from_offset`` on, with its offset, following continue-as-new.

        Resume after a disconnect by passing the last offset seen plus one: nothing is lost or repeated
        (as long as the offset is still retained by the workflow: older ones are skipped, with a
        warning). The iterator does that itself when a poll fails on the way (the server restarting or overloaded: unavailable, timed out): it
        polls again from the next offset, backing off, until ``reconnect_timeout`` passes without a
        poll getting through (None: forever); then the last error is raised.

        ``poll_cooldown`` is the pause before the next long-poll once caught up. None by default: a
        pause delays the event published just after it, and a turn's publishes come further apart
        than any useful pause, so it batches nothing (bench/log/004-subscriber-poll-cooldown.md: one
        conversation's tool turn p50 / p99 100 / 180 ms with 20 ms, 84 / 113 ms with none; burst
        throughput the same)."""
        offset = from_offset
        failing_since: float | None = None
        pause = RECONNECT_FIRST_PAUSE
        while True:
            stream = WorkflowStreamClient.create(self.client, self.session_id)
            items = stream.subscribe([EVENTS_TOPIC], from_offset=offset, poll_cooldown=poll_cooldown)
            try:
                while True:
                    # Each poll is an Update: with no worker it would wait for one until the
                    # reconnect timeout; NoWorkerError says so within seconds, as for every call.
                    try:
                        item = await self.agents._worker_answered(
                            anext(items),
                            self._task_queue,
                            f"the event stream from offset {offset} has no answer",
                        )
                    except StopAsyncIteration:
                        break
                    failing_since, pause = None, RECONNECT_FIRST_PAUSE
                    if item.offset > offset:
                        # The workflow keeps the newest events only (``ConversationLimits``): say what
                        # this subscriber will never see rather than skip it silently.
                        logger.warning(
                            "%r: events %d-%d are no longer retained; continuing from %d",
                            self.session_id, offset, item.offset - 1, item.offset,
                        )  # fmt: skip
                    offset = item.offset + 1
                    yield item.offset, AGENT_EVENT_ADAPTER.validate_python(item.data)
                return
            except (WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError, RPCError) as err:
                # A poll refused as UNPROCESSED_UPDATE went to a workflow task whose worker never saw
                # it (``_update``): polled again from the same offset, as after a transient failure.
                if (
                    isinstance(err, WorkflowUpdateFailedError)
                    and getattr(err.cause, "type", None) != UNPROCESSED_UPDATE
                ):
                    raise
                if isinstance(err, RPCError) and err.status not in TRANSIENT_RPC_STATUSES:
                    raise
                now = time.monotonic()
                failing_since = now if failing_since is None else failing_since
                if reconnect_timeout is not None and now - failing_since >= reconnect_timeout.total_seconds():
                    raise
                await asyncio.sleep(pause)
                pause = min(pause * 2, RECONNECT_MAX_PAUSE)

    async def event_offset(self) -> int:
        offset = WorkflowStreamClient.create(self.client, self.session_id).get_offset()
        return await self.agents._worker_answered(offset, self._task_queue, "event_offset has no answer")

    async def subscribe(self, listener: Listener, *, from_offset: int | None = None) -> Callable[[], None]:
        """Call ``listener(event, signal)`` for every event from now on (or ``from_offset``), in order.

        Returns the unsubscribe function. Listeners may be sync or async. A listener that raises is
        logged and goes on receiving events: it observes the conversation from afar and cannot fail
        its run (the in-process ``Agent``'s listeners run inside the run, and fail it)."""
        start = await self.event_offset() if from_offset is None else from_offset
        run = _RunSignal(self._run_signals)

        async def pump() -> None:
            try:
                async for offset, event in self.events(start):
                    try:
                        result = listener(event, run.for_event(event))
                        if inspect.isawaitable(result):
                            await result
                    except Exception:
                        logger.exception(
                            "listener of %r failed on event %d (%s)", self.session_id, offset, event.type
                        )
            except Exception:  # the conversation ended or could not be reached for too long
                logger.exception("subscription to %r ended", self.session_id)

        task = asyncio.create_task(pump())
        self._subscriptions.add(task)
        task.add_done_callback(self._subscriptions.discard)
        task.add_done_callback(lambda _: run.close())

        def unsubscribe() -> None:
            task.cancel()

        return unsubscribe

    async def close(self) -> None:
        """Stop every subscription of this handle."""
        for task in list(self._subscriptions):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
