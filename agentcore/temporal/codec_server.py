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

Stdlib ``http.server`` in a thread: decoding is a few AES calls, no event loop is needed, and a
blocking server can run beside a worker's asyncio loop without sharing it.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Callable, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads

from .codec import EncryptionCodec, EncryptionKeyError

DEFAULT_ORIGINS = ("http://localhost:8233", "http://127.0.0.1:8233", "http://localhost:8080")
CODEC_TOKEN_ENV = "AGENTCORE_CODEC_TOKEN"
TOKEN_HEADER = "X-Codec-Token"
_MAX_BODY = 64 * 1024 * 1024


def _handler(codec: EncryptionCodec, origins: Sequence[str], token: str) -> type[BaseHTTPRequestHandler]:
    allowed = set(origins)
    expected = token.encode()

    def valid(candidate: str | None) -> bool:
        return candidate is not None and secrets.compare_digest(candidate.encode(), expected)

    class CodecHandler(BaseHTTPRequestHandler):
        server_version = "agentcore-codec"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one line per UI request would drown the worker's own output

        def _cors(self) -> None:
            origin = self.headers.get("Origin")
            if origin and ("*" in allowed or origin in allowed):
                self.send_header("Access-Control-Allow-Origin", origin)
                self.send_header("Access-Control-Allow-Credentials", "true")
                self.send_header("Access-Control-Allow-Methods", "POST, OPTIONS")
                self.send_header(
                    "Access-Control-Allow-Headers",
                    f"Content-Type, X-Namespace, Authorization, {TOKEN_HEADER}",
                )
                self.send_header("Vary", "Origin")

        def _reply(self, status: HTTPStatus, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self._cors()
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_OPTIONS(self) -> None:  # noqa: N802 - http.server's naming
            self.send_response(HTTPStatus.OK)
            self._cors()
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:  # noqa: N802
            if self.path.split("?", 1)[0].rstrip("/") == "/health":
                self._reply(HTTPStatus.OK, {"status": "ok"})
            else:
                self._reply(HTTPStatus.NOT_FOUND, {"message": "POST /decode or /encode"})

        def _route(self) -> tuple[str, bool]:
            """The path without a leading token segment, and whether a valid token came with it."""
            path = self.path.split("?", 1)[0].rstrip("/")
            scheme, _, bearer = self.headers.get("Authorization", "").partition(" ")
            authorized = (scheme.lower() == "bearer" and valid(bearer.strip())) or valid(
                self.headers.get(TOKEN_HEADER)
            )
            first, _, rest = path.lstrip("/").partition("/")
            if rest and valid(first):
                return "/" + rest, True
            return path, authorized

        def do_POST(self) -> None:  # noqa: N802
            origin = self.headers.get("Origin")
            if origin is not None and "*" not in allowed and origin not in allowed:
                self._reply(HTTPStatus.FORBIDDEN, {"message": f"requests from {origin} are refused"})
                return
            path, authorized = self._route()
            if not authorized:
                self._reply(
                    HTTPStatus.UNAUTHORIZED,
                    {
                        "message": f"send the codec token (Authorization: Bearer, {TOKEN_HEADER}, or /TOKEN/decode)"
                    },
                )
                return
            transform: Callable[[Sequence[Payload]], list[Payload]] | None = {
                "/decode": codec.decode_sync,
                "/encode": codec.encode_sync,
            }.get(path)
            if transform is None:
                self._reply(
                    HTTPStatus.NOT_FOUND, {"message": f"no route {self.path}; use /decode or /encode"}
                )
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length > _MAX_BODY:
                self._reply(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {"message": "body too large"})
                return
            try:
                payloads = json_format.Parse(self.rfile.read(length) or b"{}", Payloads())
                result = Payloads(payloads=transform(list(payloads.payloads)))
            except json_format.ParseError as err:
                self._reply(HTTPStatus.BAD_REQUEST, {"message": f"not a Payloads JSON body: {err}"})
                return
            except EncryptionKeyError as err:
                self._reply(HTTPStatus.BAD_REQUEST, {"message": str(err)})
                return
            except Exception:  # a payload that fails authentication: tampered, or another key
                self._reply(HTTPStatus.BAD_REQUEST, {"message": "a payload could not be decrypted"})
                return
            self._reply(HTTPStatus.OK, json_format.MessageToDict(result))

    return CodecHandler


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
        self._server = ThreadingHTTPServer((host, port), _handler(codec, origins, self.token))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host if isinstance(host, str) else host.decode()}:{port}"

    @property
    def endpoint(self) -> str:
        """The codec endpoint to give the Web UI: the URL with the token as its first segment."""
        return f"{self.url}/{self.token}"

    def start(self) -> CodecServer:
        self._thread = threading.Thread(target=self._server.serve_forever, name="codec-server", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
