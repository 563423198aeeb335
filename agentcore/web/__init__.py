"""The web chat: a page to list, start and talk to durable conversations (``agentcore web``).

An ASGI app (Starlette, Server-Sent Events from the conversation's event offsets) that is a Temporal
client like the CLI; every asset ships in the package, with no build step and nothing from a CDN.

    app = create_app(AgentClient(client), WebSettings(resolve_model=...))
    async with serve_web(app, port=8780) as server:
        print(server.link())
"""

from __future__ import annotations

from .app import WebSettings, create_app
from .markdown import render_markdown
from .security import TOKEN_ENV, is_loopback
from .server import RunningWebServer, WebServerError, check_exposure, serve_web

__all__ = [
    "TOKEN_ENV",
    "RunningWebServer",
    "WebServerError",
    "WebSettings",
    "check_exposure",
    "create_app",
    "is_loopback",
    "render_markdown",
    "serve_web",
]
