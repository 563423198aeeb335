"""The web chat's HTTP side: the event stream's resume, the token, Host and Origin rules, the command."""

from __future__ import annotations

import asyncio
import os
import signal
import ssl
import subprocess
from pathlib import Path

import httpx
import orjson
import pytest
from temporalio.client import Client

from agentcore.web import RunningWebServer, WebServerError, render_markdown, serve_web
from tests.support.cli import AGENTCORE
from tests.support.tls import make_pki
from tests.support.web import Browser, needs_chromium, web_deployment

TOKEN = "Jx3kQ9vYt2LmW8pRz5nB0cHs7fGd4aKe1uXo6iVyTqM"  # 43 base64 characters: 32 random bytes


async def read_events(
    client: httpx.AsyncClient, url: str, headers: dict[str, str], stop: int | None = None
) -> list[tuple[int, dict[str, object]]]:
    """SSE events ``(id, data)`` until ``agent_end`` or the event with id ``stop`` (then it hangs up)."""
    events: list[tuple[int, dict[str, object]]] = []
    event_id, data = None, ""
    async with client.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        async for line in response.aiter_lines():
            if line.startswith("id:"):
                event_id = int(line[3:].strip())
            elif line.startswith("data:"):
                data += line[5:].strip()
            elif not line and event_id is not None:
                event = orjson.loads(data)
                events.append((event_id, event))
                if event.get("type") == "agent_end" or event_id == stop:
                    return events
                event_id, data = None, ""
    return events


async def test_the_event_stream_resumes_from_last_event_id(temporal_client: Client, tmp_path: Path) -> None:
    async with web_deployment(temporal_client, tmp_path) as web, httpx.AsyncClient(timeout=30) as http:
        agent = await web.start()
        start = await agent.event_offset()

        async def library_events() -> list[tuple[int, str]]:
            # Read as the run goes: once it ends past the threshold the conversation continues as
            # new, carrying only the newest events.
            seen = []
            async for offset, event in agent.events(start):
                seen.append((offset, event.type))
                if event.type == "agent_end":
                    return seen
            return seen

        library = asyncio.create_task(library_events())
        await agent.prompt("Count to 240, please")
        url = f"{web.url}/api/conversations/{agent.session_id}/events?from={start}"
        first = await read_events(http, url, {}, stop=start + 12)
        assert [offset for offset, _ in first] == list(range(start, start + 13))
        # A browser reconnecting sends the last id it saw, with the address it first opened.
        rest = await read_events(http, url, {"Last-Event-ID": str(start + 12)})
        offsets = [offset for offset, _ in first + rest]
        assert offsets == list(range(start, offsets[-1] + 1))
        text = "".join(
            str(event["delta"].get("delta", ""))  # type: ignore[union-attr]
            for _, event in first + rest
            if event["type"] == "message_update"
        )
        assert text.endswith("w240")
        # The same events, in the same order, as the client library sees them.
        assert [(offset, event["type"]) for offset, event in first + rest] == await library


