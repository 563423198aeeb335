"""Who may use the web chat: the token, the Host header, and same-origin state changes.

- **Token** (``--token`` / ``AGENTCORE_WEB_TOKEN``; generated off loopback when none is given): at
  least 32 random bytes' worth (``weak_token_problem`` says why a token is refused), sent as
  ``Authorization: Bearer TOKEN`` or in the ``agentcore_web_token`` cookie (HttpOnly,
  SameSite=Strict). The link ``agentcore web`` prints carries a one-time code, not the token:
  ``?code=...`` is exchanged for the cookie and a redirect to the same address without it, so the
  browser's history never holds a credential (``?token=TOKEN`` is still accepted the same way). A
  browser without the cookie gets a small sign-in form.
- **Failed sign-ins** (a wrong token in the query, the form or a Bearer header, a used or unknown
  code) are counted per client: after ``SIGN_IN_ATTEMPTS`` in ``SIGN_IN_WINDOW`` seconds, every
  sign-in is answered 429 with ``Retry-After`` until the oldest failure is that old.
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
import math
import secrets
import string
import time
from collections import deque
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
SIGN_IN_ATTEMPTS = 5
SIGN_IN_WINDOW = 60.0
# A printed sign-in link works once, within this many seconds.
CODE_LIFETIME = 24 * 3600.0
TOKEN_MIN_BITS = 256  # 32 random bytes
BASE64_CHARS = frozenset(string.ascii_letters + string.digits + "-_+/")


def generate_token() -> str:
    """A token of 32 random bytes (URL-safe base64)."""
    return secrets.token_urlsafe(32)


def weak_token_problem(token: str) -> str | None:
    """Why ``token`` is too weak to guard the chat (under 32 random bytes' worth), or None.

    Its strength is estimated from its length and alphabet, as if each character were drawn at
    random: hex 4 bits a character, base64 6, anything else 6.5. The bar is length: 64 hex digits,
    43 base64 characters (``secrets.token_urlsafe(32)``, ``openssl rand -base64 32``)."""
    stripped = token.rstrip("=")
    if stripped and all(char in string.hexdigits for char in stripped):
        per_char = 4.0
    elif all(char in BASE64_CHARS for char in stripped):
        per_char = 6.0
    else:
        per_char = math.log2(95)
    bits = len(stripped) * per_char
    if bits >= TOKEN_MIN_BITS:
        return None
    return (
        f"the token is too weak (about {bits:.0f} bits; at least {TOKEN_MIN_BITS}, 32 random bytes, are "
        "needed): make one with  python -c 'import secrets; print(secrets.token_urlsafe(32))'"
    )


class SignIns:
    """One-time sign-in codes, and the failed sign-ins of each client (for the rate limit)."""

    def __init__(self) -> None:
        self._codes: dict[str, float] = {}
        self._failures: dict[str, deque[float]] = {}

    def issue(self) -> str:
        now = time.monotonic()
        self._codes = {code: until for code, until in self._codes.items() if until > now}
        code = secrets.token_urlsafe(24)
        self._codes[code] = now + CODE_LIFETIME
        return code

    def redeem(self, code: str) -> bool:
        until = self._codes.pop(code, None)
        return until is not None and until > time.monotonic()

    def retry_after(self, client: str) -> int | None:
        """Seconds until ``client`` may try again, or None when it may now."""
        failures = self._failures.get(client)
        if not failures:
            return None
        now = time.monotonic()
        while failures and failures[0] <= now - SIGN_IN_WINDOW:
            failures.popleft()
        if len(failures) < SIGN_IN_ATTEMPTS:
            if not failures:
                del self._failures[client]
            return None
        return max(1, math.ceil(failures[0] + SIGN_IN_WINDOW - now))

    def failed(self, client: str) -> None:
        if len(self._failures) > 10_000:  # many clients: forget the quietest
            self._failures.pop(next(iter(self._failures)))
        self._failures.setdefault(client, deque()).append(time.monotonic())


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

    def __init__(self, app: ASGIApp, *, token: str | None, sign_ins: SignIns | None = None) -> None:
        self.app = app
        self.token = token or None
        self.sign_ins = sign_ins or SignIns()

    def _valid(self, candidate: str | None) -> bool:
        return (
            self.token is not None
            and candidate is not None
            and secrets.compare_digest(candidate.encode(), self.token.encode())
        )

    def _bearer(self, request: Request) -> str | None:
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        return credentials.strip() if scheme.lower() == "bearer" else None

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
        query = request.query_params
        bearer = self._bearer(request)
        signing_in = path == "/login" and request.method == "POST"
        presented = signing_in or bearer is not None or "token" in query or "code" in query
        client = request.client.host if request.client else "?"
        if presented:
            wait = self.sign_ins.retry_after(client)
            if wait is not None:
                return self._too_many(path, wait)
        if signing_in:
            return await self._sign_in(request, client)
        if request.method == "GET" and ("token" in query or "code" in query):
            code, token = query.get("code"), query.get("token")
            if (code is not None and self.sign_ins.redeem(code)) or (
                token is not None and self._valid(token)
            ):
                rest = [(k, v) for k, v in parse_qsl(request.url.query) if k not in ("token", "code")]
                target = path + (f"?{urlencode(rest)}" if rest else "")
                return self._cookie(RedirectResponse(target, status_code=303), request)
            self.sign_ins.failed(client)
            if not path.startswith("/api/"):
                problem = "That sign-in link was used already or is not valid: sign in with the token."
                return self._sign_in_page(path, problem=f'<p class="problem">{problem}</p>')
        if bearer is not None:
            if self._valid(bearer):
                return None
            self.sign_ins.failed(client)
            return _error(401, "UNAUTHORIZED", "that token is not this chat's")
        if self._valid(request.cookies.get(TOKEN_COOKIE)) or path.startswith("/static/"):
            return None
        if path.startswith("/api/"):
            return _error(401, "UNAUTHORIZED", "send the token: Authorization: Bearer TOKEN")
        return self._sign_in_page(path, problem="")

    def _too_many(self, path: str, wait: int) -> Response:
        message = f"too many failed sign-ins from this address: try again in {wait} s"
        headers = {"Retry-After": str(wait)}
        if path.startswith("/api/"):
            return JSONResponse({"error": "TOO_MANY_SIGN_INS", "message": message}, 429, headers=headers)
        page = SIGN_IN_PAGE.format(next="/", problem=f'<p class="problem">{html.escape(message)}.</p>')
        return HTMLResponse(page, status_code=429, headers=headers)

    def _sign_in_page(self, path: str, problem: str) -> HTMLResponse:
        page = SIGN_IN_PAGE.format(next=html.escape(path), problem=problem)
        return HTMLResponse(page, status_code=401)

    async def _sign_in(self, request: Request, client: str) -> Response:
        # The form is urlencoded: the standard library reads it (no multipart parser needed).
        form = dict(parse_qsl((await request.body()).decode("utf-8", "replace")))
        token, target = form.get("token"), form.get("next", "/")
        if not target.startswith("/") or target.startswith("//"):
            target = "/"  # never a redirect off this site
        if token is not None and self._valid(token):
            return self._cookie(RedirectResponse(target, status_code=303), request)
        self.sign_ins.failed(client)
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


__all__ = [
    "TOKEN_COOKIE",
    "TOKEN_ENV",
    "Guard",
    "SignIns",
    "cross_origin",
    "generate_token",
    "is_loopback",
    "weak_token_problem",
]
