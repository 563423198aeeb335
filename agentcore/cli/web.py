"""``agentcore web``: the web chat for the conversations on a Temporal server (``dev`` serves it too)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from ..client import AgentClient
from ..demo import DEMO_SYSTEM_PROMPT
from ..model import Model
from ..providers.catalog import MODELS
from .commands import CliError, agents_for

DEFAULT_WEB_PORT = 8780


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
        help="the web chat's access token (AGENTCORE_WEB_TOKEN); required off loopback",
    )


def model_suggestions(default: Model) -> list[str]:
    """The "new conversation" form's models: ``default`` (the one this command would use) first."""
    first = "demo" if default.provider == "demo" else f"{default.provider}/{default.id}"
    catalog = [
        "demo",
        *(f"{provider}/{model_id}" for provider, models in MODELS.items() for model_id in models),
    ]
    return [first, *(spec for spec in catalog if spec != first)]


@asynccontextmanager
async def serving_web(
    args: argparse.Namespace,
    agents: AgentClient,
    resolve_model: Callable[[str], Model],
    default_model: Model,
    tools: list[str],
    temporal_ui_url: str | None,
) -> AsyncIterator[str]:
    """Serve the web chat for ``agents`` while the block runs; yields the address to open."""
    from ..web import WebServerError, WebSettings, create_app, serve_web

    settings = WebSettings(
        resolve_model=resolve_model,
        models=model_suggestions(default_model),
        tools=tools,
        system_prompt=DEMO_SYSTEM_PROMPT,
        token=args.token or None,
        temporal_ui_url=temporal_ui_url,
    )
    serving = serve_web(
        create_app(agents, settings), host=args.web_host, port=args.web_port, token=settings.token
    )
    async with contextlib.AsyncExitStack() as stack:
        try:
            server = await stack.enter_async_context(serving)
        except WebServerError as err:
            raise CliError(str(err), exit_code=2) from None
        yield server.link()


async def cmd_web(args: argparse.Namespace) -> int:
    from ..web import WebServerError, check_exposure
    from .dev import DEMO_TOOL_NAMES, choose_model

    try:
        check_exposure(args.web_host, args.token)  # before connecting: a refusal should be instant
    except WebServerError as err:
        raise CliError(str(err), exit_code=2) from None
    agents = await agents_for(args)

    def resolve_model(spec: str) -> Model:
        return choose_model(spec, args.base_url, args.demo_port)

    try:
        default_model = choose_model(args.model, args.base_url, args.demo_port)
    except ValueError as err:
        raise CliError(str(err), exit_code=2) from None
    tools = list(args.tool or DEMO_TOOL_NAMES)
    async with serving_web(args, agents, resolve_model, default_model, tools, args.temporal_ui) as link:
        print(f"web chat at {link} (Ctrl-C stops it)", file=sys.stderr, flush=True)
        await asyncio.Event().wait()
    return 0


__all__ = ["DEFAULT_WEB_PORT", "add_web_options", "cmd_web", "model_suggestions", "serving_web"]
