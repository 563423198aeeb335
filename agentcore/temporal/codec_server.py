"""The remote codec endpoint the Temporal Web UI calls to show encrypted payloads in clear.

    agentcore codec-server --port 8081      # then in the UI: Settings -> Codec Server -> http://localhost:8081

It speaks the UI's protocol: ``POST /decode`` and ``POST /encode`` with a JSON body
``{"payloads": [...]}`` (payloads in protobuf JSON form: base64 metadata values and data) answer
``{"payloads": [...]}``, with CORS headers for the UI's origin (preflight ``OPTIONS`` included). The
embedded dev server is started with ``--ui-codec-endpoint`` pointing here, so its UI needs no setup.

It decrypts for whoever may call it, so it is guarded like the web chat:

- **A token** is required on every ``/decode`` and ``/encode``: ``Authorization: Bearer TOKEN``
  (what the Web UI sends with "pass access token" or behind a proxy), the ``X-Codec-Token`` header,
  or as the endpoint's first path segment, ``http://host:8081/TOKEN`` (the UI then posts to
  ``/TOKEN/decode``: the form any UI can be configured with). ``CodecServer.endpoint`` is that URL.
- **Origins**: a browser request from an origin not in ``origins`` is refused (403), not only denied
  the CORS headers.
- It binds 127.0.0.1 unless told otherwise. ``GET /health`` answers without a token (and decodes
  nothing) for health checks.

A Starlette app, served by uvicorn on a thread of its own (with its own event loop): it can run
beside a worker's asyncio loop without sharing it, and decoding (a few AES calls) runs in Starlette's
thread pool, so one large request holds up no other.
"""

from __future__ import annotations

import secrets
import socket
import threading
import time
from collections.abc import Callable, Sequence
from http import HTTPStatus

import uvicorn
from google.protobuf import json_format
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from temporalio.api.common.v1 import Payload, Payloads

from .codec import EncryptionCodec, EncryptionKeyError

DEFAULT_ORIGINS = ("http://localhost:8233", "http://127.0.0.1:8233", "http://localhost:8080")
CODEC_TOKEN_ENV = "AGENTCORE_CODEC_TOKEN"
TOKEN_HEADER = "X-Codec-Token"
_MAX_BODY = 64 * 1024 * 1024
_START_TIMEOUT_SECONDS = 10.0


def _reply(status: HTTPStatus, message: str) -> JSONResponse:
    return JSONResponse({"message": message}, status_code=status)


class _BodyTooLarge(Exception):
    """The request's body is larger than ``_MAX_BODY``."""