async def test_the_snapshot_and_commands_answer_json(temporal_client: Client, tmp_path: Path) -> None:
    async with web_deployment(temporal_client, tmp_path) as web, httpx.AsyncClient(timeout=30) as http:
        agent = await web.start()
        base = f"{web.url}/api/conversations/{agent.session_id}"
        sent = await http.post(f"{base}/messages", json={"text": "What is 3 * 20?", "id": "m-1"})
        assert sent.json() == {"delivered_as": "prompt", "id": "m-1"}
        await agent.wait_for_idle(timeout=30)
        snapshot = (await http.get(base)).json()
        assert snapshot["status"] == "idle"
        assert [m["role"] for m in snapshot["messages"]] == ["user", "assistant", "toolResult", "assistant"]
        assert snapshot["messages"][-1]["html"] == "<p>3 * 20 = 60.</p>\n"
        assert all(m["entry_id"] for m in snapshot["messages"])
        assert snapshot["event_offset"] == await agent.event_offset()
        assert (
            snapshot["workflow_url"]
            == f"http://localhost:8233/namespaces/default/workflows/{agent.session_id}"
        )
        # Refusals are typed.
        missing = await http.get(f"{web.url}/api/conversations/no-such-conversation")
        assert missing.status_code == 404 and missing.json()["error"] == "AGENT_NOT_FOUND"
        empty = await http.post(f"{base}/messages", json={"text": "  "})
        assert empty.status_code == 400 and empty.json()["error"] == "VALIDATION_ERROR"
        form = await http.post(f"{base}/messages", data={"text": "hi"})
        assert form.status_code == 415
        bad_tool = await http.post(f"{web.url}/api/conversations", json={"model": "demo", "tools": ["rm_rf"]})
        assert bad_tool.status_code == 400 and bad_tool.json()["error"] == "TOOL_NOT_FOUND"
        bad_level = await http.post(f"{web.url}/api/conversations", json={"thinking_level": "loud"})
        assert bad_level.status_code == 400 and bad_level.json()["error"] == "VALIDATION_ERROR"
        taken = await http.post(f"{web.url}/api/conversations", json={"session_id": agent.session_id})
        assert taken.status_code == 409 and taken.json()["error"] == "AGENT_EXISTS"
        # Queued messages: cleared by queue, answering what was removed and what is left.
        await agent.steer("Only reds.", id="s-1")
        await agent.follow_up("And a cheese?", id="f-1")
        cleared = (await http.post(f"{base}/queues/clear", json={"queue": "steering"})).json()
        assert cleared == {
            "removed": [{"id": "s-1", "kind": "steer", "text": "Only reds."}],
            "queued": [{"id": "f-1", "kind": "follow_up", "text": "And a cheese?"}],
        }
        bad_queue = await http.post(f"{base}/queues/clear", json={"queue": "both"})
        assert bad_queue.status_code == 400 and bad_queue.json()["error"] == "VALIDATION_ERROR"
        cleared = (await http.post(f"{base}/queues/clear", json={})).json()
        assert [item["id"] for item in cleared["removed"]] == ["f-1"] and cleared["queued"] == []


async def test_branches_lists_the_versions_of_a_message_and_where_each_ends(
    temporal_client: Client, tmp_path: Path
) -> None:
    async with web_deployment(temporal_client, tmp_path) as web, httpx.AsyncClient(timeout=30) as http:
        agent = await web.start()
        api = f"{web.url}/api/conversations/{agent.session_id}"
        for text in ("What is 3 * 20?", "What is 4 * 10?"):
            await agent.prompt(text)
            await agent.wait_for_idle(timeout=30)
        page = await agent.get_messages()
        at = [m.role for m in page.messages].index("user", 1)  # the second question
        first_answer, question, old_end = page.entry_ids[at - 1], page.entry_ids[at], page.entry_ids[-1]
        assert (await http.get(f"{api}/branches")).json() == {"branches": [], "continuations": []}
        # An edit moved back, not yet sent: the question left is a branch to go forward to.
        await agent.branch(first_answer)
        listed = (await http.get(f"{api}/branches")).json()
        assert listed["branches"] == []
        assert listed["continuations"] == [
            {"entry_id": question, "leaf_id": old_end, "text": "What is 4 * 10?"}
        ]
        # Sent: two versions of the second question, the new one current.
        await agent.prompt("What is 5 * 10?")
        await agent.wait_for_idle(timeout=30)
        state = await agent.get_state()
        page = await agent.get_messages()
        [versions] = (await http.get(f"{api}/branches")).json()["branches"]
        assert versions == {
            "entry_id": page.entry_ids[at],
            "position": 1,
            "siblings": [
                {"entry_id": question, "leaf_id": old_end, "text": "What is 4 * 10?", "current": False},
                {
                    "entry_id": page.entry_ids[at],
                    "leaf_id": state.leaf_id,
                    "text": "What is 5 * 10?",
                    "current": True,
                },
            ],
        }
        # Switching is a branch to where the other version ends: the same list, the other one current.
        switched = await http.post(f"{api}/branch", json={"entry_id": old_end})
        assert switched.status_code == 200
        [back] = (await http.get(f"{api}/branches")).json()["branches"]
        assert (back["entry_id"], back["position"]) == (question, 0)
        assert [m.text for m in (await agent.get_state()).messages][-1] == "4 * 10 = 40."


