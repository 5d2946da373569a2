"""Request and response bodies of the gateway API (they make up ``/openapi.json``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

#: A client's session or call id. Never ``~``: that separates the tenant in a stored session id
#: (``toolhub.tenancy.principal``), so no client id can name another tenant's session.
ID_PATTERN = r"^[A-Za-z0-9_.:-]{1,128}$"
TOOL_NAME = r"^[A-Za-z0-9_-]{1,64}$"

Format = Literal["openai", "anthropic", "mcp"]


class CreateSession(BaseModel):
    model_config = ConfigDict(extra="forbid")

    config: dict[str, Any] | None = Field(
        default=None, description="Tool-set config (the YAML file's shape); default: the server's."
    )
    workspace: str | None = Field(
        default=None,
        max_length=4096,
        description="Sub-directory of the tenant's workspace root (default: the root itself).",
    )
    session_id: str | None = Field(
        default=None,
        pattern=ID_PATTERN,
        description="Reuse or create your tenant's session with this id (default: a new id); "
        "another tenant's session of the same id is a different session.",
    )


class SessionCreated(BaseModel):
    session_id: str
    created: bool
    tools: int
    warnings: list[str]


class CallRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Client name of the tool.")
    arguments: dict[str, Any] | str | None = Field(
        default=None, description="Arguments as an object or as a JSON string."
    )
    call_id: str | None = Field(default=None, pattern=ID_PATTERN)


class ErrorBody(BaseModel):
    kind: str
    detail: str
    details: dict[str, Any] | None = None


class OutputBody(BaseModel):
    tag: str
    tool_id: str | None = None
    value: Any = None


class CallResultBody(BaseModel):
    """The terminal item of a call (``CallResult.to_dict`` plus ``is_error``)."""

    name: str
    call_id: str | None = None
    tool_id: str | None = None
    output: OutputBody | None = None
    prompt_text: str
    error: ErrorBody | None = None
    effective_tool_name: str | None = None
    content: list[dict[str, Any]] = Field(
        default_factory=list, description="Content blocks (images) next to the text."
    )
    is_error: bool


class Answers(BaseModel):
    model_config = ConfigDict(extra="forbid")

    answers: list[str] | dict[str, str] = Field(
        description="One answer per question (a list), or answers by question text."
    )


class Delivered(BaseModel):
    call_id: str
    delivered: bool


class Cancelled(BaseModel):
    call_id: str
    cancelled: bool


class Forward(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(pattern=r"^https?://", max_length=2048, description="POST target.")
    headers: dict[str, str] = Field(default_factory=dict, description="Sent with every call.")
    timeout_s: float = Field(default=60.0, gt=0, le=3600)


class ExternalToolBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str = ""
    input_schema: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    forward: Forward


class ExternalToolRegistered(BaseModel):
    name: str
    session_id: str


class Health(BaseModel):
    status: str
    deployment: Literal["embedded", "distributed"]
    checks: dict[str, str] = Field(default_factory=dict)


class Problem(BaseModel):
    detail: Any


class WhoAmI(BaseModel):
    """Who the request's credentials name."""

    tenant: str
    key_id: str = Field(description="The API key's id (never the key), or token-N, or anonymous.")
