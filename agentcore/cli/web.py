"""``agentcore web``: the web chat for the conversations on a Temporal server (``dev`` serves it too)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from ..client import AgentClient
from ..demo import DEMO_SYSTEM_PROMPT
from ..model import Model
from ..providers.catalog import MODELS
from .common import agents_for
from .parser import DEFAULT_WEB_PORT, CliError, add_web_options

if TYPE_CHECKING:
    from ..web import RunningWebServer


def model_suggestions(default: Model) -> list[str]:
    """The "new conversation" form's models: ``default`` (the one this command would use) first."""
    first = "demo" if default.provider == "demo" else f"{default.provider}/{default.id}"
    catalog = [
        "demo",
        *(f"{provider}/{model_id}" for provider, models in MODELS.items() for model_id in models),
    ]
    return [first, *(spec for spec in catalog if spec != first)]


def web_token(args: argparse.Namespace) -> str | None:
    """``--token``, checked; off loopback without one, a new one (said once on stderr: it signs a
    browser in on another machine, where the printed one-time link may not be opened)."""
    from ..web import WebServerError, check_exposure, is_loopback
    from ..web.security import generate_token

    token: str | None = args.token or None
    if token is None and not is_loopback(args.web_host):
        token = generate_token()
        print(
            f"web chat token (generated; pass --token or set AGENTCORE_WEB_TOKEN to choose one): {token}",
            file=sys.stderr,
            flush=True,
        )
    try:
        check_exposure(args.web_host, token)
    except WebServerError as err:
        raise CliError(str(err), exit_code=2) from None
    return token


@asynccontextmanager
async def serving_web(
    args: argparse.Namespace,
    agents: AgentClient,
    resolve_model: Callable[[str], Model],
    default_model: Model,
    tools: list[str],
    temporal_ui_url: str | None,
) -> AsyncIterator[RunningWebServer]:
    """Serve the web chat for ``agents`` while the block runs; yields the server (``link()``)."""
    from ..web import WebServerError, WebSettings, create_app, serve_web

    args.token = web_token(args)  # checked (again: a generated one passes) or generated
    settings = WebSettings(
        resolve_model=resolve_model,
        models=model_suggestions(default_model),
        tools=tools,
        system_prompt=DEMO_SYSTEM_PROMPT,
        token=args.token or None,
        temporal_ui_url=temporal_ui_url,
    )
    serving = serve_web(
        create_app(agents, settings),
        host=args.web_host,
        port=args.web_port,
        token=settings.token,
        tls_cert=args.web_tls_cert,
        tls_key=args.web_tls_key,
    )
    async with contextlib.AsyncExitStack() as stack:
        try:
            server = await stack.enter_async_context(serving)
        except WebServerError as err:
            raise CliError(str(err), exit_code=2) from None
        yield server


async def cmd_web(args: argparse.Namespace) -> int:
    from .common import DEMO_TOOL_NAMES, choose_model

    args.token = web_token(args)  # before connecting: a refusal should be instant
    agents = await agents_for(args)

    def resolve_model(spec: str) -> Model:
        return choose_model(spec, args.base_url, args.demo_port)

    try:
        default_model = choose_model(args.model, args.base_url, args.demo_port)
    except ValueError as err:
        raise CliError(str(err), exit_code=2) from None
    tools = list(args.tool or DEMO_TOOL_NAMES)
    async with serving_web(args, agents, resolve_model, default_model, tools, args.temporal_ui) as server:
        print(f"web chat at {server.link()} (Ctrl-C stops it)", file=sys.stderr, flush=True)
        await asyncio.Event().wait()
    return 0


__all__ = ["DEFAULT_WEB_PORT", "add_web_options", "cmd_web", "model_suggestions", "serving_web", "web_token"]
