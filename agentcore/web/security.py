"""Who may use the web chat: the token, the Host header, and same-origin state changes.

- **Token** (``--token`` / ``AGENTCORE_WEB_TOKEN``; required off loopback): sent as
  ``Authorization: Bearer TOKEN`` or in the ``agentcore_web_token`` cookie. Opening any page with
  ``?token=TOKEN`` (the link ``agentcore web`` prints) sets the cookie and drops the token from the
  address; a browser without it gets a small sign-in form.
- **Host**: without a token the app serves only requests addressed to a loopback name, so a web page
  elsewhere cannot reach it by pointing a DNS name at 127.0.0.1 (DNS rebinding).
- **Headers** on every response: a Content-Security-Policy that allows only the app's own script and
  styles (no inline script, no ``eval``) and no framing, ``X-Frame-Options: DENY``,
  ``Referrer-Policy: same-origin`` (``no-referrer`` would make browsers send ``Origin: null`` with the sign-in form) and ``X-Content-Type-Options: nosniff``.
- **Origin**: a request that changes something (any method but GET / HEAD / OPTIONS) is refused when
  the browser says it comes from another site (``Origin`` or ``Sec-Fetch-Site``); API calls must also
  be JSON, which a cross-site form cannot send.
"""

from __future__ import annotations

import html
import ipaddress
import secrets
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import URL, Headers
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

TOKEN_COOKIE = "agentcore_web_token"
TOKEN_ENV = "AGENTCORE_WEB_TOKEN"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
# Inline style *attributes* are allowed for one thing: the text-align of Markdown table cells (the
# sanitiser keeps no other property). Scripts: this app's files only.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; font-src 'self'; manifest-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"x-content-type-options", b"nosniff"),
)


_OURS = frozenset(name for name, _ in SECURITY_HEADERS)


def is_loopback(host: str) -> bool:
    """True for a host name or address that only this machine can reach."""
    host = host.strip("[]")
    if host in LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _hostname(host_header: str) -> str:
    if host_header.startswith("["):  # [::1]:8080
        return host_header[1 : host_header.find("]")]
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": code, "message": message}, status_code=status)


SIGN_IN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>agentcore: sign in</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/static/app.css"></head>
<body class="sign-in"><form method="post" action="/login">
<h1>agentcore</h1><p>This chat needs its access token (<code>--token</code> or
<code>AGENTCORE_WEB_TOKEN</code> where it was started).</p>
<input type="hidden" name="next" value="{next}">
<input type="password" name="token" placeholder="token" autofocus autocomplete="current-password">
<button type="submit">Sign in</button>{problem}</form></body></html>"""


class Guard:
    """ASGI middleware applying the rules above to every request (the event stream included)."""

    def __init__(self, app: ASGIApp, *, token: str | None) -> None:
        self.app = app
        self.token = token or None

    def _valid(self, candidate: str | None) -> bool:
        return (
            self.token is not None
            and candidate is not None
            and secrets.compare_digest(candidate.encode(), self.token.encode())
        )

    def _authenticated(self, request: Request) -> bool:
        if self.token is None:
            return True
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and self._valid(credentials.strip()):
            return True
        return self._valid(request.cookies.get(TOKEN_COOKIE))

    def _cookie(self, response: Response, request: Request) -> Response:
        assert self.token is not None
        response.set_cookie(
            TOKEN_COOKIE,
            self.token,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return response

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (name, value) for name, value in message.get("headers", []) if name.lower() not in _OURS
                ]
                message = {**message, "headers": [*headers, *SECURITY_HEADERS]}
            await send(message)

        request = Request(scope, receive)
        response = await self._check(request)
        if response is None:
            await self.app(scope, receive, send_with_headers)
        else:
            await response(scope, receive, send_with_headers)

    async def _check(self, request: Request) -> Response | None:
        headers = request.headers
        if self.token is None and not is_loopback(_hostname(headers.get("host", ""))):
            return _error(403, "FORBIDDEN_HOST", "this chat answers only to localhost without a token")
        if request.method not in SAFE_METHODS:
            refused = cross_origin(request.url, headers)
            if refused:
                return _error(403, "CROSS_ORIGIN", refused)
        if self.token is None:
            return None
        path = request.url.path
        if path == "/login" and request.method == "POST":
            return await self._sign_in(request)
        query_token = request.query_params.get("token")
        if query_token is not None and request.method == "GET" and self._valid(query_token):
            rest = [(k, v) for k, v in parse_qsl(request.url.query) if k != "token"]
            target = path + (f"?{urlencode(rest)}" if rest else "")
            return self._cookie(RedirectResponse(target, status_code=303), request)
        if self._authenticated(request) or path.startswith("/static/"):
            return None
        if path.startswith("/api/"):
            return _error(401, "UNAUTHORIZED", "send the token: Authorization: Bearer TOKEN")
        return self._sign_in_page(path, problem="")

    def _sign_in_page(self, path: str, problem: str) -> HTMLResponse:
        page = SIGN_IN_PAGE.format(next=html.escape(path), problem=problem)
        return HTMLResponse(page, status_code=401)

    async def _sign_in(self, request: Request) -> Response:
        # The form is urlencoded: the standard library reads it (no multipart parser needed).
        form = dict(parse_qsl((await request.body()).decode("utf-8", "replace")))
        token, target = form.get("token"), form.get("next", "/")
        if not target.startswith("/") or target.startswith("//"):
            target = "/"  # never a redirect off this site
        if token is not None and self._valid(token):
            return self._cookie(RedirectResponse(target, status_code=303), request)
        return self._sign_in_page(target, problem='<p class="problem">That is not the token.</p>')


def cross_origin(url: URL, headers: Headers) -> str | None:
    """Why a state-changing request looks cross-site, or None. Browsers send ``Origin`` with every
    POST and ``Sec-Fetch-Site`` on every request; a client without them (curl) is not a browser
    and cannot be tricked into sending the user's cookie."""
    origin = headers.get("origin")
    own = f"{url.scheme}://{headers.get('host', '')}"
    if origin is not None and origin != own:
        return f"requests from {origin} may not change anything here"
    site = headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return f"a {site} request may not change anything here"
    return None


__all__ = ["TOKEN_COOKIE", "TOKEN_ENV", "Guard", "cross_origin", "is_loopback"]
