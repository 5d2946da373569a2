"""Type erasure: each typed tool becomes a handle that speaks JSON in and JSON out.

Everything that depends on the tool's types (the argument validator, the JSON Schema, the output
encoder) is made once, when the tool is registered. At call time the dispatcher only moves JSON.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import to_json

from .errors import ErrorKind, ToolError
from .result import ToolOutput, closing, default_model_text
from .schema import clean_schema, null_plan
from .stream import ContentBlock, Progress
from .tool import Tool, ToolContext

logger = logging.getLogger("toolhub.tool")

ECHO_LIMIT = 2000


class Outcome:
    """The terminal of an erased stream: the tagged output, its model text and any content
    blocks (images) it carries, or an error."""

    __slots__ = ("blocks", "error", "output", "text")

    def __init__(
        self,
        output: ToolOutput | None = None,
        text: str = "",
        error: ToolError | None = None,
        blocks: tuple[ContentBlock, ...] = (),
    ) -> None:
        self.output = output
        self.text = text
        self.error = error
        self.blocks = blocks


class ErasedTool:
    """A registered tool, seen as ``(id, JSON args) -> stream of Progress, Outcome``."""

    __slots__ = (
        "_allowed",
        "_blocks",
        "_nulls",
        "_output_type",
        "_text",
        "_validate",
        "fq_id",
        "input_schema",
        "is_sync",
        "properties",
        "tool",
    )

    def __init__(self, tool: Tool[Any, Any]) -> None:
        self.tool = tool
        self.fq_id = tool.fq_id()
        args_model = type(tool).Args
        # Closed: ``parse_args`` refuses unknown arguments, whatever the model's ``extra`` says.
        self.input_schema = {
            **clean_schema(args_model.model_json_schema()),
            "additionalProperties": False,
        }
        self.properties = frozenset(self.input_schema.get("properties", {}))
        self._allowed = frozenset(_accepted_keys(args_model))
        self._nulls = null_plan(self.input_schema)
        self._validate = args_model.model_validate
        self._output_type = type(tool).Output
        self._text = getattr(self._output_type, "model_text", None)
        self._blocks = getattr(self._output_type, "content_blocks", None)
        self.is_sync = not type(tool).is_streaming() and not inspect.iscoroutinefunction(
            type(tool).run
        )

    # -- arguments -----------------------------------------------------------------------------

    def parse_args(
        self,
        arguments: Mapping[str, Any],
        *,
        client_name: str,
        client_names: Mapping[str, str] | None = None,
        original: str | Mapping[str, Any] | None = None,
    ) -> BaseModel:
        """Validate canonical arguments; errors name fields in the client's own parameter names
        and echo the client's original arguments (their text, or their object). An explicit
        ``null`` for an optional parameter that refuses it is taken as absent (``NullPlan``)."""
        if not self._allowed.issuperset(arguments):
            unknown = [k for k in arguments if k not in self._allowed]
            names = ", ".join(f"`{_client(k, client_names)}`" for k in unknown)
            raise self._invalid(client_name, f"unknown argument(s) {names}", arguments, original)
        nulls = self._nulls
        values = (
            arguments
            if nulls is None or not nulls.may_change(arguments)
            else nulls.apply(arguments)
        )
        try:
            return self._validate(values)
        except ValidationError as exc:
            problems = "; ".join(
                f"`{_loc(err['loc'], client_names)}`: {err['msg']}" for err in exc.errors()[:5]
            )
            raise self._invalid(client_name, problems, arguments, original) from None

    def _invalid(
        self,
        name: str,
        problem: str,
        arguments: Mapping[str, Any],
        original: str | Mapping[str, Any] | None,
    ) -> ToolError:
        source = arguments if original is None else original
        echo = source if isinstance(source, str) else _dump(source)
        return ToolError.invalid_arguments(
            f"Failed to parse arguments for tool `{name}`: {problem}\n\n"
            f"Your original arguments:\n{truncate_utf8(echo, ECHO_LIMIT)}",
            tool_id=self.fq_id,
        )

    # -- output --------------------------------------------------------------------------------

    def encode(self, out: Any) -> Outcome:
        """Tag the output and derive its model text; unencodable output is an execution error."""
        try:
            if isinstance(out, BaseModel):
                value = out.model_dump(mode="json")
                refuse_nan(value)
                if type(out) is self._output_type:
                    text_fn, blocks_fn = self._text, self._blocks
                else:
                    text_fn = getattr(type(out), "model_text", None)
                    blocks_fn = getattr(type(out), "content_blocks", None)
                text = text_fn(out) if text_fn is not None else default_model_text(value)
                blocks = tuple(blocks_fn(out)) if blocks_fn is not None else ()
                return Outcome(ToolOutput("tool", value, self.fq_id, out), text, None, blocks)
            if isinstance(out, str):
                return Outcome(ToolOutput.plain_text(out, self.fq_id), out)
            json.dumps(out, allow_nan=False)
            return Outcome(ToolOutput.dynamic(out, self.fq_id), default_model_text(out))
        except Exception as exc:
            return Outcome(
                error=ToolError.execution(
                    f"{self.fq_id} produced output that cannot be encoded: {exc}",
                    tool_id=self.fq_id,
                    code="output_encoding",
                )
            )

    # -- running -------------------------------------------------------------------------------

    def run_sync(self, ctx: ToolContext, args: BaseModel) -> Outcome:
        """The fast path for plain sync ``run`` tools: no event loop, no thread hop."""
        try:
            out = self.tool.run(ctx, args)
        except ToolError as err:
            return Outcome(error=err)
        except Exception as exc:
            return Outcome(error=self._crashed(exc))
        return self.encode(out)

    async def stream(self, ctx: ToolContext, args: BaseModel) -> AsyncIterator[Progress | Outcome]:
        """Progress items as the tool yields them, then exactly one ``Outcome``."""
        last: Any = _NOTHING
        try:
            if not type(self.tool).is_streaming():
                result = self.tool.run(ctx, args)
                last = await result if isinstance(result, Awaitable) else result
            else:
                async with closing(self.tool.execute(ctx, args)) as items:
                    async for item in items:
                        if isinstance(item, Progress):
                            yield item
                        else:
                            last = item
        except ToolError as err:
            yield Outcome(error=err)
            return
        except Exception as exc:
            yield Outcome(error=self._crashed(exc))
            return
        if last is _NOTHING:
            yield Outcome(
                error=ToolError.custom(
                    "stream_no_terminal", f"{self.fq_id} ended without a result", tool_id=self.fq_id
                )
            )
            return
        yield self.encode(last)

    def _crashed(self, exc: Exception) -> ToolError:
        logger.exception("tool %s raised", self.fq_id, exc_info=exc)
        return ToolError(
            ErrorKind.EXECUTION,
            f"{type(exc).__name__}: {exc}",
            {"tool_id": self.fq_id},
        )


_NOTHING: Any = object()


def _accepted_keys(model: type[BaseModel]) -> set[str]:
    keys: set[str] = set()
    for name, info in model.model_fields.items():
        keys.add(name)
        if info.alias:
            keys.add(info.alias)
        choices = getattr(info.validation_alias, "choices", None)
        if choices:
            keys.update(c for c in choices if isinstance(c, str))
        elif isinstance(info.validation_alias, str):
            keys.add(info.validation_alias)
    return keys


def _client(name: str, client_names: Mapping[str, str] | None) -> str:
    return client_names.get(name, name) if client_names else name


def _loc(loc: tuple[Any, ...], client_names: Mapping[str, str] | None) -> str:
    if not loc:
        return "(arguments)"
    head, *rest = loc
    parts = [_client(str(head), client_names), *(str(p) for p in rest)]
    return ".".join(parts)


def refuse_nan(value: Any) -> None:
    """Raise ``ValueError`` when a JSON-mode dump holds NaN or an infinity, the only values such
    a dump keeps that JSON has no word for. Every output goes through here, so the common, clean
    case is one write in Rust and a scan for the bare constants it writes for them (a sixth of
    ``json.dumps(allow_nan=False)``, which builds two encoders each call: a tenth of a no-op
    call); a hit, or a string that only reads "NaN", is settled by the exact check."""
    written = to_json(value, inf_nan_mode="constants")
    # ``find``, not ``in``: CPython's ``bytes in bytes`` first tries the needle as an integer
    # and formats a TypeError it then drops, twice a call (two thirds of this check's time).
    if written.find(b"NaN") >= 0 or written.find(b"Infinity") >= 0:
        json.dumps(value, allow_nan=False)


def _dump(arguments: Mapping[str, Any]) -> str:
    try:
        return json.dumps(arguments, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(arguments)


def truncate_utf8(text: str, limit: int) -> str:
    """At most ``limit`` bytes of ``text``, never splitting a character."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", "ignore")


