"""``AgentClient``: start, attach to, list, fork and recover durable conversations."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowUpdateFailedError,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from ..approvals import PendingApproval, undecided_requests
from ..compaction import CompactionSettings
from ..errors import AgentError, AgentNotFoundError, NoWorkerError, ValidationError
from ..messages import AssistantMessage, Message
from ..protocol import (
    WORKFLOW_NAME,
    Accepted,
    ConversationConfig,
    ConversationInput,
    ConversationLimits,
    PromptRequest,
)
from ..search_attributes import AGENT_MODEL, AGENT_SESSION_ID, AGENT_STATUS
from ..session import GetEntriesOptions, JsonlSessionStorage, SessionPaths, check_session_id
from ..session.branching import copy_session, fork_session
from ..state import AgentOptions
from ..temporal.connect import ConnectionSettings, ensure_data_converter
from ..temporal.payloads import PAYLOADS_SUBDIR
from ..temporal.search_attributes import search_attribute_keys
from ..transcript import newest_within
from ..wakeups import pending_wakeups
from .agent import DurableAgent
from .calls import WorkerWatch, check_payload_size, namespace_not_found
from .requests import PromptInput, new_id, tool_names, user_messages


class SessionSummary(BaseModel):
    """One row of ``AgentClient.list``: a conversation's run and status, and what its search
    attributes index (None where they are not registered)."""

    session_id: str
    run_id: str | None = None
    status: str
    start_time: float | None = None
    model: str | None = None
    agent_status: str | None = None
    message_count: int | None = None
    cost_usd: float | None = None


class AgentClient:
    """Starts, attaches to, lists, forks and recovers the durable conversations of a task queue;
    each is a ``DurableAgent``."""

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
        # Whether calls get an answer from a worker: shared with this client's ``DurableAgent``s.
        self.worker_watch = WorkerWatch(self.client)

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
        from ..temporal.connect import connect

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
        session_id = check_session_id(session_id or new_id())  # it names the session file too
        config = ConversationConfig(
            system_prompt=options.system_prompt,
            model=options.model,
            thinking_level=options.thinking_level,
            tool_names=tool_names(options.tools),
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
            request_id = new_id()
            request = PromptRequest(id=request_id, messages=messages)
            check_payload_size("prompt", request)
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
                await self.worker_watch.worker_answered(
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
            await _imported(agent)
        return agent


async def _imported(agent: DurableAgent) -> None:
    """Return once a worker placed the recovered session file; its typed error if it could not."""
    try:
        await agent.wait_for_idle()
    except NoWorkerError:
        raise  # started; a worker that starts places the file
    except AgentError:
        try:
            await agent.handle.result()
        except WorkflowFailureError as err:
            if isinstance(err.cause, ApplicationError):
                raise AgentError.from_code(err.cause.type, err.cause.message) from None
        raise


def _unanswered(requests: list[PendingApproval], messages: list[Message]) -> list[PendingApproval]:
    """The requests for tool calls of the last message (an assistant's) that nothing answered."""
    last = messages[-1] if messages else None
    if not isinstance(last, AssistantMessage):
        return []
    calls = {call.id for call in last.tool_calls}
    return [request for request in requests if request.tool_call_id in calls]
