"""``agentcore``: the command line.

    agentcore dev                       embedded Temporal (SQLite, Web UI) + worker + demo chat
    agentcore worker                    a worker for a cluster (TEMPORAL_* variables or flags)
        [--mcp NAME=COMMAND_OR_URL] [--mcp-config FILE]   ... with MCP servers' tools (dev too)
    agentcore chat [SESSION]            talk to a conversation (starts it if new)
    agentcore web                       the web chat: list, start and talk to conversations
    agentcore send|steer|follow-up SESSION TEXT, abort SESSION
    agentcore clear SESSION [--steering | --follow-up]   drop queued messages (both queues by default)
    agentcore approvals                 tool calls waiting for approval, in every conversation
    agentcore approve|deny SESSION CALL let a waiting tool call run (--args JSON) or refuse it (--reason)
    agentcore state SESSION             status, model, messages, queues, usage, pending wake-ups
    agentcore schedule SESSION --every 1h|--cron EXPR TEXT, --list, --delete ID   recurring messages
    agentcore terminate SESSION         end a conversation for good (and its schedules)
    agentcore events SESSION [--follow] [--from N]
    agentcore sessions                  every conversation, with status, model, messages and cost
    agentcore recover PATH              a new conversation from a JSONL session file
    agentcore export SESSION_OR_PATH    a session file as Markdown
    agentcore codec-server              decrypts payloads for the Temporal Web UI

Exit codes: 0 ok, 1 a refused command (the error's code is printed), 2 bad usage (flags, arguments,
settings), 3 not found (a session: ``AGENT_NOT_FOUND``; a namespace: ``NAMESPACE_NOT_FOUND``),
69 Temporal cannot be reached (sysexits' ``EX_UNAVAILABLE``), 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from ..client import namespace_not_found
from ..errors import AgentError, AgentNotFoundError, NamespaceNotFoundError
from ..logs import LOG_FORMATS, cli_logger, setup_logging
from ..temporal.connect import ConnectionSettings
from ..temporal.tracing import flush_tracing
from .approvals import add_approval_commands
from .commands import (
    CliError,
    add_output_option,
    cmd_abort,
    cmd_chat,
    cmd_clear,
    cmd_codec_server,
    cmd_events,
    cmd_export,
    cmd_follow_up,
    cmd_recover,
    cmd_schedule,
    cmd_send,
    cmd_sessions,
    cmd_state,
    cmd_steer,
    cmd_terminate,
)
from .dev import DEFAULT_DEMO_PORT, run_dev, run_worker
from .tree import add_tree_commands
from .web import add_web_options, cmd_web

Command = Callable[[argparse.Namespace], Awaitable[int]]

EXIT_REFUSED = 1
EXIT_USAGE = 2  # argparse's own
EXIT_NOT_FOUND = 3
EXIT_UNREACHABLE = 69  # sysexits.h EX_UNAVAILABLE: the service is not there


def connection_settings(args: argparse.Namespace) -> ConnectionSettings:
    """The connection flags given; what they leave out comes from ``temporalio.envconfig``."""
    return ConnectionSettings(
        address=args.address,
        namespace=args.namespace,
        api_key=args.api_key,
        tls=args.tls,
        tls_ca_cert=args.tls_ca_cert,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        tls_server_name=args.tls_server_name,
        profile=args.profile,
        config_file=args.config_file,
        grpc_meta=tuple(_grpc_meta(args.grpc_meta or ())),
    )


def _grpc_meta(values: Sequence[str]) -> list[tuple[str, str]]:
    pairs = []
    for value in values:
        key, equals, text = value.partition("=")
        if not equals or not key.strip():
            raise CliError(f"--grpc-meta takes KEY=VALUE, not {value!r}", exit_code=EXIT_USAGE)
        pairs.append((key.strip(), text))
    return pairs


async def connect_or_fail(args: argparse.Namespace, **client_options: Any) -> Client:
    """A client for the flags and environment, or ``CliError`` (exit 2) saying in one line why not."""
    from ..temporal import TemporalConfigError, connect, load_connect_config

    settings = connection_settings(args)
    try:
        target = load_connect_config(settings)["target_host"]
        return await asyncio.wait_for(connect(settings=settings, **client_options), timeout=15)
    except TemporalConfigError as err:
        raise CliError(str(err), exit_code=EXIT_USAGE) from None
    except (RuntimeError, TimeoutError, RPCError) as err:
        raise CliError(
            f"cannot reach Temporal at {target} ({connect_failure(err)})", exit_code=EXIT_UNREACHABLE
        ) from None


def connect_failure(err: BaseException) -> str:
    """Why a connection failed, in a few words: the SDK's message names the cause deep in a chain
    ("Failed client connect: ... invalid peer certificate: UnknownIssuer")."""
    if isinstance(err, TimeoutError):
        return "timed out"
    if not isinstance(err, RuntimeError):
        return type(err).__name__
    text = " ".join(str(err).split())
    for marker, reason in (
        ("ConnectionRefused", "connection refused"),
        ("Connection refused", "connection refused"),
        ("dns error", "dns error: the host name does not resolve"),
        ("failed to lookup address", "dns error: the host name does not resolve"),
        ("HostUnreachable", "host unreachable"),
        ("NetworkUnreachable", "network unreachable"),
        ("ConnectionReset", "connection reset"),
        ("timed out", "timed out"),
        ("invalid peer certificate", "TLS: the server's certificate is not trusted"),
        ("UnknownIssuer", "TLS: the server's certificate is not trusted"),
        ("NotValidForName", "TLS: the server's certificate does not name this host"),
        ("CertificateRequired", "TLS: the server requires a client certificate"),
        ("InvalidContentType", "TLS: the server does not speak TLS"),
        ("Unauthenticated", "the server refused the credentials"),
        ("PermissionDenied", "the server refused the credentials"),
    ):
        if marker in text:
            return reason
    return text.split(":", 1)[0]


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
    parser.add_argument("--version", action="version", version=f"agentcore {_version()}")
    _common(parser, suppress=False)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, handler: Command, help: str, *, connects: bool = True) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help)
        _common(sub, suppress=True, connects=connects)
        sub.set_defaults(handler=handler)
        return sub

    dev = command("dev", run_dev, "embedded Temporal dev server + worker + interactive demo chat")
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

    worker = command("worker", run_worker, "a worker for the conversations on a Temporal cluster")
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

    chat = command("chat", cmd_chat, "talk to a conversation (started with the demo tools if new)")
    chat.add_argument("session", nargs="?", help="session id (default: a new one)")
    chat.add_argument(
        "--attach-only", action="store_true", help="fail with AGENT_NOT_FOUND instead of starting"
    )
    chat.add_argument("--once", action="append", metavar="TEXT", help="ask TEXT (repeatable) and exit")
    chat.add_argument(
        "--plain", action="store_true", help="plain text (the default when stdout is no terminal)"
    )
    _model_options(chat)

    web = command("web", cmd_web, "the web chat: list, start and talk to conversations in a browser")
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

    send = command("send", cmd_send, "prompt a running conversation")
    send.add_argument("session")
    send.add_argument("text")
    send.add_argument("--wait", action="store_true", help="print the run's events until it ends")
    for name, handler, what in (
        ("steer", cmd_steer, "queue a steering message (taken after the current tool batch)"),
        ("follow-up", cmd_follow_up, "queue a follow-up message (taken when the agent would stop)"),
    ):
        sub = command(name, handler, what)
        sub.add_argument("session")
        sub.add_argument("text")
    clear = command("clear", cmd_clear, "drop queued steering and follow-up messages; prints what it removed")
    clear.add_argument("session")
    which = clear.add_mutually_exclusive_group()
    which.add_argument(
        "--steering", dest="queue", action="store_const", const="steering", help="only the steering queue"
    )
    which.add_argument(
        "--follow-up", dest="queue", action="store_const", const="follow_up", help="only the follow-up queue"
    )
    clear.set_defaults(queue="all")
    abort = command("abort", cmd_abort, "abort the current turn (the conversation goes on)")
    abort.add_argument("session")
    abort.add_argument("--reason")

    state = command("state", cmd_state, "a conversation's state")
    state.add_argument("session")
    add_output_option(state)
    state.add_argument(
        "--json", dest="output", action="store_const", const="json", help="the same as --output json"
    )

    schedule = command(
        "schedule",
        cmd_schedule,
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
        cmd_terminate,
        "end a conversation for good, deleting its schedules (recover it from its session file)",
    )
    terminate.add_argument("session")
    terminate.add_argument("--reason")

    events = command("events", cmd_events, "a conversation's events as JSON lines, with offsets")
    events.add_argument("session")
    events.add_argument(
        "--from", dest="from_offset", type=int, default=0, help="first offset (resume: last seen + 1)"
    )
    events.add_argument("--follow", "-f", action="store_true", help="keep printing new events")

    sessions = command("sessions", cmd_sessions, "list conversations: status, model, messages, cost")
    sessions.add_argument("--query", help="extra visibility query, e.g. 'AgentModel = \"openai/gpt-4o\"'")
    sessions.add_argument("--limit", type=int, default=50)
    add_output_option(sessions)

    recover = command("recover", cmd_recover, "start a conversation from a JSONL session file")
    recover.add_argument("path")
    recover.add_argument("--session-id", help="id of the new conversation (default: the file's)")

    export = command("export", cmd_export, "a JSONL session as Markdown", connects=False)
    export.add_argument("target", metavar="SESSION_OR_PATH")
    export.add_argument("-o", "--output", help="write to this file instead of stdout")

    add_tree_commands(command)
    add_approval_commands(command)

    codec = command(
        "codec-server", cmd_codec_server, "decrypt payloads for the Temporal Web UI", connects=False
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
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agentcore")
    except PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown"


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    return int(value) if value else None


def _coded(err: AgentError) -> str:
    text = str(err)
    return text if text.startswith(f"{err.code}:") else f"{err.code}: {text}"


def _fail(message: str, code: int) -> int:
    cli_logger().error(message)
    return code


async def run(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the command in the running event loop; returns the exit code."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and getattr(args, "trailing_text", False) and args.text is None and len(extra) == 1:
        # ``schedule SESSION --every 1h TEXT``: argparse (before Python 3.12) leaves a positional
        # given after an option unmatched when the one before it was optional.
        args.text = extra.pop()
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    setup_logging(args.log_format, args.log_level)
    try:
        handler: Command = args.handler
        return await handler(args)
    except CliError as err:
        return _fail(str(err), err.exit_code)
    except (AgentNotFoundError, NamespaceNotFoundError) as err:
        return _fail(_coded(err), EXIT_NOT_FOUND)
    except AgentError as err:
        return _fail(_coded(err), EXIT_REFUSED)
    except RPCError as err:
        if err.status == RPCStatusCode.UNAVAILABLE:
            where = args.address or "the configured address"
            return _fail(f"cannot reach Temporal at {where} ({err.message})", EXIT_UNREACHABLE)
        missing = namespace_not_found(err)
        if missing is not None:
            return _fail(_coded(missing), EXIT_NOT_FOUND)
        return _fail(f"Temporal refused the call: {err.message}", EXIT_REFUSED)
    except BrokenPipeError:
        # The reader left (``| head``) with what it wanted: not an error. Later output goes nowhere.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as err:
        return _fail(str(err), EXIT_USAGE)
    except Exception as err:
        # Logged, not printed by the interpreter: under --log-format json a crash is a JSON line too.
        logging.getLogger("agentcore").exception("%s failed: %s", args.command or "agentcore", err)
        return 1


async def _run_until_terminated(argv: Sequence[str] | None) -> int:
    """``run``, cancelled by SIGTERM (docker stop, kill): the command unwinds as on any cancellation,
    so ``dev`` stops the server it started. Each SIGTERM cancels again; 143 once it has ended."""
    task = asyncio.current_task()
    assert task is not None
    terminated = False

    def terminate() -> None:
        nonlocal terminated
        terminated = True
        task.cancel()

    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, terminate)
    try:
        return await run(argv)
    except asyncio.CancelledError:
        if terminated:
            return 128 + signal.SIGTERM
        raise


def _complete_if_asked() -> None:
    """Shell completion (``eval "$(register-python-argcomplete agentcore)"``): the shell runs the
    command with ``_ARGCOMPLETE`` set, and argcomplete answers from the parser and exits."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    try:
        import argcomplete
    except ImportError:  # pragma: no cover - a dependency; without it there is nothing to complete
        return
    argcomplete.autocomplete(build_parser())


def main(argv: Sequence[str] | None = None) -> int:
    _complete_if_asked()
    # Wine names have accents; a terminal (or pipe) in an ASCII locale must not crash on them.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="replace")
    try:
        code = asyncio.run(_run_until_terminated(argv))
    except KeyboardInterrupt:
        code = 130
    # Exit without interpreter finalization: the Temporal SDK's core threads can still be winding
    # down, and finalizing under them aborts the process ("PyGILState_Release ... finalizing") after
    # the command has succeeded. Everything the commands write is flushed or closed by now.
    flush_tracing()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        pass  # the reader left (``| head``) with what it wanted
    sys.stderr.flush()
    os._exit(code)


__all__ = ["build_parser", "connect_or_fail", "connection_settings", "main", "run"]
