"""Typed errors: what the model reads when a call fails, and what a config violation says.

The model only ever sees ``detail``; ``details`` carries machine-readable context (codes, tool
ids) for hosts and telemetry. Tracebacks never leave the process that raised them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class ErrorKind(StrEnum):
    """Every way a tool call can fail (seed 14.1, plus behavior versions)."""

    NOT_IMPLEMENTED = "not_implemented"
    INVALID_ARGUMENTS = "invalid_arguments"
    NOT_FOUND = "not_found"
    PERMISSION_DENIED = "permission_denied"
    UNAUTHORIZED = "unauthorized"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    RATE_LIMITED = "rate_limited"
    EXECUTION = "execution"
    BEHAVIOR_VERSION_UNSUPPORTED = "behavior_version_unsupported"
    CUSTOM = "custom"


class ToolError(Exception):
    """A failed call, as the model and the caller see it."""

    def __init__(
        self, kind: ErrorKind | str, detail: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(detail)
        self.kind = ErrorKind(kind)
        self.detail = detail
        self.details = details

    def __str__(self) -> str:
        return self.detail

    def __repr__(self) -> str:
        return f"ToolError({self.kind.value!r}, {self.detail!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolError):
            return NotImplemented
        return (self.kind, self.detail, self.details) == (other.kind, other.detail, other.details)

    __hash__ = Exception.__hash__

    @property
    def code(self) -> str | None:
        """The sub-code of a ``custom`` error (``missing_resource``, ``stream_no_terminal`` ...)."""
        if self.details is None:
            return None
        code = self.details.get("code")
        return code if isinstance(code, str) else None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "detail": self.detail, "details": self.details}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolError:
        return cls(data["kind"], data["detail"], data.get("details"))

    @classmethod
    def custom(cls, code: str, detail: str, **extra: Any) -> ToolError:
        return cls(ErrorKind.CUSTOM, detail, {"code": code, **extra})

    @classmethod
    def invalid_arguments(cls, detail: str, **extra: Any) -> ToolError:
        return cls(ErrorKind.INVALID_ARGUMENTS, detail, extra or None)

    @classmethod
    def not_found(cls, detail: str, **extra: Any) -> ToolError:
        return cls(ErrorKind.NOT_FOUND, detail, extra or None)

    @classmethod
    def permission_denied(cls, detail: str, **extra: Any) -> ToolError:
        return cls(ErrorKind.PERMISSION_DENIED, detail, extra or None)

    @classmethod
    def cancelled(cls, detail: str = "The call was cancelled.") -> ToolError:
        return cls(ErrorKind.CANCELLED, detail)

    @classmethod
    def timeout(cls, detail: str, **extra: Any) -> ToolError:
        return cls(ErrorKind.TIMEOUT, detail, extra or None)

    @classmethod
    def execution(cls, detail: str, **extra: Any) -> ToolError:
        return cls(ErrorKind.EXECUTION, detail, extra or None)

    @classmethod
    def missing_resource(cls, name: str) -> ToolError:
        return cls.custom("missing_resource", f"missing required resource: {name}", resource=name)


class ConfigViolation:
    """One thing wrong with a tool-set configuration; validation returns all of them at once."""

    __slots__ = ("actual", "category", "expected", "field_path", "message", "tool")

    def __init__(
        self,
        tool: str,
        message: str,
        *,
        category: str,
        field_path: str | None = None,
        expected: str | None = None,
        actual: Any = None,
    ) -> None:
        self.tool = tool
        self.message = message
        self.category = category
        self.field_path = field_path
        self.expected = expected
        self.actual = actual

    def summary(self) -> str:
        parts = [f"{self.tool}:"]
        if self.field_path:
            parts.append(f"{self.field_path};")
        parts.append(self.message)
        text = " ".join(parts)
        if self.expected is not None:
            text += f"; expected {self.expected}"
        if self.actual is not None:
            text += f"; got {self.actual!r}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "message": self.message,
            "field_path": self.field_path,
            "expected": self.expected,
            "actual": self.actual,
            "category": self.category,
        }

    def __repr__(self) -> str:
        return f"ConfigViolation({self.category}: {self.summary()})"


class ConfigError(Exception):
    """Raised by ``build`` when a configuration has violations; carries every one of them."""

    def __init__(self, violations: list[ConfigViolation]) -> None:
        self.violations = violations
        lines = "\n".join(f"  - [{v.category}] {v.summary()}" for v in violations)
        super().__init__(f"{len(violations)} configuration violation(s):\n{lines}")
