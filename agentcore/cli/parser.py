"""The ``agentcore`` command line's parser: every command and flag, built from argparse alone.

Nothing here imports Temporal, pydantic or an HTTP client, so ``agentcore --help``, a usage error and
shell completion start at once; each command names its handler as ``"module:function"`` in
``agentcore.cli``, imported when the command runs (``LazyCommand``).
"""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Awaitable, Callable

from ..logs import LOG_FORMATS

Command = Callable[[argparse.Namespace], Awaitable[int]]

DEFAULT_DEMO_PORT = 8765
DEFAULT_WEB_PORT = 8780


class CliError(Exception):
    """A failure reported as one line on stderr, with an exit code."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class _Version(argparse.Action):
    """``--version``, with the installed version read only when asked for (importlib.metadata)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(
            option_strings,
            dest=argparse.SUPPRESS,
            default=argparse.SUPPRESS,
            nargs=0,
            help=str(kwargs.get("help")),
        )

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        print(f"agentcore {_version()}")  # on stdout, as argparse's own version action prints it
        parser.exit()


class LazyCommand:
    """A command's handler, named ``"module:function"`` in ``agentcore.cli`` and imported when the
    command runs (``"dev:run_dev"`` is ``agentcore.cli.dev.run_dev``); called as the handler is."""

    def __init__(self, spec: str) -> None:
        module, _, name = spec.partition(":")
        self.module = f"{__package__}.{module}"
        self.__name__ = name

    def load(self) -> Command:
        handler: Command = getattr(importlib.import_module(self.module), self.__name__)
        return handler

    async def __call__(self, args: argparse.Namespace) -> int:
        return await self.load()(args)

    def __repr__(self) -> str:
        return f"LazyCommand({self.module}:{self.__name__})"


def _common(parser: argparse.ArgumentParser, *, suppress: bool, connects: bool = True) -> None:
    # Accepted before or after the command: the subparsers' copies default to SUPPRESS so they do
    # not overwrite a value given before the command. A command that does not connect to Temporal
    # takes no connection flags after it.
    def default(value: object) -> object:
        return argparse.SUPPRESS if suppress else value

    env = os.environ.get
    if connects:
        _connection_flags(parser, default)
    _local_flags(parser, default, env)


def _connection_flags(parser: argparse.ArgumentParser, default: Callable[[object], object]) -> None:
    connection = parser.add_argument_group(
        "connection",
        "Unset flags come from the TEMPORAL_* variables and the temporal CLI's profile file "
        "(TEMPORAL_CONFIG_FILE, TEMPORAL_PROFILE), as for every Temporal tool.",
    )
    connection.add_argument(
        "--address",
        default=default(None),
        help="Temporal frontend host:port (TEMPORAL_ADDRESS; localhost:7233)",
    )
    connection.add_argument(
        "-n", "--namespace", default=default(None), help="Temporal namespace (TEMPORAL_NAMESPACE; default)"
    )
    connection.add_argument(
        "--api-key",
        default=default(None),
        help="API key, e.g. Temporal Cloud's; turns TLS on (TEMPORAL_API_KEY)",
    )
    connection.add_argument(
        "--tls",
        action=argparse.BooleanOptionalAction,
        default=default(None),
        help="TLS on or off (TEMPORAL_TLS); on with any of the TLS files",
    )
    connection.add_argument(
        "--tls-ca-path",
        "--tls-ca-cert",
        dest="tls_ca_cert",
        metavar="PATH",
        default=default(None),
        help="CA of the server, PEM (TEMPORAL_TLS_SERVER_CA_CERT_PATH)",
    )
    connection.add_argument(
        "--tls-cert-path",
        "--tls-cert",
        dest="tls_cert",
        metavar="PATH",
        default=default(None),
        help="client certificate for mTLS, PEM (TEMPORAL_TLS_CLIENT_CERT_PATH)",
    )
    connection.add_argument(
        "--tls-key-path",
        "--tls-key",
        dest="tls_key",
        metavar="PATH",
        default=default(None),
        help="client private key for mTLS, PEM (TEMPORAL_TLS_CLIENT_KEY_PATH)",
    )
    connection.add_argument(
        "--tls-server-name", default=default(None), help="server name to verify (TEMPORAL_TLS_SERVER_NAME)"
    )
    connection.add_argument(
        "--grpc-meta",
        action="append",
        default=default(None),
        metavar="KEY=VALUE",
        help="gRPC metadata sent with every call (repeatable; TEMPORAL_GRPC_META_*)",
    )
    connection.add_argument(
        "--profile", default=default(None), help="profile in the config file (TEMPORAL_PROFILE)"
    )
    connection.add_argument(
        "--config-file",
        default=default(None),
        help="the temporal CLI's TOML config file (TEMPORAL_CONFIG_FILE)",
    )


