"""Small MCP servers for the tests, built on the SDK's own server class (``MCPServer``).

    python -m tests.support.mcp_servers stdio --name alpha --log FILE
    python -m tests.support.mcp_servers http --name beta --log FILE     # prints "PORT <n>" once it listens
    python -m tests.support.mcp_servers sse --name gamma --log FILE     # the older HTTP+SSE transport (/sse)

Every call a tool sees is appended to ``--log`` as ``<event> <tag> <pid>`` (one small O_APPEND
write a line), so a test can see what the server saw (a call started, a cancellation arrived)
even across restarts. ``hold`` waits until ``<log>.release`` exists, so a test decides when it ends.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import EmbeddedResource, ImageContent, TextContent, TextResourceContents, ToolAnnotations

PID = os.getpid()
READ_ONLY = ToolAnnotations(readOnlyHint=True)
IDEMPOTENT = ToolAnnotations(idempotentHint=True)
# A 1x1 PNG: a real image a provider would take.
PNG_1X1 = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360f8cf00000301010018dd8db00000000049454e44ae426082"
    )
).decode()


def build(name: str, log: Path) -> MCPServer:
    server = MCPServer(name)

    def note(event: str, tag: str = "-") -> None:
        with open(log, "a") as handle:
            handle.write(f"{event} {tag} {PID}\n")

    @server.tool(annotations=READ_ONLY)
    def echo(text: str) -> str:
        """Say the text back, naming this server."""
        note("echo", text)
        return f"{name}: {text}"

    @server.tool(annotations=IDEMPOTENT)
    def add(a: int, b: int) -> str:
        """Add two integers."""
        note("add", f"{a}+{b}")
        return str(a + b)

    @server.tool(annotations=READ_ONLY)
    def fail(reason: str) -> str:
        """Always fails."""
        raise ToolError(f"refused: {reason}")

    @server.tool(annotations=READ_ONLY)
    def picture() -> list[ImageContent | TextContent]:
        """A tiny PNG and a caption."""
        return [
            ImageContent(type="image", data=PNG_1X1, mime_type="image/png"),
            TextContent(type="text", text="a dot"),
        ]

    @server.tool(annotations=READ_ONLY)
    def document() -> EmbeddedResource:
        """A text resource embedded in the result."""
        return EmbeddedResource(
            type="resource",
            resource=TextResourceContents(uri="memo://today", mime_type="text/plain", text="Buy grapes."),
        )

    @server.tool(annotations=READ_ONLY)
    async def count(steps: int, ctx: Context) -> str:
        """Count to ``steps``, reporting progress at each step."""
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step} of {steps}")
            await anyio.sleep(0.05)
        return f"counted to {steps}"

    @server.tool(annotations=READ_ONLY)
    async def hold(tag: str) -> str:
        """Wait until the test releases the call (a file beside the log)."""
        note("hold-start", tag)
        release = log.with_name(log.name + ".release")
        try:
            while not release.exists():
                await anyio.sleep(0.05)
        except anyio.get_cancelled_exc_class():
            note("hold-cancelled", tag)
            raise
        note("hold-end", tag)
        return f"released {tag} in {PID}"

    @server.tool()  # no annotations: not safe to run twice
    async def record(tag: str, seconds: float) -> str:
        """Record a side effect, then take ``seconds`` to answer."""
        note("record", tag)
        await anyio.sleep(seconds)
        return f"recorded {tag}"

    @server.tool(annotations=READ_ONLY)
    async def grow(ctx: Context) -> str:
        """Add the tool ``extra`` and tell the client the list changed."""

        def extra() -> str:
            """Appears after ``grow``."""
            return "extra"

        server.add_tool(extra, name="extra")
        await ctx.notify_tools_changed()  # 2026-07-28 clients: their subscriptions/listen stream
        await ctx.session.send_tool_list_changed()  # earlier clients: the notification
        return "grown"

    return server


async def serve_http(server: MCPServer, transport: str, port: int) -> None:
    import uvicorn

    app = server.sse_app() if transport == "sse" else server.streamable_http_app()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error")
    web = uvicorn.Server(config)
    task = asyncio.create_task(web.serve())
    while not web.started:
        await asyncio.sleep(0.02)
    port = web.servers[0].sockets[0].getsockname()[1]
    print(f"PORT {port}", flush=True)
    await task


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["stdio", "http", "sse"])
    parser.add_argument("--name", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--port", type=int, default=0, help="HTTP port (0: the OS chooses)")
    args = parser.parse_args()
    server = build(args.name, Path(args.log))
    if args.transport == "stdio":
        server.run()
    else:
        asyncio.run(serve_http(server, args.transport, args.port))


if __name__ == "__main__":
    sys.exit(main())
