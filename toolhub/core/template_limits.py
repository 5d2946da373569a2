"""What one template may cost: the bounded Jinja2 sandbox every template renders in.

Some templates come from clients (description overrides), and Python cannot interrupt most of
the work a template asks for once it has started: ``9 ** (9 ** 9)`` is one multiplication loop
in C that holds the GIL until it is done. So each limit here is checked *before* the work it
guards:

* the template source and the rendered text are at most ``MAX_TEMPLATE_CHARS`` /
  ``MAX_OUTPUT_CHARS`` characters; the output is counted while it streams, so a loop that prints
  stops at the limit instead of after it;
* ``**`` and ``*`` may not make an integer of more than ``MAX_INT_BITS`` bits; ``*`` and ``+``
  may not make a string or sequence longer than ``MAX_SEQUENCE``; ``%``, ``|format`` and
  ``str.format`` may not ask for a field wider than ``MAX_SEQUENCE``;
* ``range()`` gives at most ``MAX_RANGE`` items; calls (macros calling macros) nest at most
  ``MAX_CALL_DEPTH`` deep, far inside Python's recursion limit; no call argument and no
  ``namespace()`` value may be larger than ``MAX_SEQUENCE``; ``lipsum`` is gone.

They turn the known bombs into a clear message; they do not prove every template cheap (loops
nest, filters are many). For client templates, time and memory are bounded by the render
process around them (``toolhub/toolset/render_process.py``), whose wall-clock budget holds
however the time is spent. Every failure — a limit, a sandbox refusal, a syntax error, or any
exception the template's evaluation raised (``TypeError``, ``ZeroDivisionError``,
``RecursionError``, ``MemoryError``, …) — is a ``TemplateFailure`` with a one-line reason.

This module imports nothing from toolhub: the render process loads it by path, alone, and so
starts in a tenth of a second instead of importing every tool.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

from jinja2 import ChainableUndefined
from jinja2.exceptions import SecurityError
from jinja2.filters import do_format
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Namespace

#: The template source, in characters.
MAX_TEMPLATE_CHARS = 64 * 1024
#: The rendered text (a description or a prompt), in characters.
MAX_OUTPUT_CHARS = 64 * 1024
#: Items (characters for a string) that one operator, call argument or format field may make.
MAX_SEQUENCE = 64 * 1024
#: Bits of an integer that ``**`` or ``*`` may make (about 1,233 decimal digits).
MAX_INT_BITS = 4096
#: Items one ``range()`` may give.
MAX_RANGE = 10_000
#: How deep calls may nest.
MAX_CALL_DEPTH = 32
#: The longest reason a failure reports (an exception's text may quote the template's values).
MAX_REASON_CHARS = 500

_depth: ContextVar[int] = ContextVar("template_call_depth", default=0)
_PRINTF_FIELD = re.compile(r"%(?:\([^)]*\))?[#0 +-]*(\*|\d+)?(?:\.(\*|\d+))?")
_DIGITS = re.compile(r"\d+")


class TemplateFailure(Exception):
    """Why a template could not be rendered, in one line for the client."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"template could not be rendered: {reason[:MAX_REASON_CHARS]}")


class LimitExceeded(SecurityError):
    """A template asked for more than a limit allows; raised before the work is done."""


def check_output_size(text: str) -> None:
    if len(text) > MAX_OUTPUT_CHARS:
        raise TemplateFailure(
            f"the text is {len(text):,} characters long; at most {MAX_OUTPUT_CHARS:,} are allowed"
        )


def check_template_size(source: str) -> None:
    if len(source) > MAX_TEMPLATE_CHARS:
        raise TemplateFailure(
            f"the template is {len(source):,} characters long; "
            f"at most {MAX_TEMPLATE_CHARS:,} are allowed"
        )


def render_text(source: str, context: Mapping[str, Any]) -> str:
    """``source`` rendered in the bounded sandbox; any failure is a ``TemplateFailure``."""
    check_template_size(source)
    try:
        chunks: list[str] = []
        size = 0
        for chunk in _ENV.from_string(source).generate(dict(context)):
            size += len(chunk)
            if size > MAX_OUTPUT_CHARS:
                raise TemplateFailure(
                    f"the rendered text is longer than {MAX_OUTPUT_CHARS:,} characters"
                )
            chunks.append(chunk)
        return "".join(chunks)
    except TemplateFailure:
        raise
    except RecursionError:
        raise TemplateFailure("the template nests too deeply") from None
    except MemoryError:
        raise TemplateFailure("the template ran out of memory") from None
    except Exception as exc:
        reason = str(exc) if isinstance(exc, SecurityError) else f"{type(exc).__name__}: {exc}"
        raise TemplateFailure(reason) from None


def _size(value: Any) -> int:
    return len(value) if isinstance(value, str | bytes | list | tuple | dict) else 0


def _check_power(base: Any, exponent: Any) -> None:
    if not (isinstance(base, int) and isinstance(exponent, int)) or exponent <= 0:
        return
    if abs(base) > 1 and (
        exponent > MAX_INT_BITS or exponent * math.log2(abs(base)) > MAX_INT_BITS
    ):
        raise LimitExceeded(
            f"`**` would make an integer of more than {MAX_INT_BITS:,} bits (the limit)"
        )


