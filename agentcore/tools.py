"""The tool interface (SPEC-3): ``AgentTool``, its serialisable ``ToolSpec``, and ``AgentToolResult``.

A tool is a spec (name, description, JSON schema: data that can live in a workflow) plus an
``execute`` function (code that lives in the process running it). The durable runtime keeps the spec
in the conversation's state and the function in the worker's tool registry.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .messages import ToolResultContent, Usage, WireModel
from .model import ToolExecutionMode

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


def _check_name(value: str) -> str:
    if not TOOL_NAME_RE.fullmatch(value):
        raise ValueError(f"tool name {value!r} must match ^[a-zA-Z_][a-zA-Z0-9_]*$")
    return value


def _check_description(value: str) -> str:
    if not value or not value.strip():
        raise ValueError("tool description must be a non-empty string")
    return value


class _ToolFields(BaseModel):
    """What a tool spec and a tool share, with the SPEC-8.2 checks written once."""

    name: str
    label: str = ""
    description: str
    execution_mode: ToolExecutionMode | None = None
    timeout_seconds: float = DEFAULT_TOOL_TIMEOUT_SECONDS
    # False: an interrupted call must never run again; its result is recorded as "outcome unknown".
    retry_safe: bool = True

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
            schema_checks_arguments=self.prepare_arguments is None
            and (self.parameters is None or isinstance(self.parameters, bool | dict)),
        )


class ToolRegistry:
    """The functions behind tool names, held by a worker (the workflow only holds ``ToolSpec``s)."""

    def __init__(self, tools: list[AgentTool] | None = None) -> None:
        self._tools: dict[str, AgentTool] = {}
        # Specs are asked for on every model call; a JSON schema from pydantic costs ~0.2 ms each.
        self._specs: dict[str, ToolSpec] = {}
        for tool in tools or []:
            self.register(tool)

    def register(self, tool: AgentTool) -> None:
        if tool.name in self._tools and self._tools[tool.name] is not tool:
            raise ValueError(f"tool {tool.name!r} is registered twice")
        self._tools[tool.name] = tool
        self._specs[tool.name] = tool.spec()

    def get(self, name: str) -> AgentTool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def describe(self, names: list[str]) -> tuple[list[ToolSpec], list[str]]:
        """Specs for ``names`` in order, and the names nobody registered."""
        specs = [self._specs[name] for name in names if name in self._specs]
        return specs, [name for name in names if name not in self._specs]
