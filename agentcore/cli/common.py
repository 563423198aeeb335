"""What the CLI's commands share: connecting (flags and environment, one-line failures, exit codes),
reaching conversations, and the demo model and tools ``dev``, ``chat`` and ``web`` offer.

Light at import, as the package is: Temporal, pydantic and httpx load when a command runs, not to
parse its flags or print help (``tests/cli/test_cli_startup.py``)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..logs import cli_logger
from .parser import DEFAULT_DEMO_PORT, CliError

if TYPE_CHECKING:
    from temporalio.client import Client

    from ..client import AgentClient, DurableAgent
    from ..model import Model
    from ..temporal.connect import ConnectionSettings

EXIT_REFUSED = 1
EXIT_USAGE = 2  # argparse's own
EXIT_NOT_FOUND = 3
EXIT_UNREACHABLE = 69  # sysexits.h EX_UNAVAILABLE: the service is not there

DEMO_MODEL_ID = "cellar-demo"

DEMO_TOOL_NAMES = ("search_wines", "wine_details", "update_stock", "cellar_summary", "calculator", "clock")


def connection_settings(args: argparse.Namespace) -> ConnectionSettings:
    """The connection flags given; what they leave out comes from ``temporalio.envconfig``."""
    from ..temporal.connect import ConnectionSettings

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
    import asyncio

    from temporalio.service import RPCError

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


def default_sessions_dir(args: argparse.Namespace) -> Path:
    return Path(args.sessions_dir) if args.sessions_dir else Path(args.data_dir) / "sessions"


async def agents_for(args: argparse.Namespace) -> AgentClient:
    from ..client import AgentClient

    client = await connect_or_fail(args)
    return AgentClient(client, task_queue=args.task_queue, sessions_dir=default_sessions_dir(args))


async def attached(args: argparse.Namespace) -> DurableAgent:
    agents = await agents_for(args)
    return await agents.attach(args.session)


def demo_model(port: int) -> Model:
    """The offline demo's model: the sommelier script behind the loopback OpenAI-compatible server."""
    from ..model import Model

    return Model(
        id=DEMO_MODEL_ID,
        name="Cellar demo (offline, scripted)",
        provider="demo",
        api="openai-completions",
        base_url=f"http://127.0.0.1:{port}/v1",
    )


def demo_port() -> int:
    return int(os.environ.get("AGENTCORE_DEMO_PORT", DEFAULT_DEMO_PORT))


def choose_model(spec: str | None, base_url: str | None, port: int) -> Model:
    """``--model``: ``demo``, ``provider/model-id`` from the catalog, or any OpenAI-compatible model.

    Without ``--model``: Anthropic if ``ANTHROPIC_API_KEY`` is set, else OpenAI if ``OPENAI_API_KEY``
    is, else the offline demo model."""
    from ..model import Model
    from ..providers import get_model
    from ..providers.catalog import UnknownModelError

    if spec is None:
        if os.environ.get("ANTHROPIC_API_KEY"):
            spec = "anthropic/claude-sonnet-4-5"
        elif os.environ.get("OPENAI_API_KEY"):
            spec = "openai/gpt-4o-mini"
        else:
            spec = "demo"
    if spec == "demo":
        return demo_model(port)
    provider, _, model_id = spec.partition("/")
    if not model_id:
        raise ValueError(f"--model takes 'demo' or 'provider/model-id', not {spec!r}")
    try:
        model = get_model(provider, model_id)
    except UnknownModelError:
        api = "anthropic-messages" if provider == "anthropic" else "openai-completions"
        model = Model(id=model_id, provider=provider, api=api)
    if base_url:
        model = model.model_copy(update={"base_url": base_url})
    return model


def needs_demo_server(model: Model) -> bool:
    return model.provider == "demo"


def progress(text: str) -> None:
    cli_logger().info(text)


async def attach_or_start(
    agents: AgentClient, session_id: str, model: Model, extra_tools: Sequence[str] = ()
) -> DurableAgent:
    """The running conversation ``session_id``, or a new demo conversation under that id (with the
    demo tools and ``extra_tools``, the MCP servers' groups ``dev --mcp`` named)."""
    from ..demo import DEMO_SYSTEM_PROMPT
    from ..errors import AgentNotFoundError
    from ..state import AgentOptions

    try:
        agent = await agents.attach(session_id)
        progress(f"attached to the running conversation {session_id}")
        return agent
    except AgentNotFoundError:
        pass
    tools: list[str] = [*DEMO_TOOL_NAMES, *extra_tools]
    options = AgentOptions(model=model, tools=tools, system_prompt=DEMO_SYSTEM_PROMPT)
    return await agents.start(session_id, options)
