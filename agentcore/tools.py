"""The tool interface (SPEC-3): ``AgentTool``, its serialisable ``ToolSpec``, and ``AgentToolResult``.

A tool is a spec (name, description, JSON schema: data that can live in a workflow) plus an
``execute`` function (code that lives in the process running it). The durable runtime keeps the spec
in the conversation's state and the function in the worker's tool registry.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .jsonschema import check_schema
from .messages import ToolResultContent, Usage, WireModel
from .model import Model, ThinkingLevel, ToolExecutionMode

TOOL_NAME_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")  # whole name: fullmatch
# A provider whose model sent tool arguments that are not a JSON object keeps the raw text under this
# key, so validation can report exactly what the model sent (INVALID_PARAMETERS) instead of guessing.
RAW_ARGUMENTS_KEY = "__raw_arguments__"
DEFAULT_TOOL_TIMEOUT_SECONDS = 120.0


class AgentToolResult(WireModel):
    """What ``execute`` returns (SPEC-3.2)."""

    content: list[ToolResultContent] = Field(default_factory=list)
    details: Any = None
    usage: Usage | None = None
    added_tool_names: list[str] | None = None
    is_error: bool = False
    # pi's early stop: a batch whose every result sets ``terminate`` ends the run after this turn.
    terminate: bool = False

    @classmethod
    def text(cls, text: str, *, details: Any = None, is_error: bool = False) -> AgentToolResult:
        from .messages import TextContent

        return cls(content=[TextContent(text=text)], details=details, is_error=is_error)


def tool_result_text(result: Any) -> str:
    """The text blocks of a tool result, whether it arrived as a model or as plain JSON (an event
    read back from the wire): what the terminal and the web page show of it."""
    if result is None:
        return ""
    if hasattr(result, "model_dump"):
        result = result.model_dump(mode="json")
    if isinstance(result, dict):
        blocks = result.get("content") or []
        return "\n".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
    return str(result)


def _check_name(value: str) -> str:
    if not TOOL_NAME_RE.fullmatch(value):
        raise ValueError(f"tool name {value!r} must match ^[a-zA-Z_][a-zA-Z0-9_]*$")
    return value


def _check_description(value: str) -> str:
    if not value or not value.strip():
        raise ValueError("tool description must be a non-empty string")
    return value


class SubagentSpec(WireModel):
    """What a durable conversation needs to run a sub-agent tool (``agentcore.subagent_tool``) as a
    child conversation: the child's settings, with its tools by name (a worker registers them)."""

    system_prompt: str = ""
    model: Model
    thinking_level: ThinkingLevel = ThinkingLevel.OFF
    tool_names: list[str] = Field(default_factory=list)
    tool_execution: ToolExecutionMode = ToolExecutionMode.PARALLEL
    max_tokens: int | None = None
    temperature: float | None = None
    # How deep sub-agents may nest from the conversation a person talks to (depth 0): this tool's
    # child runs at its caller's depth plus one, and is not started past ``max_depth``.
    max_depth: int = 2


class _ToolFields(BaseModel):
    """What a tool spec and a tool share, with the SPEC-8.2 checks written once."""

    name: str
    label: str = ""
    description: str
    execution_mode: ToolExecutionMode | None = None
    timeout_seconds: float = DEFAULT_TOOL_TIMEOUT_SECONDS
    # False: an interrupted call must never run again; its result is recorded as "outcome unknown".
    retry_safe: bool = True
    # Set for a sub-agent tool: a durable conversation runs it as a child workflow, not an activity.
    subagent: SubagentSpec | None = None
    # A tool the conversation carries out itself instead of calling ``execute`` (durably: in the
    # workflow, no activity): "wakeup" (``agentcore.wakeups.wakeup_tool``).
    runtime_tool: Literal["wakeup"] | None = None
    # A person approves (or edits, or denies) each call before it runs (``agentcore.approvals``);
    # unanswered for ``approval_timeout_seconds`` (None: no limit) it ends as APPROVAL_TIMEOUT.
    requires_approval: bool = False
    approval_timeout_seconds: float | None = Field(default=None, gt=0)

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        return _check_name(value)

    @field_validator("description")
    @classmethod
    def _valid_description(cls, value: str) -> str:
        return _check_description(value)


class ToolSpec(_ToolFields):
    """The serialisable half of a tool: what the model sees and how the runtime schedules it."""

    model_config = WireModel.model_config
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    # True when ``parameters`` alone decides whether arguments are valid (a JSON schema, no
    # ``prepare_arguments``): a durable conversation then refuses bad arguments itself, before it
    # schedules the call, as the in-process runtime does. A pydantic model's lax parsing or a
    # ``prepare_arguments`` runs only where the tool's code is, in its activity.
    schema_checks_arguments: bool = False


ToolUpdateCallback = Callable[[AgentToolResult], Any]
ToolExecute = Callable[..., "AgentToolResult | Awaitable[AgentToolResult]"]
PrepareArguments = Callable[[Any], Any]