async def _read_body(request: Request) -> bytes:
    """The body, refused past ``_MAX_BODY`` whether or not it says its length up front."""
    if int(request.headers.get("Content-Length") or 0) > _MAX_BODY:
        raise _BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > _MAX_BODY:
            raise _BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def codec_app(codec: EncryptionCodec, origins: Sequence[str], token: str) -> Starlette:
    """The codec endpoint as an ASGI app: ``/decode`` and ``/encode`` for callers with ``token``,
    from ``origins`` (``"*"``: any), and ``/health``."""
    allowed = set(origins)
    expected = token.encode()
    transforms: dict[str, Callable[[Sequence[Payload]], list[Payload]]] = {
        "/decode": codec.decode_sync,
        "/encode": codec.encode_sync,
    }

    def valid(candidate: str | None) -> bool:
        return candidate is not None and secrets.compare_digest(candidate.encode(), expected)

    def route(request: Request) -> tuple[str, bool]:
        """The path without a leading token segment, and whether a valid token came with it."""
        path = request.url.path.rstrip("/")
        scheme, _, bearer = request.headers.get("Authorization", "").partition(" ")
        authorized = (scheme.lower() == "bearer" and valid(bearer.strip())) or valid(
            request.headers.get(TOKEN_HEADER)
        )
        first, _, rest = path.lstrip("/").partition("/")
        if rest and valid(first):
            return "/" + rest, True
        return path, authorized

    async def transform(request: Request) -> Response:
        # The CORS middleware only withholds its headers from another site: the request is refused.
        origin = request.headers.get("Origin")
        if origin is not None and "*" not in allowed and origin not in allowed:
            return _reply(HTTPStatus.FORBIDDEN, f"requests from {origin} are refused")
        path, authorized = route(request)
        if not authorized:
            return _reply(
                HTTPStatus.UNAUTHORIZED,
                f"send the codec token (Authorization: Bearer, {TOKEN_HEADER}, or /TOKEN/decode)",
            )
        operation = transforms.get(path)
        if operation is None:
            return _reply(HTTPStatus.NOT_FOUND, f"no route {request.url.path}; use /decode or /encode")
        try:
            body = await _read_body(request)
        except _BodyTooLarge:
            return _reply(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "body too large")
        try:
            result = await run_in_threadpool(_apply, operation, body)
        except json_format.ParseError as err:
            return _reply(HTTPStatus.BAD_REQUEST, f"not a Payloads JSON body: {err}")
        except EncryptionKeyError as err:
            return _reply(HTTPStatus.BAD_REQUEST, str(err))
        except Exception:  # a payload that fails authentication: tampered, or another key
            return _reply(HTTPStatus.BAD_REQUEST, "a payload could not be decrypted")
        return JSONResponse(json_format.MessageToDict(result))

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    return Starlette(
        routes=[
            Route("/health", health, methods=["GET"]),
            # Any path: the token may come as its first segment (``/TOKEN/decode``).
            Route("/{path:path}", transform, methods=["POST"]),
        ],
        middleware=[
            Middleware(
                CORSMiddleware,
                allow_origins=list(origins),
                allow_credentials=True,
                allow_methods=["POST", "OPTIONS"],
                allow_headers=["Content-Type", "X-Namespace", "Authorization", TOKEN_HEADER],
            )
        ],
        exception_handlers={404: _elsewhere, 405: _elsewhere},
    )


async def _elsewhere(request: Request, exc: Exception) -> Response:
    # Any GET but /health is not found (as /decode, the one other route, is POSTed).
    status = HTTPStatus.NOT_FOUND
    if isinstance(exc, HTTPException) and request.method != "GET":
        status = HTTPStatus(exc.status_code)
    return _reply(status, "POST /decode or /encode")


def _apply(operation: Callable[[Sequence[Payload]], list[Payload]], body: bytes) -> Payloads:
    payloads = json_format.Parse(body or b"{}", Payloads())
    return Payloads(payloads=operation(list(payloads.payloads)))


def _bind(host: str, port: int) -> socket.socket:
    # Bound here, not when serving starts: a port taken fails the constructor, and port 0's choice
    # is known at once (``url``).
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


class CodecServer:
    """``CodecServer(codec, port=8081).start()`` serves from a daemon thread; ``stop()`` ends it.

    ``token``: the one callers must send (a new random one when not given; ``.token`` says it)."""

    def __init__(
        self,
        codec: EncryptionCodec,
        *,
        host: str = "127.0.0.1",
        port: int = 8081,
        origins: Sequence[str] = DEFAULT_ORIGINS,
        token: str | None = None,
    ) -> None:
        self.token = token or secrets.token_urlsafe(32)
        self._socket = _bind(host, port)
        # One line per UI request would drown the worker's own output: no access log.
        config = uvicorn.Config(
            codec_app(codec, origins, self.token), log_level="warning", access_log=False, lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}"

    @property
    def endpoint(self) -> str:
        """The codec endpoint to give the Web UI: the URL with the token as its first segment."""
        return f"{self.url}/{self.token}"

    def start(self) -> CodecServer:
        """Serve from a daemon thread; returns once the server accepts requests."""
        self._thread = threading.Thread(target=self.serve_forever, name="codec-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + _START_TIMEOUT_SECONDS
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the codec server did not start on {self.url}")
            time.sleep(0.01)
        return self

    def serve_forever(self) -> None:
        self._server.run(sockets=[self._socket])

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        self._socket.close()
