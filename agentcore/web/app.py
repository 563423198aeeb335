"""The web chat's ASGI app: a Temporal client, like the CLI, behind a small JSON + SSE API.

    GET  /                                 conversations (the page; the list is /api/conversations)
    GET  /c/{session}                      one conversation (the same page)
    GET  /api/config                       models, tools and thinking levels for "new conversation"
    GET  /api/conversations                the list, from the workflows' search attributes
    POST /api/conversations                start one: model, tools, system prompt, thinking level
    GET  /api/conversations/{session}      snapshot: transcript, streaming answer, next event offset
    GET  /api/conversations/{session}/events     Server-Sent Events from ?from=N or Last-Event-ID
    POST /api/conversations/{session}/messages   prompt when idle, steer while running, or follow up
    GET  /api/conversations/{session}/queues     steering and follow-up messages not yet taken
    POST /api/conversations/{session}/queues/clear   {"queue": "all" | "steering" | "follow_up"}
    POST /api/conversations/{session}/abort
    POST /api/conversations/{session}/branch     {"entry_id"}: continue from an earlier message
    GET  /api/conversations/{session}/branches   user messages with other branches, where each ends
    POST /api/conversations/{session}/fork       {"entry_id"}: a new conversation up to that message
    POST /api/render                       {"text"}: Markdown as the page shows it (a streaming answer)

Each SSE event's id is the conversation's event offset, so a browser that reconnects (a dropped
connection) sends ``Last-Event-ID`` and continues with the next event: nothing lost, nothing twice.
A reload asks for the snapshot again, whose ``event_offset`` is where its events continue.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import orjson
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from temporalio.service import RPCError

from ..client import AgentClient, DurableAgent, SessionSummary
from ..errors import (
    AgentBusyError,
    AgentError,
    AgentNotFoundError,
    ApprovalAlreadyResolvedError,
    ApprovalNotFoundError,
    EncryptionKeyError,
    NoWorkerError,
    WorkflowTaskFailingError,
)
from ..model import Model, ThinkingLevel
from ..protocol import QueuesState
from ..search_attributes import AWAITING_APPROVAL
from ..state import AgentOptions
from .branches import SessionTree, message_branches, read_tree, user_text
from .markdown import render_markdown
from .security import Guard, SignIns
from .views import ended_view, event_view, queued_view, state_view

T = TypeVar("T")

STATIC_DIR = Path(__file__).parent / "static"
# Between keep-alive comments on a quiet event stream: proxies drop idle connections after 30-60 s.
SSE_PING_SECONDS = 15
# After the event stream found no worker for the conversation, this long before it follows again.
NO_WORKER_RETRY_SECONDS = 2.0
# The longest text ``/api/render`` takes (a streaming answer far longer is shown as plain text).
RENDER_MAX_CHARS = 400_000
# A conversation's title: the session's name, else its first prompt cut to this many characters.
TITLE_CHARS = 80
# A file path in an error message: the page shows its last part only (the server's layout is its own).
_PATH = re.compile(r"'?(?:/[\w.@+-]+){2,}/?'?")


@dataclass
class WebSettings:
    """What the app offers and links to. ``resolve_model`` turns the model field of the "new
    conversation" form (``demo``, ``provider/model-id``) into a ``Model``."""

    resolve_model: Callable[[str], Model]
    models: list[str] = field(default_factory=lambda: ["demo"])
    tools: list[str] = field(default_factory=list)
    default_tools: list[str] | None = None
    system_prompt: str = ""
    token: str | None = None
    temporal_ui_url: str | None = None


class JsonError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code