async def test_state_changes_from_another_site_are_refused(temporal_client: Client, tmp_path: Path) -> None:
    async with web_deployment(temporal_client, tmp_path) as web, httpx.AsyncClient(timeout=30) as http:
        agent = await web.start()
        url = f"{web.url}/api/conversations/{agent.session_id}/abort"
        for headers in ({"Origin": "http://evil.example"}, {"Sec-Fetch-Site": "cross-site"}):
            refused = await http.post(url, json={}, headers=headers)
            assert refused.status_code == 403 and refused.json()["error"] == "CROSS_ORIGIN"
        assert (await http.post(url, json={}, headers={"Origin": web.url})).status_code == 200
        # Without a token, only requests addressed to a loopback name are served (DNS rebinding).
        rebound = await http.get(f"{web.url}/api/conversations", headers={"Host": "attacker.example:80"})
        assert rebound.status_code == 403 and rebound.json()["error"] == "FORBIDDEN_HOST"


async def test_the_token_is_required_when_set(temporal_client: Client, tmp_path: Path) -> None:
    async with (
        web_deployment(temporal_client, tmp_path, token=TOKEN) as web,
        httpx.AsyncClient(timeout=30) as http,
    ):
        listing = f"{web.url}/api/conversations"
        assert (await http.get(listing)).status_code == 401
        assert (await http.get(listing, headers={"Authorization": "Bearer wrong"})).status_code == 401
        assert (await http.get(listing, headers={"Authorization": f"Bearer {TOKEN}"})).status_code == 200
        page = await http.get(f"{web.url}/c/x")
        assert page.status_code == 401 and 'name="token"' in page.text
        # The printed link carries the token once: it becomes an HttpOnly, SameSite=Strict cookie.
        signed = await http.get(f"{web.url}/c/x?token={TOKEN}")
        assert signed.status_code == 303 and signed.headers["location"] == "/c/x"
        cookie = signed.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie
        assert (await http.get(listing)).status_code == 200  # the client kept the cookie


@needs_chromium
async def test_a_browser_signs_in_with_the_token(temporal_client: Client, tmp_path: Path) -> None:
    async with web_deployment(temporal_client, tmp_path, token=TOKEN) as web:
        browser = await Browser.launch()
        try:
            await browser.get(web.url + "/")
            assert await browser.js("return document.querySelector('input[name=token]') !== null")
            await browser.type("input[name=token]", "guess\n")
            await browser.wait_for("return document.body.innerText.includes('That is not the token')")
            await browser.type("input[name=token]", TOKEN + "\n")
            await browser.wait_for(
                "return document.querySelector('#conversations') && !document.querySelector('#list-view').hidden",
                what="the conversations page",
            )
            cookie_visible = await browser.js("return document.cookie.includes('agentcore_web_token')")
            assert not cookie_visible  # HttpOnly: page scripts cannot read it
        finally:
            await browser.quit()