def _check_product(left: Any, right: Any) -> None:
    if isinstance(left, int) and isinstance(right, int):
        if left.bit_length() + right.bit_length() > MAX_INT_BITS:
            raise LimitExceeded(
                f"`*` would make an integer of more than {MAX_INT_BITS:,} bits (the limit)"
            )
        return
    for sequence, times in ((left, right), (right, left)):
        if isinstance(times, int) and _size(sequence) * times > MAX_SEQUENCE:
            raise LimitExceeded(
                f"`*` would make {_size(sequence) * times:,} items; "
                f"at most {MAX_SEQUENCE:,} are allowed"
            )


def _check_sum(left: Any, right: Any) -> None:
    if _size(left) + _size(right) > MAX_SEQUENCE:
        raise LimitExceeded(
            f"`+` would make {_size(left) + _size(right):,} items; "
            f"at most {MAX_SEQUENCE:,} are allowed"
        )


def _check_width(digits: str) -> None:
    if len(digits) > len(str(MAX_SEQUENCE)) or int(digits) > MAX_SEQUENCE:
        raise LimitExceeded(f"a format field may be at most {MAX_SEQUENCE:,} characters wide")


def _check_printf(fmt: str) -> None:
    """``%``-formatting: widths and precisions are bounded; ``*`` (taken from the values) is
    refused, since it cannot be checked before the formatting."""
    for match in _PRINTF_FIELD.finditer(fmt):
        for group in match.groups():
            if group == "*":
                raise LimitExceeded("`*` widths are not allowed in `%` formatting")
            if group:
                _check_width(group)


def _check_format_spec(fmt: str) -> None:
    """``str.format``: every number in a field's spec is bounded; a spec that takes part of
    itself from the values (``{:{w}}``) is refused, since it cannot be checked beforehand."""
    for _, _, spec, _ in string.Formatter().parse(fmt):
        if not spec:
            continue
        if "{" in spec:
            raise LimitExceeded("nested fields are not allowed in a `str.format` spec")
        for digits in _DIGITS.findall(spec):
            _check_width(digits)


def _format_filter(value: Any, *args: Any, **kwargs: Any) -> str:
    _check_printf(str(value))
    return do_format(value, *args, **kwargs)


def _range(*args: int) -> range:
    items = range(*args)
    try:
        too_long = len(items) > MAX_RANGE
    except OverflowError:  # more items than a C integer can count
        too_long = True
    if too_long:
        raise LimitExceeded(f"range() may give at most {MAX_RANGE:,} items")
    return items


def tool_names(by_kind: Any, *kinds: str, conjunction: str = "and") -> str:
    """``${{ tools.by_kind | names('read', 'search', 'edit') }}``: the client names of the
    tools of those kinds that the tool set has, quoted and joined ("`read_file`, `grep` and
    `edit_file`"); empty when it has none. So a description that names its neighbours reads
    right whatever the tool set lacks, instead of "`read_file`, `` and ``"."""
    found = [f"`{by_kind[k]}`" for k in kinds if isinstance(by_kind, Mapping) and by_kind.get(k)]
    if len(found) < 2:
        return "".join(found)
    return f"{', '.join(found[:-1])} {conjunction} {found[-1]}"


class _BoundedNamespace(Namespace):
    """``namespace()`` is the one value a loop can grow from one iteration to the next (with
    ``~``, which the sandbox cannot intercept), so what it holds is bounded."""

    def __setitem__(self, name: str, value: Any) -> None:
        if _size(value) > MAX_SEQUENCE:
            raise LimitExceeded(f"a namespace value may hold at most {MAX_SEQUENCE:,} items")
        super().__setitem__(name, value)


class _BoundedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox with the limits above. An attempt at an unsafe attribute fails
    loudly instead of rendering as empty text, so a hostile template is reported rather than
    half-rendered."""

    intercepted_binops = frozenset({"**", "*", "+", "%"})

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.globals.pop("lipsum", None)
        self.globals["range"] = _range
        self.globals["namespace"] = _BoundedNamespace
        self.filters["format"] = _format_filter
        self.filters["names"] = tool_names

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        raise SecurityError(f"access to attribute {attribute!r} is not allowed")

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        if operator == "**":
            _check_power(left, right)
        elif operator == "*":
            _check_product(left, right)
        elif operator == "+":
            _check_sum(left, right)
        elif isinstance(left, str):  # `%`
            _check_printf(left)
        return super().call_binop(context, operator, left, right)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapped = super().wrap_str_format(value)
        if wrapped is not None:
            _check_format_spec(value.__self__)
        return wrapped

    def call(self, context: Context, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        for arg in (*args, *kwargs.values()):
            if _size(arg) > MAX_SEQUENCE:
                raise LimitExceeded(
                    f"a call argument of {_size(arg):,} items; at most {MAX_SEQUENCE:,} are allowed"
                )
        depth = _depth.get()
        if depth >= MAX_CALL_DEPTH:
            raise LimitExceeded(f"calls nest deeper than {MAX_CALL_DEPTH} (a recursive macro?)")
        token = _depth.set(depth + 1)
        try:
            return super().call(context, obj, *args, **kwargs)
        finally:
            _depth.reset(token)


_ENV = _BoundedSandbox(
    variable_start_string="${{",
    variable_end_string="}}",
    block_start_string="${%",
    block_end_string="%}",
    comment_start_string="${#",
    comment_end_string="#}",
    undefined=ChainableUndefined,
    autoescape=False,
    keep_trailing_newline=True,
)