def _json(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json")


def public_message(message: str) -> str:
    """An error message for the page: file paths cut to their last part."""
    return _PATH.sub(lambda match: repr(match.group(0).strip("'").rstrip("/").rsplit("/", 1)[-1]), message)


def _error_status(err: AgentError) -> int:
    if isinstance(err, AgentNotFoundError | ApprovalNotFoundError):
        return 404
    if isinstance(err, EncryptionKeyError):
        return 500  # this server's own configuration, not the request
    if isinstance(err, NoWorkerError | WorkflowTaskFailingError):
        return 503  # as when Temporal does not answer: the page says so and tries again
    if isinstance(err, AgentBusyError | ApprovalAlreadyResolvedError) or err.code == "AGENT_EXISTS":
        return 409
    return 400


async def _body(request: Request) -> dict[str, Any]:
    # JSON only: a cross-site HTML form can send form-encoded or text bodies, never JSON, without a
    # CORS preflight that this app never answers.
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        raise JsonError(415, "UNSUPPORTED_MEDIA_TYPE", "send application/json")
    try:
        body = orjson.loads(await request.body())
    except orjson.JSONDecodeError as err:
        raise JsonError(400, "INVALID_JSON", f"the body is not JSON ({err})") from None
    if not isinstance(body, dict):
        raise JsonError(400, "INVALID_JSON", "the body must be a JSON object")
    return body


def _text_field(body: dict[str, Any], name: str, *, required: bool = True) -> str:
    value = body.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise JsonError(400, "VALIDATION_ERROR", f"{name!r} must be a non-empty string")
    return value


Handler = Callable[[Request], Awaitable[Response]]


def _api(handler: Handler) -> Handler:
    """Refusals as JSON ``{"error": CODE, "message": ...}`` with a fitting status."""

    async def wrapped(request: Request) -> Response:
        try:
            return await handler(request)
        except JsonError as err:
            return _json({"error": err.code, "message": str(err)}, err.status)
        except AgentError as err:
            return _json({"error": err.code, "message": public_message(err.message)}, _error_status(err))
        except RPCError as err:
            # Temporal (or the conversation's worker, for a query) did not answer: the page says
            # so by the message box and tries again, rather than showing a server error.
            return _json(
                {"error": "TEMPORAL_UNAVAILABLE", "message": f"Temporal did not answer: {err.message}"}, 503
            )

    return wrapped


def session_title(path: Path) -> str | None:
    """The session's name (``agentcore name``), else its first prompt on one line, else None."""
    name: str | None = None
    first: str | None = None
    try:
        with path.open("rb") as lines:
            for line in lines:
                try:
                    entry = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue  # a torn last line
                if not isinstance(entry, dict):
                    continue
                kind = entry.get("type")
                if kind == "session_info" and isinstance(entry.get("name"), str):
                    name = entry["name"]
                elif first is None and kind == "message" and isinstance(entry.get("message"), dict):
                    message = entry["message"]
                    if message.get("role") == "user":
                        first = user_text(message)
    except OSError:
        return None
    title = " ".join((name or first or "").split())
    if not title:
        return None
    return title if len(title) <= TITLE_CHARS else title[: TITLE_CHARS - 1].rstrip() + "…"


def status_badge(status: str) -> str:
    """The sidebar's states: running, awaiting approval (a tool call waits for a person), idle, error
    (a workflow that failed, was terminated, timed out); a completed or cancelled conversation shows
    as idle (it ended as asked)."""
    if status == AWAITING_APPROVAL:
        return AWAITING_APPROVAL
    if status in ("running", "aborting", "compacting"):
        return "running"
    if status in ("failed", "terminated", "timed_out"):
        return "error"
    return "idle"


class WebChat:
    def __init__(self, agents: AgentClient, settings: WebSettings) -> None:
        self.agents = agents
        self.settings = settings
        # session id -> (file size, mtime, title): a file is read again only when it changed.
        self._titles: dict[str, tuple[int, float, str | None]] = {}
        # session id -> (file size, mtime, tree): the same for the branches' tree.
        self._trees: dict[str, tuple[int, float, SessionTree]] = {}

    # ------------------------------------------------------------------------------- helpers

    async def _agent(self, request: Request) -> DurableAgent:
        return await self.agents.attach(request.path_params["session"])

    def _workflow_url(self, session_id: str) -> str | None:
        base = self.settings.temporal_ui_url
        if not base:
            return None
        namespace = quote(self.agents.client.namespace, safe="")
        return f"{base.rstrip('/')}/namespaces/{namespace}/workflows/{quote(session_id, safe='')}"

    def _from_file(
        self, cache: dict[str, tuple[int, float, T]], session_id: str, read: Callable[[Path], T]
    ) -> T | None:
        """``read`` of the session's file, again only when the file changed; None without one."""
        path = self._session_path(session_id)
        try:
            stat = path.stat() if path is not None else None
        except OSError:
            stat = None
        if path is None or stat is None:
            return None
        cached = cache.get(session_id)
        if cached is not None and cached[:2] == (stat.st_size, stat.st_mtime):
            return cached[2]
        value = read(path)
        cache[session_id] = (stat.st_size, stat.st_mtime, value)
        return value

    def _title(self, session_id: str) -> str | None:
        return self._from_file(self._titles, session_id, session_title)

    def _last_activity(self, summary: SessionSummary) -> float | None:
        # The session file is appended on every entry: its modification time is the last activity.
        if self.agents.sessions_dir is not None:
            path = self.agents.sessions_dir / f"{summary.session_id}.jsonl"
            try:
                return path.stat().st_mtime
            except OSError:
                pass
        return summary.start_time

    # ------------------------------------------------------------------------------- pages

    async def page(self, request: Request) -> Response:
        return FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-store"})

    # ------------------------------------------------------------------------------- API

    async def config(self, request: Request) -> Response:
        settings = self.settings
        return _json(
            {
                "models": settings.models,
                "tools": settings.tools,
                "default_tools": settings.tools if settings.default_tools is None else settings.default_tools,
                "thinking_levels": [level.value for level in ThinkingLevel],
                "system_prompt": settings.system_prompt,
                "temporal_ui_url": settings.temporal_ui_url,
            }
        )

    async def list_conversations(self, request: Request) -> Response:
        summaries = await self.agents.list(limit=200)
        ids = [summary.session_id for summary in summaries]
        titles = await asyncio.to_thread(lambda: {session_id: self._title(session_id) for session_id in ids})
        rows = [
            {
                "session_id": summary.session_id,
                "title": titles[summary.session_id],
                "running": summary.status == "RUNNING",
                "status": summary.agent_status if summary.status == "RUNNING" else summary.status.lower(),
                "model": summary.model,
                "messages": summary.message_count,
                "cost": summary.cost_usd,
                "started": summary.start_time,
                "last_activity": self._last_activity(summary),
                "workflow_url": self._workflow_url(summary.session_id),
            }
            for summary in summaries
        ]
        for row in rows:
            row["status_badge"] = status_badge(str(row["status"]))
        rows.sort(key=lambda row: row["last_activity"] or 0, reverse=True)
        return _json({"conversations": rows})

    async def create_conversation(self, request: Request) -> Response:
        body = await _body(request)
        session_id = body.get("session_id") or time.strftime("web-%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:4]
        spec = _text_field(body, "model", required=False) or self.settings.models[0]
        try:
            model = self.settings.resolve_model(spec)
        except ValueError as err:
            raise JsonError(400, "VALIDATION_ERROR", str(err)) from None
        tools = body.get("tools", self.settings.default_tools or self.settings.tools)
        if not isinstance(tools, list) or not all(isinstance(name, str) for name in tools):
            raise JsonError(400, "VALIDATION_ERROR", "'tools' must be a list of tool names")
        unknown = sorted(set(tools) - set(self.settings.tools))
        if unknown:
            raise JsonError(400, "TOOL_NOT_FOUND", f"no such tool here: {', '.join(unknown)}")
        system_prompt = body.get("system_prompt")
        if system_prompt is None:
            system_prompt = self.settings.system_prompt
        if not isinstance(system_prompt, str):
            raise JsonError(400, "VALIDATION_ERROR", "'system_prompt' must be a string")
        try:
            options = AgentOptions(
                model=model,
                tools=tools,
                system_prompt=system_prompt,
                thinking_level=body.get("thinking_level") or "off",
            )
        except ValueError as err:  # pydantic's, for a thinking level that is not one
            raise JsonError(400, "VALIDATION_ERROR", str(err).splitlines()[0]) from None
        agent = await self.agents.start(str(session_id), options)
        return _json({"session_id": agent.session_id}, 201)

    async def _ended(self, session_id: str) -> dict[str, Any] | None:
        """The snapshot of a conversation whose workflow has ended (terminated, failed, timed out,
        completed): its transcript from the session file, and why it ended. None if there is none."""
        from temporalio.client import WorkflowExecutionStatus
        from temporalio.service import RPCError

        handle = self.agents.client.get_workflow_handle(session_id)
        try:
            description = await handle.describe()
        except RPCError:
            return None
        status = description.status
        if status is None or status == WorkflowExecutionStatus.RUNNING:
            return None
        reason = ""
        async for event in handle.fetch_history_events():
            if event.HasField("workflow_execution_terminated_event_attributes"):
                reason = event.workflow_execution_terminated_event_attributes.reason
            elif event.HasField("workflow_execution_failed_event_attributes"):
                reason = event.workflow_execution_failed_event_attributes.failure.message
        name = status.name.lower()
        view = ended_view(session_id, name, public_message(reason), self._session_path(session_id))
        view["workflow_url"] = self._workflow_url(session_id)
        view["title"] = await asyncio.to_thread(self._title, session_id)
        return view

    def _session_path(self, session_id: str) -> Path | None:
        if self.agents.sessions_dir is None:
            return None
        return self.agents.sessions_dir / f"{session_id}.jsonl"

    async def conversation(self, request: Request) -> Response:
        try:
            agent = await self._agent(request)
        except AgentNotFoundError:
            ended = await self._ended(request.path_params["session"])
            if ended is None:
                raise
            return _json(ended)
        state = await agent.get_state()
        # Entry ids name the messages for branch and fork; the page of the same range holds them.
        page = await agent.get_messages(state.first_message_index, state.message_count)
        entry_ids = page.entry_ids if page.start == state.first_message_index else []
        view = state_view(state, entry_ids)
        view["queued"] = _queued_views(await agent.get_queues())
        view["workflow_url"] = self._workflow_url(agent.session_id)
        view["title"] = await asyncio.to_thread(self._title, agent.session_id)
        return _json(view)

    async def queues(self, request: Request) -> Response:
        agent = await self._agent(request)
        return _json({"queued": _queued_views(await agent.get_queues())})

    async def clear_queues(self, request: Request) -> Response:
        """Drop queued messages (``queue``: all, steering or follow_up); answers what was removed
        and what is still queued (a message queued from elsewhere meanwhile)."""
        body = await _body(request)
        queue = body.get("queue", "all")
        if queue not in ("all", "steering", "follow_up"):
            raise JsonError(400, "VALIDATION_ERROR", "'queue' is all, steering or follow_up")
        agent = await self._agent(request)
        removed = await agent.clear_queues(queue)
        return _json({"removed": _queued_views(removed), "queued": _queued_views(await agent.get_queues())})

    async def send(self, request: Request) -> Response:
        """``mode``: ``auto`` (prompt when idle, else steer), ``steer`` or ``follow_up``.

        ``id`` (made by the page) makes a resend after a dropped connection count once."""
        body = await _body(request)
        text = _text_field(body, "text").strip()
        mode = body.get("mode", "auto")
        request_id = body.get("id") or uuid.uuid4().hex
        if mode not in ("auto", "steer", "follow_up") or not isinstance(request_id, str):
            raise JsonError(400, "VALIDATION_ERROR", "'mode' is auto, steer or follow_up")
        agent = await self._agent(request)
        try:
            if mode == "follow_up":
                return _json({"delivered_as": "follow_up", "id": await agent.follow_up(text, id=request_id)})
            if mode == "auto":
                try:
                    await agent.prompt(text, id=request_id)
                    return _json({"delivered_as": "prompt", "id": request_id})
                except AgentBusyError:
                    pass  # a run is going: the message steers it
            return _json({"delivered_as": "steer", "id": await agent.steer(text, id=request_id)})
        except NoWorkerError as err:
            # Sent, and kept by the conversation until a worker takes it: not a failure to resend.
            return _json(
                {"delivered_as": "waiting", "id": request_id, "message": public_message(err.message)}, 202
            )

    async def abort(self, request: Request) -> Response:
        agent = await self._agent(request)
        await agent.abort("aborted from the web chat")
        return _json({"ok": True})

    async def approve(self, request: Request) -> Response:
        """Let a tool call waiting for approval run; ``args`` (an object) replaces its arguments."""
        body = await _body(request)
        args = body.get("args")
        if args is not None and not isinstance(args, dict):
            raise JsonError(400, "INVALID_PARAMETERS", "'args' must be a JSON object")
        agent = await self._agent(request)
        accepted = await agent.approve(request.path_params["call"], args)
        return _json({"status": accepted.status})

    async def deny(self, request: Request) -> Response:
        body = await _body(request)
        reason = body.get("reason") or ""
        if not isinstance(reason, str):
            raise JsonError(400, "VALIDATION_ERROR", "'reason' must be a string")
        agent = await self._agent(request)
        accepted = await agent.deny(request.path_params["call"], reason)
        return _json({"status": accepted.status})

    async def branch(self, request: Request) -> Response:
        body = await _body(request)
        entry_id = body.get("entry_id")
        if entry_id is not None and not isinstance(entry_id, str):
            raise JsonError(400, "VALIDATION_ERROR", "'entry_id' must be an entry id or null")
        agent = await self._agent(request)
        result = await agent.branch(entry_id)
        return _json({"leaf_id": result.leaf_id})

    def _tree(self, session_id: str) -> SessionTree:
        return self._from_file(self._trees, session_id, read_tree) or SessionTree()

    async def branches(self, request: Request) -> Response:
        """The user messages on the current path that have other branches (a regeneration, an edit):
        each with its siblings, oldest first, and where each sibling's branch ends (``leaf_id``: what
        ``branch`` takes to switch to it). From the session file, so a reload or another tab sees
        them too."""
        agent = await self._agent(request)
        state = await agent.get_state()
        page = await agent.get_messages(state.first_message_index, state.message_count)
        path = list(zip(page.entry_ids, [message.role for message in page.messages], strict=False))
        tree = await asyncio.to_thread(self._tree, agent.session_id)
        return _json(message_branches(tree, path, state.leaf_id, from_start=page.start == 0))

    async def fork(self, request: Request) -> Response:
        body = await _body(request)
        entry_id = _text_field(body, "entry_id")
        source = request.path_params["session"]
        new_id = body.get("session_id") or f"{source}-fork-{uuid.uuid4().hex[:6]}"
        agent = await self.agents.fork(source, entry_id, str(new_id))
        return _json({"session_id": agent.session_id}, 201)

    async def render(self, request: Request) -> Response:
        """The page renders a streaming answer through here (model text never becomes markup in the
        browser itself): the same ``render_markdown`` as the finished message gets."""
        text = _text_field(await _body(request), "text", required=False)
        if len(text) > RENDER_MAX_CHARS:
            raise JsonError(413, "TOO_LARGE", f"render takes at most {RENDER_MAX_CHARS} characters")
        return _json({"html": render_markdown(text).strip()})

    # ------------------------------------------------------------------------------- events

    async def events(self, request: Request) -> Response:
        """The conversation's events as SSE, ids = event offsets (``Last-Event-ID`` wins over ``from``:
        a reconnecting browser sends it with the address it first opened)."""
        last_event_id = request.headers.get("last-event-id")
        try:
            start = int(last_event_id) + 1 if last_event_id else int(request.query_params.get("from", "0"))
        except ValueError:
            raise JsonError(400, "VALIDATION_ERROR", "'from' and Last-Event-ID are event offsets") from None
        agent = await self._agent(request)
        return EventSourceResponse(
            self._stream(agent, max(0, start)),
            ping=SSE_PING_SECONDS,
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def _stream(self, agent: DurableAgent, start: int) -> AsyncIterator[ServerSentEvent]:
        offset = start
        while True:
            try:
                async for at, event in agent.events(offset):
                    yield ServerSentEvent(
                        data=orjson.dumps(event_view(event)).decode(), id=str(at), event="agent"
                    )
                    offset = at + 1
            except asyncio.CancelledError:
                raise
            except NoWorkerError as err:
                # No worker polls the conversation's queue (one restarting, a deploy): the page says so
                # and keeps its stream, which goes on from the next event once a worker answers.
                yield ServerSentEvent(data=_error_data(err.code, str(err)), event="waiting")
                await asyncio.sleep(NO_WORKER_RETRY_SECONDS)
                continue
            except AgentError as err:
                yield ServerSentEvent(data=_error_data(err.code, str(err)), event="failure")
                return
            except Exception as err:  # the server unreachable for longer than the client waits
                message = f"the event stream ended: {type(err).__name__}"
                yield ServerSentEvent(data=_error_data("STREAM_ENDED", message), event="failure")
                return
            # The workflow ended (it was terminated, or completed): nothing more will come.
            yield ServerSentEvent(data="{}", event="closed")
            return


def _error_data(code: str, message: str) -> str:
    return orjson.dumps({"error": code, "message": message}).decode()


def _queued_views(queues: QueuesState) -> list[dict[str, Any]]:
    return [queued_view("steer", item) for item in queues.steering] + [
        queued_view("follow_up", item) for item in queues.follow_up
    ]


def create_app(agents: AgentClient, settings: WebSettings) -> Starlette:
    """The web chat for the conversations ``agents`` reaches."""
    chat = WebChat(agents, settings)
    conversation = "/api/conversations/{session}"
    routes = [
        Route("/", chat.page),
        Route("/c/{session}", chat.page),
        Route("/api/config", _api(chat.config)),
        Route("/api/conversations", _api(chat.list_conversations), methods=["GET"]),
        Route("/api/conversations", _api(chat.create_conversation), methods=["POST"]),
        Route(conversation, _api(chat.conversation)),
        Route(f"{conversation}/events", _api(chat.events)),
        Route(f"{conversation}/queues", _api(chat.queues)),
        Route(f"{conversation}/queues/clear", _api(chat.clear_queues), methods=["POST"]),
        Route(f"{conversation}/messages", _api(chat.send), methods=["POST"]),
        Route(f"{conversation}/abort", _api(chat.abort), methods=["POST"]),
        Route(f"{conversation}/branch", _api(chat.branch), methods=["POST"]),
        Route(f"{conversation}/branches", _api(chat.branches)),
        Route(f"{conversation}/approvals/{{call}}/approve", _api(chat.approve), methods=["POST"]),
        Route(f"{conversation}/approvals/{{call}}/deny", _api(chat.deny), methods=["POST"]),
        Route(f"{conversation}/fork", _api(chat.fork), methods=["POST"]),
        Route("/api/render", _api(chat.render), methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    app = Starlette(routes=routes)
    # The sign-in codes the server's printed links carry (``RunningWebServer.link``) are these.
    app.state.sign_ins = SignIns()
    app.add_middleware(Guard, token=settings.token, sign_ins=app.state.sign_ins)
    return app


__all__ = ["WebChat", "WebSettings", "create_app"]
