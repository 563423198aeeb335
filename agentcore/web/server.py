"""Serving the web chat with uvicorn inside a running event loop (``agentcore web`` and ``dev``)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import uvicorn
from starlette.applications import Starlette

from .security import SignIns, is_loopback, weak_token_problem


class WebServerError(Exception):
    """The web chat cannot be served as asked (a port taken, a public address without a token)."""


class _EmbeddedServer(uvicorn.Server):
    # The command that serves the app owns the process's signals (Ctrl-C aborts a chat turn in
    # ``dev``; SIGTERM cancels the command): uvicorn must not install handlers of its own.
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@dataclass
class RunningWebServer:
    host: str
    port: int
    token: str | None
    tls: bool = False
    sign_ins: SignIns | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        if host in ("0.0.0.0", "[::]"):
            host = socket.gethostname()
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    def link(self, path: str = "/") -> str:
        """The address to open. With a token, it carries a new one-time code (exchanged for the
        token's cookie on first use, so the address in the browser's history holds no credential)."""
        if not self.token:
            return f"{self.url}{path}"
        if self.sign_ins is None:
            return f"{self.url}{path}?token={self.token}"
        return f"{self.url}{path}?code={self.sign_ins.issue()}"


def check_exposure(host: str, token: str | None) -> None:
    """Refuses a public address without a token, and a token too weak to guard anything."""
    if not is_loopback(host) and not token:
        raise WebServerError(
            f"serving the web chat on {host} lets anyone on the network use your agents: "
            "pass --token (or set AGENTCORE_WEB_TOKEN), or keep the default --host 127.0.0.1"
        )
    problem = weak_token_problem(token) if token else None
    if problem:
        raise WebServerError(problem)


@contextlib.asynccontextmanager
async def serve_web(
    app: Starlette,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    token: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
) -> AsyncIterator[RunningWebServer]:
    """Serve ``app`` until the block ends; ``port`` 0 picks a free one (the result says which).
    ``tls_cert`` / ``tls_key`` (PEM files) serve HTTPS (behind a TLS proxy, leave them out)."""
    check_exposure(host, token)
    if bool(tls_cert) != bool(tls_key):
        raise WebServerError("HTTPS needs both --tls-cert and --tls-key")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        raise WebServerError(
            f"cannot serve the web chat on {host}:{port} ({err.strerror}); pass --web-port"
        ) from None
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="off",
        ssl_certfile=tls_cert,
        ssl_keyfile=tls_key,
    )
    try:
        config.load()  # reads the certificate and key now: a bad one is a clear error, not a crash later
    except (OSError, ValueError) as err:
        sock.close()
        raise WebServerError(f"cannot use the TLS certificate and key ({err})") from None
    server = _EmbeddedServer(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()  # its error
                raise WebServerError("the web server stopped while starting")
            await asyncio.sleep(0.02)
        sign_ins = getattr(app.state, "sign_ins", None)
        yield RunningWebServer(host, sock.getsockname()[1], token, bool(tls_cert), sign_ins)
    finally:
        server.should_exit = True
        # Open event streams would hold a graceful shutdown up: they end with the process anyway.
        server.force_exit = True
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(task, timeout=5)
        sock.close()


__all__ = ["RunningWebServer", "WebServerError", "check_exposure", "serve_web"]