def parse_arguments(raw: Any, *, name: str) -> tuple[dict[str, Any], str | None]:
    """Arguments as models send them (an object, a JSON string, nothing) → a dict, plus the
    original text for error echoes. Malformed JSON and non-objects are ``invalid_arguments``."""
    if raw is None or raw == "":
        return {}, None
    if isinstance(raw, dict):
        return raw, None
    if isinstance(raw, bytes | bytearray):
        raw = raw.decode("utf-8", "replace")
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ToolError.invalid_arguments(
                f"Failed to parse arguments for tool `{name}`: the arguments are not valid JSON "
                f"({exc})\n\nYour original arguments:\n{truncate_utf8(raw, ECHO_LIMIT)}"
            ) from None
        except RecursionError:
            raise ToolError.invalid_arguments(
                f"Failed to parse arguments for tool `{name}`: the JSON is nested too deeply"
            ) from None
        if value is None:
            return {}, raw
        if not isinstance(value, dict):
            raise ToolError.invalid_arguments(
                f"Failed to parse arguments for tool `{name}`: expected a JSON object, got "
                f"{type(value).__name__}\n\nYour original arguments:\n"
                f"{truncate_utf8(raw, ECHO_LIMIT)}"
            )
        return value, raw
    raise ToolError.invalid_arguments(
        f"Failed to parse arguments for tool `{name}`: expected a JSON object, got "
        f"{type(raw).__name__}"
    )