def test_a_weak_token_is_refused() -> None:
    for token in ("a", "correct-horse-battery", "0123456789abcdef" * 3):
        result = subprocess.run(
            [AGENTCORE, "web", "--host", "0.0.0.0", "--port", "0", "--token", token],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert result.returncode == 2, token
        assert "the token is too weak" in result.stderr and "secrets.token_urlsafe(32)" in result.stderr


async def test_off_loopback_a_token_is_generated(temporal_client: Client) -> None:
    address = temporal_client.service_client.config.target_host
    process = await asyncio.create_subprocess_exec(
        AGENTCORE, "--address", address, "web", "--host", "0.0.0.0", "--port", "0",
        stderr=asyncio.subprocess.PIPE, env={**os.environ, "AGENTCORE_WEB_TOKEN": ""},
    )  # fmt: skip
    try:
        assert process.stderr is not None
        said = (await asyncio.wait_for(process.stderr.readline(), 60)).decode()
        assert said.startswith("web chat token (generated;")
        token = said.rsplit(": ", 1)[1].strip()
        assert len(token) >= 43
        line = (await asyncio.wait_for(process.stderr.readline(), 60)).decode()
        assert "?code=" in line and token not in line
        port = line.split()[3].split("?")[0].rsplit(":", 1)[1].strip("/")
        async with httpx.AsyncClient(timeout=30) as http:
            listing = f"http://127.0.0.1:{port}/api/conversations"
            assert (await http.get(listing)).status_code == 401
            assert (await http.get(listing, headers={"Authorization": f"Bearer {token}"})).status_code == 200
    finally:
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 30) == 143


async def test_the_web_command_serves_the_chat(temporal_client: Client, tmp_path: Path) -> None:
    address = temporal_client.service_client.config.target_host
    process = await asyncio.create_subprocess_exec(
        AGENTCORE, "--address", address, "web", "--port", "0", "--token", TOKEN,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        line = (await asyncio.wait_for(process.stderr.readline(), 60)).decode()
        assert line.startswith("web chat at http://127.0.0.1:") and "?code=" in line and TOKEN not in line
        link = line.split()[3]
        async with httpx.AsyncClient(timeout=30, follow_redirects=True) as http:
            page = await http.get(link)
            assert page.status_code == 200 and "/static/app.js" in page.text
            listing = await http.get(link.split("?")[0] + "api/conversations")
            assert listing.status_code == 200 and "conversations" in listing.json()
    finally:
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 30) == 143


@pytest.mark.parametrize(
    ("markdown", "html"),
    [
        ("<script>alert(1)</script>", "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>\n"),
        ('<img src=x onerror="alert(1)">', '<p>&lt;img src=x onerror="alert(1)"&gt;</p>\n'),
        ("[x](javascript:alert(1))", "<p>[x](javascript:alert(1))</p>\n"),
        (
            "![t](https://tracker.example/p.png)",
            '<p>!<a href="https://tracker.example/p.png" rel="noopener noreferrer nofollow">t</a></p>\n',
        ),
        (
            "[docs](https://example.com)",
            '<p><a href="https://example.com" rel="noopener noreferrer nofollow">docs</a></p>\n',
        ),
        ("**bold** and `code`", "<p><strong>bold</strong> and <code>code</code></p>\n"),
    ],
)
def test_markdown_is_rendered_without_markup_from_the_text(markdown: str, html: str) -> None:
    assert render_markdown(markdown) == html


