"""``agentcore.mcp`` without Temporal: the worker's connections to real MCP servers (``tests/support/mcp_servers``),
the names and retry safety of their tools, result mapping, and the configuration formats."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import mcp_types
import pytest

from agentcore.errors import TOOL_UNAVAILABLE, ToolUnavailableError
from agentcore.inprocess import InProcessRuntime
from agentcore.mcp import (
    MCPConfigError,
    MCPServerHTTP,
    MCPServerSSE,
    MCPServerStdio,
    MCPToolset,
    is_retry_safe,
    load_mcp_config,
    parse_mcp_option,
)
from agentcore.mcp._results import to_agent_tool_result
from agentcore.messages import ImageContent, TextContent, ToolCall
from agentcore.runtime import AbortSignal
from agentcore.tool_exec import execute_tool_with_timeout
from agentcore.tools import AgentTool, AgentToolResult, ToolRegistry
from tests.support.mcp import http_server, log_lines, sse_server, stdio_server
from tests.support.process import wait_until


@pytest.fixture
async def alpha(tmp_path: Path) -> AsyncIterator[tuple[MCPToolset, Path]]:
    log = tmp_path / "mcp.log"
    toolset = MCPToolset([stdio_server("alpha", log)], ToolRegistry())
    await toolset.start()
    try:
        yield toolset, log
    finally:
        await toolset.stop()


async def call(toolset: MCPToolset, name: str, **arguments: object) -> AgentToolResult:
    tool = toolset.registry.get(name)
    assert tool is not None, f"{name} is not registered"
    call = ToolCall(id="c1", name=name, arguments=dict(arguments))
    return await execute_tool_with_timeout(tool, call, AbortSignal(), lambda update: None)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_a_servers_tools_are_described_by_group_and_by_name(alpha: tuple[MCPToolset, Path]) -> None:
    toolset, _ = alpha
    specs, unknown = toolset.registry.describe(["mcp:alpha/echo", "mcp:alpha", "mcp:beta"])
    names = [spec.name for spec in specs]
    assert names[0] == "echo" and len(names) == len(set(names))  # each tool once, in order
    assert {"add", "hold", "record"} <= set(names)
    assert unknown == ["mcp:beta"]
    by_name = {spec.name: spec for spec in specs}
    assert by_name["echo"].retry_safe and by_name["add"].retry_safe  # readOnlyHint, idempotentHint
    assert not by_name["record"].retry_safe  # no annotations: run at most once


async def test_a_tools_list_change_refreshes_the_registry(alpha: tuple[MCPToolset, Path]) -> None:
    toolset, _ = alpha
    assert toolset.registry.get("extra") is None
    assert (await call(toolset, "grow")).content == [TextContent(text="grown")]
    await wait_until(lambda: toolset.registry.get("extra"), what="the new tool")
    assert (await call(toolset, "extra")).content == [TextContent(text="extra")]
    assert "extra" in [spec.name for spec in toolset.registry.describe(["mcp:alpha"])[0]]


async def test_a_server_killed_mid_call_fails_it_as_unavailable_and_is_restarted(
    alpha: tuple[MCPToolset, Path],
) -> None:
    toolset, log = alpha
    import asyncio

    pending = asyncio.ensure_future(call(toolset, "hold", tag="k"))
    await wait_until(lambda: log_lines(log, "hold-start"), what="the call to start")
    first_pid = int(log_lines(log, "hold-start")[0][2])
    os.kill(first_pid, signal.SIGKILL)
    with pytest.raises(ToolUnavailableError) as raised:
        await pending
    assert raised.value.code == TOOL_UNAVAILABLE
    assert 'MCP server "alpha" went away during the call to "hold"' in raised.value.message
    # The next call finds a new process (it waits for the restart).
    assert (await call(toolset, "echo", text="again")).content == [TextContent(text="alpha: again")]
    assert int(log_lines(log, "echo")[0][2]) != first_pid


async def test_an_http_server_that_goes_away_fails_calls_as_unavailable_until_it_is_back(
    tmp_path: Path,
) -> None:
    log = tmp_path / "mcp.log"
    async with http_server("beta", log) as beta:
        toolset = MCPToolset([beta], ToolRegistry())
        await toolset.start()
        port = int(beta.url.rsplit(":", 1)[1].split("/")[0])
        assert (await call(toolset, "echo", text="1")).content == [TextContent(text="beta: 1")]
    try:
        with pytest.raises(ToolUnavailableError, match='MCP server "beta"'):
            await call(toolset, "echo", text="down")
        async with http_server("beta", log, port):  # back, on the same address
            assert (await call(toolset, "echo", text="2")).content == [TextContent(text="beta: 2")]
    finally:
        await toolset.stop()


async def test_a_server_that_only_speaks_sse(tmp_path: Path) -> None:
    async with sse_server("gamma", tmp_path / "mcp.log") as gamma:
        toolset = MCPToolset([gamma], ToolRegistry())
        await toolset.start()
        try:
            assert (await call(toolset, "echo", text="old")).content == [TextContent(text="gamma: old")]
        finally:
            await toolset.stop()


async def test_stopping_the_toolset_stops_the_server_process(tmp_path: Path) -> None:
    log = tmp_path / "mcp.log"
    toolset = MCPToolset([stdio_server("alpha", log)], ToolRegistry())
    await toolset.start()
    await call(toolset, "echo", text="hi")
    pid = int(log_lines(log, "echo")[0][2])
    assert alive(pid)
    await toolset.stop()
    await wait_until(lambda: not alive(pid), what="the server process to exit")


async def test_a_server_that_cannot_start_leaves_its_names_unknown_and_calls_unavailable() -> None:
    missing = MCPServerStdio("gone", "/nonexistent/mcp-server", ["--flag"])
    toolset = MCPToolset([missing], ToolRegistry())
    await toolset.start(wait_seconds=10)
    try:
        await toolset.registry.prepare(["mcp:gone"])
        assert toolset.registry.describe(["mcp:gone"]) == ([], ["mcp:gone"])
        with pytest.raises(ToolUnavailableError) as raised:
            await toolset.connections["gone"].call_tool("x", {}, lambda *_: None)
        assert '"gone" (/nonexistent/mcp-server ...) is not running' in raised.value.message
        assert "No such file" in raised.value.message
    finally:
        await toolset.stop()


async def test_the_in_process_runtime_reports_an_unavailable_tool_as_an_error_result() -> None:
    async def execute(*_: object) -> AgentToolResult:
        raise ToolUnavailableError("server down")

    tool = AgentTool(name="remote", description="d", execute=execute)
    result = await InProcessRuntime().run_tool(
        tool, ToolCall(id="c", name="remote", arguments={}), AbortSignal(), lambda _: None
    )
    assert result.is_error and result.content == [TextContent(text=f"{TOOL_UNAVAILABLE}: server down")]


def test_names_are_made_valid_and_clashes_with_local_tools_prefixed() -> None:
    local = AgentTool(name="echo", description="local", execute=lambda *_: AgentToolResult.text("x"))
    registry = ToolRegistry([local])
    toolset = MCPToolset([MCPServerStdio("my-files", "unused")], registry)
    listing = [
        mcp_types.Tool(name="echo", input_schema={"type": "object"}),
        mcp_types.Tool(name="read-file.v2", input_schema={"type": "object"}, description="Read."),
        mcp_types.Tool(name="2d", input_schema={"type": "object"}),
    ]
    toolset.connections["my-files"].tools = listing
    toolset._refresh()
    assert registry.get("echo") is local
    specs, _ = registry.describe(["mcp:my-files"])
    assert [spec.name for spec in specs] == ["my_files_echo", "read_file_v2", "_2d"]
    assert registry.describe(["mcp:my-files/read-file.v2"])[0][0].description == "Read."
    toolset.connections["my-files"].tools = listing[1:]  # the server dropped a tool
    toolset._refresh()
    assert registry.get("my_files_echo") is None and registry.get("echo") is local


def test_retry_safety_comes_from_the_annotations() -> None:
    assert not is_retry_safe(None)
    assert not is_retry_safe(mcp_types.ToolAnnotations(destructiveHint=False))
    assert is_retry_safe(mcp_types.ToolAnnotations(readOnlyHint=True))
    assert is_retry_safe(mcp_types.ToolAnnotations(idempotentHint=True))


def test_results_map_every_content_kind() -> None:
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNg+M8AAAMBAQAY3Y2wAAAAAElFTkSuQmCC"
    result = mcp_types.CallToolResult(
        content=[
            mcp_types.TextContent(text="hello"),
            mcp_types.ImageContent(data=png, mime_type="image/png"),
            mcp_types.ImageContent(data="PHN2Zz4=", mime_type="image/svg+xml"),
            mcp_types.EmbeddedResource(
                resource=mcp_types.BlobResourceContents(uri="file:///a.png", mime_type="image/png", blob=png)
            ),
            mcp_types.EmbeddedResource(
                resource=mcp_types.BlobResourceContents(uri="file:///a.bin", blob="AAECAw==")
            ),
            mcp_types.AudioContent(data="AAAA", mime_type="audio/wav"),
            mcp_types.ResourceLink(uri="file:///big.csv", name="big.csv", description="The data."),
        ],
        structured_content={"n": 1},
    )
    mapped = to_agent_tool_result(result, "files", "read")
    assert mapped.content == [
        TextContent(text="hello"),
        ImageContent(data=png, mime_type="image/png"),
        mapped.content[2],
        ImageContent(data=png, mime_type="image/png"),
        TextContent(text="[resource file:///a.bin (application/octet-stream), 4 bytes]"),
        TextContent(text="[audio (audio/wav), 3 bytes]"),
        TextContent(text="[resource link file:///big.csv (big.csv): The data.]"),
    ]
    assert isinstance(mapped.content[2], TextContent) and "image/svg+xml" in mapped.content[2].text
    assert mapped.details == {"mcp_server": "files", "mcp_tool": "read", "structured_content": {"n": 1}}
    assert not mapped.is_error


def test_an_error_result_keeps_the_servers_words() -> None:
    result = mcp_types.CallToolResult(content=[mcp_types.TextContent(text="no such file")], is_error=True)
    mapped = to_agent_tool_result(result, "files", "read")
    assert mapped.is_error
    assert mapped.content == [TextContent(text='EXECUTION_ERROR: Tool "read" failed: no such file')]
    assert mapped.details["error_code"] == "EXECUTION_ERROR"
    structured_only = to_agent_tool_result(
        mcp_types.CallToolResult(content=[], structured_content=[1, 2]), "s", "t"
    )
    assert structured_only.content == [TextContent(text="[1,2]")]


def test_mcp_options_from_the_command_line() -> None:
    stdio = parse_mcp_option('files=npx -y @modelcontextprotocol/server-filesystem "/my data"')
    assert stdio == MCPServerStdio(
        "files", "npx", ["-y", "@modelcontextprotocol/server-filesystem", "/my data"]
    )
    assert parse_mcp_option("docs=https://example.com/mcp") == MCPServerHTTP(
        "docs", "https://example.com/mcp"
    )
    assert parse_mcp_option("old=http://127.0.0.1:9/sse") == MCPServerSSE("old", "http://127.0.0.1:9/sse")
    for bad in ("files", "=npx", "files=", "bad name=npx", "a/b=npx"):
        with pytest.raises(MCPConfigError, match="--mcp"):
            parse_mcp_option(bad)


def test_a_claude_desktop_config_file_in_json_and_toml(tmp_path: Path) -> None:
    document = {
        "mcpServers": {
            "files": {"command": "npx", "args": ["-y", "server"], "env": {"TOKEN": "secret"}, "timeout": 30},
            "docs": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer t"}},
            "old": {"url": "https://example.com/sse", "type": "sse"},
        }
    }
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(document))
    servers = load_mcp_config(path)
    assert servers == [
        MCPServerStdio("files", "npx", ["-y", "server"], env={"TOKEN": "secret"}, timeout_seconds=30),
        MCPServerHTTP("docs", "https://example.com/mcp", {"Authorization": "Bearer t"}),
        MCPServerSSE("old", "https://example.com/sse"),
    ]
    assert "secret" not in repr(servers) and "Bearer" not in repr(servers)  # tokens stay out of logs
    assert (
        MCPServerHTTP("h", "https://user:pw@example.com:8443/mcp?key=k").where()
        == "https://example.com:8443/mcp"
    )
    toml = tmp_path / "mcp.toml"
    toml.write_text(
        '[mcpServers.files]\ncommand = "npx"\nargs = ["-y", "server"]\nenv = { TOKEN = "secret" }\n'
    )
    assert load_mcp_config(toml) == [
        MCPServerStdio("files", "npx", ["-y", "server"], env={"TOKEN": "secret"})
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "not valid JSON"),
        ('{"servers": {}}', 'expected an object with "mcpServers"'),
        ('{"mcpServers": {"x": {}}}', 'mcpServers.x: expected "command"'),
        ('{"mcpServers": {"x": {"command": "a", "args": "b"}}}', "mcpServers.x.args: expected a list"),
        ('{"mcpServers": {"x": {"url": "https://h", "type": "ws"}}}', "mcpServers.x.type"),
        ('{"mcpServers": {"x": {"command": "a", "timeout": -1}}}', "mcpServers.x.timeout"),
        ('{"mcpServers": {"x y": {"command": "a"}}}', "mcpServers.x y: MCP server name"),
    ],
)
def test_a_bad_config_file_says_where(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(content)
    with pytest.raises(MCPConfigError, match=message.replace(".", r"\.")):
        load_mcp_config(path)


def test_a_missing_config_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(MCPConfigError, match="No such file"):
        load_mcp_config(tmp_path / "absent.json")


def test_two_servers_may_not_share_a_name() -> None:
    with pytest.raises(ValueError, match="given twice: a"):
        MCPToolset([MCPServerStdio("a", sys.executable), MCPServerStdio("a", "other")], ToolRegistry())


async def test_a_server_may_require_approval_for_all_or_some_of_its_tools(tmp_path: Path) -> None:
    """Off by default; True gates every tool of the server, a list only the tools it names."""
    import dataclasses

    default = stdio_server("alpha", tmp_path / "mcp.log")
    for require, gated in (
        (False, set()),
        (True, {"echo", "add", "hold", "record"}),
        (["record"], {"record"}),
    ):
        toolset = MCPToolset([dataclasses.replace(default, require_approval=require)], ToolRegistry())
        await toolset.start()
        try:
            specs, _ = toolset.registry.describe(["mcp:alpha"])
        finally:
            await toolset.stop()
        assert {spec.name for spec in specs if spec.requires_approval} & {
            "echo",
            "add",
            "hold",
            "record",
        } == gated


def test_require_approval_in_a_config_file(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "files": {"command": "npx", "require_approval": ["write_file"]},
                    "docs": {"url": "https://example.com/mcp", "requireApproval": True},
                }
            }
        )
    )
    files, docs = load_mcp_config(path)
    assert files.require_approval == ("write_file",) and docs.require_approval is True
    path.write_text(json.dumps({"mcpServers": {"x": {"command": "a", "require_approval": "yes"}}}))
    with pytest.raises(MCPConfigError, match="require_approval"):
        load_mcp_config(path)
