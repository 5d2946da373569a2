"""The bounded template sandbox: each bomb from the security review is refused before it
computes, with a clear reason, and ordinary templates render as they always did."""

from __future__ import annotations

import time

import pytest

from toolhub.core import TemplateRenderer, TemplateRenderError
from toolhub.core.template_limits import (
    MAX_CALL_DEPTH,
    MAX_OUTPUT_CHARS,
    MAX_RANGE,
    MAX_TEMPLATE_CHARS,
    TemplateFailure,
    render_text,
)

R = TemplateRenderer(
    by_kind={"read": "view_file", "execute": "run"},
    params={"read": {"offset": "start_line"}},
)

HOSTILE = {
    "huge power": ("${{ 9**(9**9) }}", "`**` would make an integer of more than 4,096 bits"),
    "huge power as text": ("${{ (2**(2**24))|string }}", "`**` would make an integer"),
    "huge product": ("${{ (2**4000) * (2**4000) }}", "`*` would make an integer"),
    "string repetition": ("${{ 'a' * 10**8 }}", "`*` would make 100,000,000 items"),
    "list repetition": ("${{ ([0] * 10**6)|length }}", "`*` would make 1,000,000 items"),
    "concatenation": ("${{ 'a' * 60000 + 'b' * 60000 }}", "`+` would make 120,000 items"),
    "range": ("${{ range(10**9)|list }}", f"range() may give at most {MAX_RANGE:,} items"),
    "range past a C integer": ("${{ range(10**1000) }}", "range() may give at most"),
    "recursive macro": (
        "${% macro f() %}${{ f() }}${% endmacro %}${{ f() }}",
        f"calls nest deeper than {MAX_CALL_DEPTH} (a recursive macro?)",
    ),
    "doubling macro": (
        "${% macro d(s, n) %}${% if n %}${{ d(s ~ s, n - 1) }}${% endif %}${% endmacro %}"
        "${{ d('a', 30) }}",
        "a call argument of 131,072 items",
    ),
    "doubling namespace": (
        "${% set ns = namespace(s='a') %}"
        "${% for i in range(40) %}${% set ns.s = ns.s ~ ns.s %}${% endfor %}",
        "a namespace value may hold at most 65,536 items",
    ),
    "printf width": ("${{ '%0999999999d' % 1 }}", "a format field may be at most 65,536"),
    "printf star width": ("${{ '%*d' % (10**9, 1) }}", "`*` widths are not allowed"),
    "format filter width": ("${{ '%.999999999f'|format(1.5) }}", "a format field may be at most"),
    "str.format width": ("${{ '{:>999999999}'.format(1) }}", "a format field may be at most"),
    "str.format nested spec": ("${{ '{:{w}}'.format(1, w=9) }}", "nested fields are not allowed"),
    "output from nested loops": (
        "${% for i in range(10000) %}${% for j in range(10000) %}x${% endfor %}${% endfor %}",
        f"the rendered text is longer than {MAX_OUTPUT_CHARS:,} characters",
    ),
    "deep nesting": ("${{ " + "(" * 5000 + "1" + ")" * 5000 + " }}", "nests too deeply"),
    "lipsum": ("${{ lipsum(10**6) }}", "'lipsum' is undefined"),
    "attribute escape": ("${{ ''.__class__ }}", "access to attribute '__class__' is not allowed"),
    "include": ("${% include 'x' %}", "no loader"),
    "division by zero": ("${{ 1 / 0 }}", "ZeroDivisionError: division by zero"),
    "type error": ("${{ 'a' - 1 }}", "TypeError: unsupported operand"),
    "bad arguments": ("${{ range(1, 2, 0) }}", "ValueError: range() arg 3 must not be zero"),
    "syntax error": ("${% if %}", "TemplateSyntaxError"),
}


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_template_is_refused_at_once_with_a_reason(name: str) -> None:
    template, reason = HOSTILE[name]
    start = time.monotonic()
    with pytest.raises(TemplateRenderError) as err:
        R.render(template)
    assert time.monotonic() - start < 1.0
    assert err.value.detail.startswith("template could not be rendered: ")
    assert reason in err.value.detail
    assert err.value.details == {"code": "template_render"}
    assert len(err.value.detail) < 600


def test_template_and_plain_text_sizes_are_bounded() -> None:
    with pytest.raises(TemplateRenderError, match="the template is 65,537 characters long"):
        R.render("${{ 1 }}" + "x" * (MAX_TEMPLATE_CHARS - 7))
    with pytest.raises(TemplateRenderError, match="the text is 65,537 characters long"):
        R.render("x" * (MAX_OUTPUT_CHARS + 1))
    assert R.render("x" * MAX_OUTPUT_CHARS) == "x" * MAX_OUTPUT_CHARS
    assert len(R.render("${{ 'x' * 65536 }}")) == MAX_OUTPUT_CHARS


def test_failure_reasons_are_one_bounded_line() -> None:
    with pytest.raises(TemplateFailure) as err:
        render_text("${{ " + "k" * 10_000 + "() }}", {})  # "'kkk…' is undefined"
    assert len(str(err.value)) <= len("template could not be rendered: ") + 500


def test_ordinary_arithmetic_formatting_and_loops_still_render() -> None:
    text = (
        "${{ 2**10 }} ${{ 2**-1 }} ${{ 1.5**100 > 1 }} ${{ 600000 // 1000 }}s "
        "${{ '-' * 5 }} ${{ [1, 2] + [3] }} ${{ '%5d|%-3s|%.2f' % (3, 'a', 1.005) }} "
        "${{ '%s%%'|format(50) }} ${{ '{:,}'.format(600000) }} ${{ '{:>6}'.format('r') }} "
        "${{ range(3)|join(',') }} ${% set ns = namespace(n=0) %}"
        "${% for kind, name in tools.by_kind|dictsort %}${% set ns.n = ns.n + 1 %}"
        "${{ kind }}=${{ name }}${{ ';' if not loop.last }}${% endfor %} (${{ ns.n }})"
        "${% macro twice(x) %}${{ x }}${{ x }}${% endmacro %} ${{ twice('ab') }}"
    )
    assert R.render(text) == (
        "1024 0.5 True 600s ----- [1, 2, 3]     3|a  |1.00 50% 600,000      r 0,1,2 "
        "execute=run;read=view_file (2) abab"
    )


def test_macros_may_nest_within_the_depth_limit() -> None:
    text = (
        "${% macro count(n) %}${% if n %}${{ count(n - 1) }}${% endif %}${{ n }}${% endmacro %}"
        f"${{{{ count({MAX_CALL_DEPTH - 1}) }}}}"
    )
    assert R.render(text) == "".join(str(n) for n in range(MAX_CALL_DEPTH))