async def test_every_response_carries_the_security_headers(temporal_client: Client, tmp_path: Path) -> None:
    async with web_deployment(temporal_client, tmp_path) as web, httpx.AsyncClient(timeout=30) as http:
        agent = await web.start()
        responses = [
            await http.get(f"{web.url}/"),
            await http.get(f"{web.url}/c/{agent.session_id}"),
            await http.get(f"{web.url}/static/app.js"),
            await http.get(f"{web.url}/api/config"),
            await http.get(f"{web.url}/api/conversations/no-such-conversation"),
            await http.get(f"{web.url}/no-such-page"),
            await http.post(
                f"{web.url}/api/conversations/{agent.session_id}/abort",
                json={},
                headers={"Origin": "http://evil.example"},
            ),
            await http.get(f"{web.url}/api/config", headers={"Host": "attacker.example"}),
        ]
        async with http.stream("GET", f"{web.url}/api/conversations/{agent.session_id}/events") as stream:
            responses.append(stream)
        assert [response.status_code for response in responses] == [
            200,
            200,
            200,
            200,
            404,
            404,
            403,
            403,
            200,
        ]
        for response in responses:
            headers = response.headers
            policy = headers["content-security-policy"]
            directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
            assert directives["script-src"] == "'self'", policy
            assert "unsafe-eval" not in policy and "unsafe-inline" not in directives["script-src"]
            assert directives["frame-ancestors"] == "'none'"
            assert headers["x-frame-options"] == "DENY"
            assert headers["referrer-policy"] == "same-origin"
            assert headers["x-content-type-options"] == "nosniff"
        # The page loads its script from a file: no inline script for the policy to allow.
        assert "<script>" not in responses[0].text and 'src="/static/app.js"' in responses[0].text


async def test_the_page_renders_a_streaming_answer_through_the_server(
    temporal_client: Client, tmp_path: Path
) -> None:
    async with web_deployment(temporal_client, tmp_path) as web, httpx.AsyncClient(timeout=30) as http:
        render = f"{web.url}/api/render"
        html = (
            await http.post(render, json={"text": "**so far** <script>x()</script>\n\n```python\nimport os"})
        ).json()["html"]
        assert html.startswith("<p><strong>so far</strong> &lt;script&gt;x()&lt;/script&gt;</p>")
        assert '<span class="hl-kn">import</span>' in html
        assert (await http.post(render, data={"text": "x"})).status_code == 415
        assert (await http.post(render, json={"text": "x" * 500_000})).status_code == 413


def test_highlighted_code_carries_no_markup_from_the_text() -> None:
    html = render_markdown('```python\nx = "</code></pre><script>alert(1)</script>"\n```')
    assert "<script" not in html and "&lt;script&gt;" in html
    assert set(__import__("re").findall(r"<(\w+)", html)) <= {"pre", "code", "span"}


async def test_the_printed_link_works_once_and_leaves_a_clean_address(
    temporal_client: Client, tmp_path: Path
) -> None:
    async with web_deployment(temporal_client, tmp_path, token=TOKEN) as web:
        server = RunningWebServer(
            "127.0.0.1", int(web.url.rsplit(":", 1)[1]), TOKEN, sign_ins=web.app.state.sign_ins
        )
        link = server.link("/c/x")
        assert "?code=" in link and TOKEN not in link
        async with httpx.AsyncClient(timeout=30) as http:
            signed = await http.get(link)
            assert signed.status_code == 303 and signed.headers["location"] == "/c/x"
            cookie = signed.headers["set-cookie"]
            assert "HttpOnly" in cookie and "SameSite=strict" in cookie
            assert (await http.get(f"{web.url}/api/conversations")).status_code == 200
        async with httpx.AsyncClient(timeout=30) as other:
            again = await other.get(link)  # the same link a second time: the code is spent
            assert again.status_code == 401 and "used already" in again.text
            assert (await other.get(f"{web.url}/api/conversations")).status_code == 401


@needs_chromium
async def test_a_browser_opening_the_link_keeps_no_credential_in_its_history(
    temporal_client: Client, tmp_path: Path
) -> None:
    async with web_deployment(temporal_client, tmp_path, token=TOKEN) as web:
        server = RunningWebServer(
            "127.0.0.1", int(web.url.rsplit(":", 1)[1]), TOKEN, sign_ins=web.app.state.sign_ins
        )
        browser = await Browser.launch()
        try:
            await browser.get(server.link("/"))
            await browser.wait_for("return !document.querySelector('#list-view').hidden", what="the list")
            assert await browser.js("return location.href") == web.url + "/"
            history = await browser.call(browser.driver.execute_cdp_cmd, "Page.getNavigationHistory", {})
            urls = [entry["url"] for entry in history["entries"]]
            assert urls[-1] == web.url + "/" and not any("code=" in url or TOKEN in url for url in urls), urls
        finally:
            await browser.quit()