class AgentTool(_ToolFields):
    """A tool the agent can call (SPEC-3.1).

    ``parameters`` is a JSON Schema dict or a pydantic model class; arguments are validated against it
    before ``execute(tool_call_id, arguments, signal, on_update)`` runs (sync or async). When
    ``parameters`` is a model class, ``execute`` receives a validated instance of it.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    parameters: Any = Field(default_factory=lambda: {"type": "object", "properties": {}})
    execute: ToolExecute
    prepare_arguments: PrepareArguments | None = None
    # Tools this tool's work calls (a sub-agent's): a worker that registers it registers them too.
    nested_tools: list[Any] = Field(default_factory=list)

    @field_validator("parameters")
    @classmethod
    def _valid_schema(cls, value: Any) -> Any:
        # A broken schema is the tool author's mistake: refuse it here, not on the model's first call.
        if isinstance(value, dict | bool):
            check_schema(value)
        return value

    @model_validator(mode="after")
    def _default_label(self) -> AgentTool:
        if not self.label:
            self.label = self.name
        return self

    @property
    def json_schema(self) -> dict[str, Any]:
        if isinstance(self.parameters, type) and issubclass(self.parameters, BaseModel):
            return self.parameters.model_json_schema()
        return dict(self.parameters or {"type": "object", "properties": {}})

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            label=self.label,
            description=self.description,
            parameters=self.json_schema,
            execution_mode=self.execution_mode,
            timeout_seconds=self.timeout_seconds,
            retry_safe=self.retry_safe,
            subagent=self.subagent,
            runtime_tool=self.runtime_tool,
            requires_approval=self.requires_approval,
            approval_timeout_seconds=self.approval_timeout_seconds,
            schema_checks_arguments=self.prepare_arguments is None
            and (self.parameters is None or isinstance(self.parameters, bool | dict)),
        )


# What ``AgentOptions.tools`` may name: a tool, or a group of tools a source provides
# (``mcp:files`` for an MCP server's tools, ``mcp:files/read_file`` for one of them).
TOOL_REFERENCE_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*|[a-z]+:[^\s/]+(/[^\s]+)?")


def is_tool_reference(name: str) -> bool:
    return TOOL_REFERENCE_RE.fullmatch(name) is not None


class ToolSource(Protocol):
    """Tools that come from outside the process (an MCP server) and are listed on demand."""

    async def prepare(self, names: list[str]) -> None:
        """Make sure the groups among ``names`` are known to the registry (connect, list tools)."""
        ...


class ToolRegistry:
    """The functions behind tool names, held by a worker (the workflow only holds ``ToolSpec``s).

    A *group* is a name that stands for several tools (all of an MCP server's): ``describe`` expands
    it, and a source refreshes its members when the tools it provides change."""

    def __init__(self, tools: list[AgentTool] | None = None) -> None:
        self._tools: dict[str, AgentTool] = {}
        # Specs are asked for on every model call; a JSON schema from pydantic costs ~0.2 ms each.
        self._specs: dict[str, ToolSpec] = {}
        self._groups: dict[str, list[str]] = {}
        self._sources: list[ToolSource] = []
        for tool in tools or []:
            self.register(tool)
        # A sub-agent's own tools, unless registered already (the worker's own tool of that name wins).
        pending = [nested for tool in tools or [] for nested in tool.nested_tools]
        while pending:
            nested = pending.pop(0)
            if isinstance(nested, AgentTool) and nested.name not in self._tools:
                self.register(nested)
                pending.extend(nested.nested_tools)

    def register(self, tool: AgentTool) -> None:
        if tool.name in self._tools and self._tools[tool.name] is not tool:
            raise ValueError(f"tool {tool.name!r} is registered twice")
        self._tools[tool.name] = tool
        self._specs[tool.name] = tool.spec()

    def set_groups(self, groups: dict[str, list[AgentTool]], *, replacing: list[AgentTool]) -> None:
        """Install ``groups`` (name -> its tools), unregistering the tools in ``replacing`` first: a
        source's tools are replaced whole when its list changes, and may be renamed by a clash."""
        for tool in replacing:
            if self._tools.get(tool.name) is tool:
                del self._tools[tool.name]
                del self._specs[tool.name]
        for name, tools in groups.items():
            for tool in tools:
                if self._tools.get(tool.name) is not tool:
                    self.register(tool)
            self._groups[name] = [tool.name for tool in tools]

    def add_source(self, source: ToolSource) -> None:
        self._sources.append(source)

    async def prepare(self, names: list[str]) -> None:
        """Let the sources list the groups ``names`` refer to before ``describe`` is asked."""
        for source in self._sources:
            await source.prepare(names)

    def get(self, name: str) -> AgentTool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def describe(self, names: list[str]) -> tuple[list[ToolSpec], list[str]]:
        """Specs for ``names`` in order (a group's members in its place, each tool once), and the
        names nobody registered."""
        specs: dict[str, ToolSpec] = {}
        unknown: list[str] = []
        for name in names:
            spec = self._specs.get(name)
            if spec is not None:
                specs.setdefault(name, spec)
            elif name in self._groups:
                for member in self._groups[name]:
                    specs.setdefault(member, self._specs[member])
            else:
                unknown.append(name)
        return list(specs.values()), unknown