def _local_flags(
    parser: argparse.ArgumentParser, default: Callable[[object], object], env: Callable[..., str | None]
) -> None:
    parser.add_argument(
        "--task-queue",
        default=default(env("AGENTCORE_TASK_QUEUE", "agentcore")),
        help="task queue (AGENTCORE_TASK_QUEUE)",
    )
    parser.add_argument(
        "--data-dir",
        default=default(env("AGENTCORE_DATA_DIR", ".agentcore")),
        help="embedded server's SQLite, demo cellar, sessions (AGENTCORE_DATA_DIR)",
    )
    parser.add_argument(
        "--sessions-dir",
        default=default(env("AGENTCORE_SESSIONS_DIR")),
        help="JSONL session files (AGENTCORE_SESSIONS_DIR; default DATA_DIR/sessions)",
    )
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default=default(None),
        help="diagnostics as text or one JSON object per line (AGENTCORE_LOG_FORMAT; text)",
    )
    parser.add_argument(
        "--log-level", default=default(None), help="DEBUG, INFO, WARNING, ERROR (AGENTCORE_LOG_LEVEL; INFO)"
    )


def _model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        help="'demo', or provider/model-id (openai/gpt-4o-mini, anthropic/claude-sonnet-4-5, ollama/llama3.1)",
    )
    parser.add_argument(
        "--base-url", help="endpoint of an OpenAI-compatible server (Ollama, vLLM, llama.cpp)"
    )
    parser.add_argument(
        "--demo-port",
        type=int,
        default=int(os.environ.get("AGENTCORE_DEMO_PORT", DEFAULT_DEMO_PORT)),
        help="port of the demo model server (0: any free port)",
    )


