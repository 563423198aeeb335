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
import logging
import os
import signal
import sys
from collections.abc import Sequence

from ..errors import AgentError, AgentNotFoundError, NamespaceNotFoundError
from ..logs import cli_logger, setup_logging
from .common import (
    EXIT_NOT_FOUND,
    EXIT_REFUSED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    connect_or_fail,
    connection_settings,
)
from .parser import CliError, build_parser


def _coded(err: AgentError) -> str:
    text = str(err)
    return text if text.startswith(f"{err.code}:") else f"{err.code}: {text}"


def _fail(message: str, code: int) -> int:
    cli_logger().error(message)
    return code


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command and its flags (argparse exits on ``--help`` and on bad usage, with 2)."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and getattr(args, "trailing_text", False) and args.text is None and len(extra) == 1:
        # ``schedule SESSION --every 1h TEXT``: argparse (before Python 3.12) leaves a positional
        # given after an option unmatched when the one before it was optional.
        args.text = extra.pop()
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


async def run(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the command in the running event loop; returns the exit code."""
    return await _run_command(parse(argv))


async def _run_command(args: argparse.Namespace) -> int:
    setup_logging(args.log_format, args.log_level)
    try:
        return int(await args.handler(args))
    except CliError as err:
        return _fail(str(err), err.exit_code)
    except (AgentNotFoundError, NamespaceNotFoundError) as err:
        return _fail(_coded(err), EXIT_NOT_FOUND)
    except AgentError as err:
        return _fail(_coded(err), EXIT_REFUSED)
    except BrokenPipeError:
        # The reader left (``| head``) with what it wanted: not an error. Later output goes nowhere.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as err:
        return _fail(str(err), EXIT_USAGE)
    except Exception as err:
        refused = _temporal_refusal(err, args)
        if refused is not None:
            return refused
        # Logged, not printed by the interpreter: under --log-format json a crash is a JSON line too.
        logging.getLogger("agentcore").exception("%s failed: %s", args.command or "agentcore", err)
        return 1


def _temporal_refusal(err: Exception, args: argparse.Namespace) -> int | None:
    """The exit code for an error of Temporal's server (an ``RPCError``), else None."""
    if "temporalio.service" not in sys.modules:
        return None  # no command that reached Temporal ran: it cannot be one
    from temporalio.service import RPCError, RPCStatusCode

    from ..client import namespace_not_found

    if not isinstance(err, RPCError):
        return None
    if err.status == RPCStatusCode.UNAVAILABLE:
        where = args.address or "the configured address"
        return _fail(f"cannot reach Temporal at {where} ({err.message})", EXIT_UNREACHABLE)
    missing = namespace_not_found(err)
    if missing is not None:
        return _fail(_coded(missing), EXIT_NOT_FOUND)
    return _fail(f"Temporal refused the call: {err.message}", EXIT_REFUSED)


async def _run_until_terminated(args: argparse.Namespace) -> int:
    """The command, cancelled by SIGTERM (docker stop, kill): it unwinds as on any cancellation,
    so ``dev`` stops the server it started. Each SIGTERM cancels again; 143 once it has ended."""
    import asyncio

    task = asyncio.current_task()
    assert task is not None
    terminated = False

    def terminate() -> None:
        nonlocal terminated
        terminated = True
        task.cancel()

    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, terminate)
    try:
        return await _run_command(args)
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
        args = parse(argv)  # before the event loop: --help and bad usage load nothing more
        import asyncio

        code = asyncio.run(_run_until_terminated(args))
    except KeyboardInterrupt:
        code = 130
    # Exit without interpreter finalization: the Temporal SDK's core threads can still be winding
    # down, and finalizing under them aborts the process ("PyGILState_Release ... finalizing") after
    # the command has succeeded. Everything the commands write is flushed or closed by now.
    if "agentcore.temporal.tracing" in sys.modules:  # a command that connected may have traced
        from ..temporal.tracing import flush_tracing

        flush_tracing()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        pass  # the reader left (``| head``) with what it wanted
    sys.stderr.flush()
    os._exit(code)


__all__ = ["build_parser", "connect_or_fail", "connection_settings", "main", "parse", "run"]
