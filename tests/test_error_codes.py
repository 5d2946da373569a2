"""``ErrorCode`` names every code toolhub sets, and nothing else: each code literal in the
sources (``ToolError.custom("x", ...)``, ``{"code": "x"}``, ``code="x"``, ``code = "x"``, the
Celery executor's ``_failure(prepared, "x", ...)``) is a member, and each member is used
somewhere. Places that cannot import ``toolhub.errors`` (``toolhub.core`` imports nothing of
toolhub) keep plain strings; this test is what keeps them in the enum."""

from __future__ import annotations

import ast
from pathlib import Path

import msgpack

from toolhub.core import ToolError
from toolhub.errors import ErrorCode, RedisUnavailable, ToolhubError

ROOT = Path(__file__).resolve().parent.parent


def _sources() -> list[Path]:
    return [*(ROOT / "toolhub").rglob("*.py"), *(ROOT / "workers").rglob("*.py")]


def _str(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _literal_codes() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in _sources():
        where = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text())):
            codes: list[str | None] = []
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                owner = getattr(getattr(func, "value", None), "id", "")
                if name == "custom" and owner in {"ToolError", "cls"} and node.args:
                    codes.append(_str(node.args[0]))
                if name == "_failure" and len(node.args) >= 2:
                    codes.append(_str(node.args[1]))
                codes += [_str(k.value) for k in node.keywords if k.arg == "code"]
            elif isinstance(node, ast.Assign) and any(
                getattr(t, "id", "") == "code" for t in node.targets
            ):
                value = node.value
                parts = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
                codes += [_str(part) for part in parts]
            elif isinstance(node, ast.Dict):
                codes += [
                    _str(v)
                    for k, v in zip(node.keys, node.values, strict=True)
                    if _str(k) == "code"
                ]
            for code in codes:
                if code is not None:
                    found.setdefault(code, []).append(where)
    return found


def test_every_code_literal_is_an_error_code() -> None:
    found = _literal_codes()
    assert "stream_no_terminal" in found and "template_render" in found  # the scan sees them
    unknown = {code: where for code, where in found.items() if code not in set(ErrorCode)}
    assert unknown == {}


def test_every_error_code_is_used() -> None:
    text = "\n".join(
        p.read_text() for p in _sources() if p.relative_to(ROOT).as_posix() != "toolhub/errors.py"
    )
    unused = [
        code
        for code in ErrorCode
        if code is not ToolhubError.code  # the base's own, set in toolhub/errors.py
        and f"ErrorCode.{code.name}" not in text
        and f'"{code.value}"' not in text
    ]
    assert unused == []


def test_codes_keep_their_wire_values() -> None:
    error = ToolError.custom(ErrorCode.WORKER_LOST, "lost")
    assert error.code == "worker_lost"
    wire = msgpack.unpackb(msgpack.packb(error.to_dict()))
    assert wire["details"]["code"] == "worker_lost" and type(wire["details"]["code"]) is str
    assert ToolError.from_dict(wire) == error


def test_host_errors_share_the_base_and_carry_a_code() -> None:
    from toolhub.gateway.client import GatewayError
    from toolhub.stack.local import StackError
    from toolhub.stack.redis_server import RedisServerNotFound

    for cls, code in [
        (RedisUnavailable, ErrorCode.REDIS_UNAVAILABLE),
        (GatewayError, ErrorCode.GATEWAY_ERROR),
        (StackError, ErrorCode.STACK_ERROR),
        (RedisServerNotFound, ErrorCode.REDIS_SERVER_NOT_FOUND),
    ]:
        assert issubclass(cls, ToolhubError) and cls.code == code
    assert issubclass(GatewayError, RuntimeError) and issubclass(StackError, RuntimeError)