def _mcp_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="NAME=COMMAND_OR_URL",
        help="an MCP server whose tools conversations may use as mcp:NAME (repeatable; quote a command "
        "with arguments: --mcp 'files=npx -y @modelcontextprotocol/server-filesystem /data'); "
        "NAME=https://... for streamable HTTP (.../sse: SSE)",
    )
    parser.add_argument(
        "--mcp-config",
        action="append",
        default=[],
        metavar="FILE",
        help='MCP servers from a JSON or TOML file: {"mcpServers": {...}} as Claude Desktop writes it',
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentcore", description="A durable LLM agent runtime on Temporal.")
    parser.add_argument("--version", action=_Version, help="print the version and exit")
    _common(parser, suppress=False)
    command = _Commands(parser)
    # In this order in ``agentcore --help``.
    _add_dev(command)
    _add_worker(command)
    _add_chat(command)
    _add_web(command)
    _add_message_commands(command)
    _add_conversation_commands(command)
    _add_session_commands(command)
    add_tree_commands(command)
    add_approval_commands(command)
    _add_codec_server(command)
    return parser


class _Commands:
    """``command(name, handler, help)``: a command's subparser, with the common flags after the
    command and its handler (``"module:function"``, imported when the command runs)."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self._commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def __call__(
        self, name: str, handler: str, help: str, *, connects: bool = True
    ) -> argparse.ArgumentParser:
        sub = self._commands.add_parser(name, help=help, description=help)
        _common(sub, suppress=True, connects=connects)
        sub.set_defaults(handler=LazyCommand(handler))
        return sub


def _add_dev(command: _Commands) -> None:
    dev = command("dev", "dev:run_dev", "embedded Temporal dev server + worker + interactive demo chat")
    dev.add_argument("--port", type=int, default=7233, help="Temporal frontend port (0: any free port)")
    dev.add_argument("--ui-port", type=int, default=8233, help="Web UI port (0: any free port)")
    dev.add_argument("--no-ui", action="store_true", help="no Web UI")
    dev.add_argument(
        "--codec-port", type=int, default=8081, help="UI codec server port (with AGENTCORE_ENCRYPTION_KEY)"
    )
    dev.add_argument("--session", help="session id to attach to or start (default: a new one)")
    dev.add_argument(
        "--demo-script", action="store_true", help="play the demo questions instead of reading stdin"
    )
    dev.add_argument("--once", action="append", metavar="TEXT", help="ask TEXT (repeatable) and exit")
    dev.add_argument("--no-chat", action="store_true", help="serve only (server, worker, demo model)")
    dev.add_argument("--fast", action="store_true", help="demo model streams without pacing")
    dev.add_argument(
        "--plain", action="store_true", help="plain text chat (the default when stdout is no terminal)"
    )
    dev.add_argument("--no-web", action="store_true", help="do not serve the web chat")
    add_web_options(dev, port_flags=("--web-port",))
    _model_options(dev)
    _mcp_options(dev)


def _add_worker(command: _Commands) -> None:
    worker = command("worker", "dev:run_worker", "a worker for the conversations on a Temporal cluster")
    worker.add_argument("--demo-model", action="store_true", help="also serve the offline demo model")
    worker.add_argument(
        "--demo-port", type=int, default=int(os.environ.get("AGENTCORE_DEMO_PORT", DEFAULT_DEMO_PORT))
    )
    worker.add_argument(
        "--tools",
        action="append",
        metavar="MODULE:NAME",
        help="your tools: a list of AgentTool (or a function returning one) to serve instead of the demo's (repeatable)",
    )
    worker.add_argument(
        "--metrics-port",
        type=int,
        default=_env_int("AGENTCORE_METRICS_PORT"),
        help="serve Prometheus metrics (SDK and agent) on this port at /metrics (AGENTCORE_METRICS_PORT)",
    )
    worker.add_argument(
        "--metrics-host",
        default=os.environ.get("AGENTCORE_METRICS_HOST", "0.0.0.0"),
        help="metrics bind address",
    )
    worker.add_argument(
        "--graceful-shutdown",
        type=float,
        default=float(os.environ.get("AGENTCORE_GRACEFUL_SHUTDOWN", "30")),
        metavar="SECONDS",
        help="on SIGTERM, how long in-flight activities may run before they are cancelled (default 30)",
    )
    worker.add_argument(
        "--replay-slots",
        type=int,
        default=_env_int("AGENTCORE_REPLAY_SLOTS"),
        metavar="N",
        help="run at most N full-history replays at once, for a loaded machine that must ride out "
        "network cuts (costs ~4 ms CPU a turn; AGENTCORE_REPLAY_SLOTS; docs/network-faults.md)",
    )
    _mcp_options(worker)


def _add_chat(command: _Commands) -> None:
    chat = command("chat", "commands:cmd_chat", "talk to a conversation (started with the demo tools if new)")
    chat.add_argument("session", nargs="?", help="session id (default: a new one)")
    chat.add_argument(
        "--attach-only", action="store_true", help="fail with AGENT_NOT_FOUND instead of starting"
    )
    chat.add_argument("--once", action="append", metavar="TEXT", help="ask TEXT (repeatable) and exit")
    chat.add_argument(
        "--plain", action="store_true", help="plain text (the default when stdout is no terminal)"
    )
    _model_options(chat)


def _add_web(command: _Commands) -> None:
    web = command("web", "web:cmd_web", "the web chat: list, start and talk to conversations in a browser")
    add_web_options(web, port_flags=("--port", "--web-port"))
    web.add_argument(
        "--tool", action="append", help="a tool the workers have, offered for new conversations (repeatable)"
    )
    web.add_argument(
        "--temporal-ui",
        default=os.environ.get("AGENTCORE_TEMPORAL_UI"),
        help="the Temporal Web UI's address, to link each conversation's workflow (AGENTCORE_TEMPORAL_UI)",
    )
    _model_options(web)


def _add_message_commands(command: _Commands) -> None:
    """``send``, ``steer``, ``follow-up``, ``clear``, ``abort``: what a running conversation is told."""
    send = command("send", "commands:cmd_send", "prompt a running conversation")
    send.add_argument("session")
    send.add_argument("text")
    send.add_argument("--wait", action="store_true", help="print the run's events until it ends")
    for name, handler, what in (
        ("steer", "commands:cmd_steer", "queue a steering message (taken after the current tool batch)"),
        (
            "follow-up",
            "commands:cmd_follow_up",
            "queue a follow-up message (taken when the agent would stop)",
        ),
    ):
        sub = command(name, handler, what)
        sub.add_argument("session")
        sub.add_argument("text")
    clear = command(
        "clear", "commands:cmd_clear", "drop queued steering and follow-up messages; prints what it removed"
    )
    clear.add_argument("session")
    which = clear.add_mutually_exclusive_group()
    which.add_argument(
        "--steering", dest="queue", action="store_const", const="steering", help="only the steering queue"
    )
    which.add_argument(
        "--follow-up", dest="queue", action="store_const", const="follow_up", help="only the follow-up queue"
    )
    clear.set_defaults(queue="all")
    abort = command("abort", "commands:cmd_abort", "abort the current turn (the conversation goes on)")
    abort.add_argument("session")
    abort.add_argument("--reason")


def _add_conversation_commands(command: _Commands) -> None:
    """``state``, ``schedule``, ``terminate``, ``events``: one conversation's state, schedules, end, events."""
    state = command("state", "commands:cmd_state", "a conversation's state")
    state.add_argument("session")
    add_output_option(state)
    state.add_argument(
        "--json", dest="output", action="store_const", const="json", help="the same as --output json"
    )

    schedule = command(
        "schedule",
        "commands:cmd_schedule",
        "recurring messages to a conversation, through Temporal Schedules (pausable in the Web UI)",
    )
    schedule.add_argument("session")
    schedule.add_argument("text", nargs="?", help="the message each time (with --every or --cron)")
    schedule.set_defaults(trailing_text=True)
    when = schedule.add_mutually_exclusive_group(required=True)
    when.add_argument("--every", metavar="DURATION", help="an interval: 30s, 15m, 1h, 1d")
    when.add_argument("--cron", metavar="EXPR", help="a cron expression, e.g. '0 9 * * MON-FRI' (UTC)")
    when.add_argument(
        "--list", action="store_true", help="the conversation's schedules, with their next times"
    )
    when.add_argument("--delete", metavar="ID", help="delete one of the conversation's schedules")

    terminate = command(
        "terminate",
        "commands:cmd_terminate",
        "end a conversation for good, deleting its schedules (recover it from its session file)",
    )
    terminate.add_argument("session")
    terminate.add_argument("--reason")

    events = command("events", "commands:cmd_events", "a conversation's events as JSON lines, with offsets")
    events.add_argument("session")
    events.add_argument(
        "--from", dest="from_offset", type=int, default=0, help="first offset (resume: last seen + 1)"
    )
    events.add_argument("--follow", "-f", action="store_true", help="keep printing new events")


def _add_session_commands(command: _Commands) -> None:
    """``sessions``, ``recover``, ``export``: the conversations listed, and their session files."""
    sessions = command(
        "sessions", "commands:cmd_sessions", "list conversations: status, model, messages, cost"
    )
    sessions.add_argument("--query", help="extra visibility query, e.g. 'AgentModel = \"openai/gpt-4o\"'")
    sessions.add_argument("--limit", type=int, default=50)
    add_output_option(sessions)

    recover = command("recover", "commands:cmd_recover", "start a conversation from a JSONL session file")
    recover.add_argument("path")
    recover.add_argument("--session-id", help="id of the new conversation (default: the file's)")

    export = command("export", "commands:cmd_export", "a JSONL session as Markdown", connects=False)
    export.add_argument("target", metavar="SESSION_OR_PATH")
    export.add_argument("-o", "--output", help="write to this file instead of stdout")


def _add_codec_server(command: _Commands) -> None:
    codec = command(
        "codec-server",
        "commands:cmd_codec_server",
        "decrypt payloads for the Temporal Web UI",
        connects=False,
    )
    codec.add_argument("--host", default="127.0.0.1")
    codec.add_argument("--port", type=int, default=8081)
    codec.add_argument("--origin", action="append", help="allowed UI origin (repeatable; '*' for any)")
    codec.add_argument(
        "--token",
        default=os.environ.get("AGENTCORE_CODEC_TOKEN"),
        help="the token callers send (AGENTCORE_CODEC_TOKEN; generated when not given): "
        "Authorization: Bearer, X-Codec-Token, or the endpoint http://HOST:PORT/TOKEN",
    )


def add_tree_commands(make: Callable[[str, str, str], argparse.ArgumentParser]) -> None:
    """Register the commands with ``build_parser``'s ``command(name, handler, help)`` helper."""
    messages = make(
        "messages",
        "tree:cmd_messages",
        "a conversation's messages, with the entry ids to branch/fork/label at",
    )
    messages.add_argument("session")
    messages.add_argument("--start", type=int, default=0)
    add_output_option(messages)
    compact = make("compact", "tree:cmd_compact", "summarise the older part of a conversation now")
    compact.add_argument("session")
    compact.add_argument("--instructions", help="what the summary must keep")
    branch = make("branch", "tree:cmd_branch", "go back to an earlier entry ('start' for the beginning)")
    branch.add_argument("session")
    branch.add_argument("entry_id")
    how = branch.add_mutually_exclusive_group()
    how.add_argument("--summary", help="what the abandoned branch learned, kept as context")
    how.add_argument("--summarize", action="store_true", help="let the model summarise the abandoned branch")
    fork = make("fork", "tree:cmd_fork", "a new conversation from a conversation's path up to an entry")
    fork.add_argument("session")
    fork.add_argument("entry_id")
    fork.add_argument("new_session")
    label = make("label", "tree:cmd_label", "name an entry (omit LABEL to clear it)")
    label.add_argument("session")
    label.add_argument("entry_id")
    label.add_argument("label", nargs="?")
    name = make("name", "tree:cmd_name", "name a conversation")
    name.add_argument("session")
    name.add_argument("name")


def add_approval_commands(make: Callable[[str, str, str], argparse.ArgumentParser]) -> None:
    """Register the commands with ``build_parser``'s ``command(name, handler, help)`` helper."""
    approvals = make(
        "approvals", "approvals:cmd_approvals", "tool calls waiting for approval, in every conversation"
    )
    approvals.add_argument("--json", action="store_true", help="one JSON list of the waiting calls")
    approvals.add_argument("--limit", type=int, default=100, help="conversations to look at")
    approve = make("approve", "approvals:cmd_approve", "let a tool call waiting for approval run")
    approve.add_argument("session")
    approve.add_argument("call", help="the tool call id (agentcore approvals lists them)")
    approve.add_argument("--args", help="edited arguments, a JSON object checked against the tool's schema")
    deny = make("deny", "approvals:cmd_deny", "refuse a tool call waiting for approval")
    deny.add_argument("session")
    deny.add_argument("call", help="the tool call id (agentcore approvals lists them)")
    deny.add_argument("--reason", help="why: the model reads it")


def add_web_options(parser: argparse.ArgumentParser, *, port_flags: tuple[str, ...]) -> None:
    """``--host`` / ``--port`` (``dev`` has its own ``--port``: it names them ``--web-host`` / ``--web-port``)."""
    parser.add_argument(
        *(("--host",) if "--port" in port_flags else ()),
        "--web-host",
        dest="web_host",
        default=os.environ.get("AGENTCORE_WEB_HOST", "127.0.0.1"),
        help="address to serve the web chat on (anything but loopback needs --token)",
    )
    parser.add_argument(
        *port_flags,
        dest="web_port",
        type=int,
        default=int(os.environ.get("AGENTCORE_WEB_PORT", DEFAULT_WEB_PORT)),
        help=f"web chat port (default {DEFAULT_WEB_PORT}; 0: any free port)",
    )
    parser.add_argument(
        "--token",
        default=os.environ.get("AGENTCORE_WEB_TOKEN"),
        help="the web chat's access token (AGENTCORE_WEB_TOKEN; 32 random bytes' worth at least); "
        "one is generated when none is given off loopback",
    )
    # ``agentcore web --tls-cert/--tls-key`` are the page's HTTPS (the Temporal client's mTLS files
    # go before the command, or in TEMPORAL_TLS_CLIENT_CERT_PATH / _KEY_PATH); ``dev`` names them
    # ``--web-tls-cert/--web-tls-key``, as its other web flags.
    web_command = "--port" in port_flags
    https = parser.add_argument_group("HTTPS", conflict_handler="resolve") if web_command else parser
    https.add_argument(
        *(("--tls-cert",) if web_command else ()),
        "--web-tls-cert",
        dest="web_tls_cert",
        help="serve the web chat over HTTPS with this PEM certificate (with its key)",
    )
    https.add_argument(
        *(("--tls-key",) if web_command else ()),
        "--web-tls-key",
        dest="web_tls_key",
        help="the HTTPS certificate's PEM private key",
    )


def add_output_option(parser: argparse.ArgumentParser) -> None:
    """``--output text|json`` for a command that prints data."""
    parser.add_argument(
        "--output",
        "-o",
        choices=("text", "json"),
        default="text",
        help="text for people (default) or json for programs",
    )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agentcore")
    except PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown"


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    return int(value) if value else None


__all__ = [
    "DEFAULT_DEMO_PORT",
    "CliError",
    "DEFAULT_WEB_PORT",
    "add_output_option",
    "add_web_options",
    "build_parser",
    "LazyCommand",
]