async def test_failed_sign_ins_are_limited_through_every_door(
    temporal_client: Client, tmp_path: Path
) -> None:
    async with (
        web_deployment(temporal_client, tmp_path, token=TOKEN) as web,
        httpx.AsyncClient(timeout=30) as http,
    ):
        listing = f"{web.url}/api/conversations"
        doors = [
            lambda n: http.get(f"{web.url}/?token=wrong{n}"),
            lambda n: http.post(f"{web.url}/login", data={"token": f"wrong{n}", "next": "/"}),
            lambda n: http.get(listing, headers={"Authorization": f"Bearer wrong{n}"}),
            lambda n: http.get(f"{web.url}/c/x?code=made-up-{n}"),
            lambda n: http.get(listing, headers={"Authorization": f"Bearer wrong{n}"}),
        ]
        statuses = [(await door(n)).status_code for n, door in enumerate(doors)]
        assert statuses == [401, 401, 401, 401, 401]
        # The sixth failure in the minute, through any door, and even the right token, wait.
        for attempt in (
            http.get(f"{web.url}/?token=wrong"),
            http.post(f"{web.url}/login", data={"token": TOKEN, "next": "/"}),
            http.get(listing, headers={"Authorization": f"Bearer {TOKEN}"}),
        ):
            limited = await attempt
            assert limited.status_code == 429
            assert 0 < int(limited.headers["retry-after"]) <= 60
        # Requests that present no credential are not sign-ins: a signed-in page goes on.
        assert (await http.get(f"{web.url}/static/app.js")).status_code == 200


async def test_https_with_a_certificate(temporal_client: Client, tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    async with web_deployment(temporal_client, tmp_path) as web:
        async with serve_web(
            web.app, port=0, tls_cert=str(pki.server_cert), tls_key=str(pki.server_key)
        ) as server:
            assert server.url.startswith("https://")
            async with httpx.AsyncClient(
                timeout=30, verify=ssl.create_default_context(cafile=str(pki.ca_cert))
            ) as http:
                page = await http.get(server.url + "/api/config")
                assert page.status_code == 200 and page.headers["x-frame-options"] == "DENY"
        with pytest.raises(WebServerError, match="both --tls-cert and --tls-key"):
            async with serve_web(web.app, port=0, tls_cert=str(pki.server_cert)):
                pass


async def test_temporal_out_of_reach_is_a_503_with_its_code_not_a_server_error(tmp_path: Path) -> None:
    """A Temporal server (or worker) that does not answer is the page's to report by the message
    box: JSON with its own code and a 503, on reads and on commands alike."""
    from temporalio.testing import WorkflowEnvironment

    from agentcore.client import AgentClient
    from agentcore.temporal import DATA_CONVERTER, find_temporal_binary
    from agentcore.web import WebSettings, create_app

    env = await WorkflowEnvironment.start_local(
        data_converter=DATA_CONVERTER, dev_server_existing_path=find_temporal_binary()
    )
    gone = env.client
    await gone.count_workflows()  # connected,
    await env.shutdown()  # and then the server went away
    agents = AgentClient(gone, task_queue="nowhere", sessions_dir=tmp_path / "sessions")
    app = create_app(agents, WebSettings(resolve_model=lambda spec: None, tools=[], system_prompt=""))  # type: ignore[arg-type,return-value]
    async with serve_web(app, port=0) as server, httpx.AsyncClient(timeout=30) as http:
        base = f"{server.url}/api/conversations/cellar"
        for response in (
            await http.get(base),
            await http.post(f"{base}/messages", json={"text": "Hello", "id": "m-1"}),
        ):
            assert response.status_code == 503, response.text
            assert response.json()["error"] == "TEMPORAL_UNAVAILABLE"
