from hypothesis import given
from hypothesis import strategies as st

from toolhub.core import ToolKind
from toolhub.core.requirements import (
    FALSE,
    TRUE,
    EvalContext,
    IfParams,
    InputParam,
    Kind,
    ParamIs,
    ProposedTool,
    Tool,
    unmet,
)

BASH = ProposedTool(
    "Main", "bash", ToolKind.EXECUTE, {"enabled_background": True}, frozenset({"command"})
)
READ = ProposedTool("Main", "read_file", ToolKind.READ, {}, frozenset({"path", "offset"}))


def test_operators_build_a_tree_and_evaluate():
    expr = Kind(ToolKind.READ) & (Kind(ToolKind.EDIT) | ~Kind(ToolKind.EXECUTE))
    assert expr.evaluate(EvalContext([READ])) is True
    assert expr.evaluate(EvalContext([READ, BASH])) is False


def test_tool_leaf_with_params_condition():
    needs_bg_bash = Tool("Main", "bash", if_params=ParamIs("enabled_background", True))
    assert needs_bg_bash.evaluate(EvalContext([BASH]))
    quiet = ProposedTool("Main", "bash", ToolKind.EXECUTE, {"enabled_background": False})
    assert not needs_bg_bash.evaluate(EvalContext([quiet]))


def test_if_params_is_vacuous_when_the_condition_fails():
    expr = IfParams(ParamIs("enabled_background", True), Kind(ToolKind.KILL_TASK_ACTION))
    assert expr.evaluate(EvalContext([], {"enabled_background": False}))
    assert not expr.evaluate(EvalContext([], {"enabled_background": True}))


def test_input_param_leaf():
    assert InputParam(ToolKind.READ, "offset").evaluate(EvalContext([READ]))
    assert not InputParam(ToolKind.READ, "limit").evaluate(EvalContext([READ]))


def test_explanations_name_what_is_missing():
    expr = Kind(ToolKind.READ) & IfParams(
        ParamIs("enabled_background", True), Kind(ToolKind.KILL_TASK_ACTION)
    )
    ctx = EvalContext([READ], {"enabled_background": True})
    missing = unmet(expr, ctx)
    assert [m.explain() for m in missing] == ["a tool of kind `kill_task_action`"]
    assert "when enabled_background = True" in expr.explain()


def test_to_json_is_serialisable():
    import json

    expr = (Kind(ToolKind.READ) | Tool("Main", "x")) & ~InputParam(ToolKind.EDIT, "old")
    json.dumps(expr.to_json())


_TOOLS = st.lists(
    st.builds(
        ProposedTool,
        st.sampled_from(["Main", "Codex"]),
        st.sampled_from(["bash", "read_file", "grep"]),
        st.sampled_from([ToolKind.READ, ToolKind.EXECUTE, ToolKind.SEARCH]),
        st.fixed_dictionaries({"flag": st.booleans()}),
        st.just(frozenset({"path"})),
    ),
    max_size=4,
)

_LEAVES = st.one_of(
    st.just(TRUE),
    st.just(FALSE),
    st.builds(Kind, st.sampled_from([ToolKind.READ, ToolKind.EXECUTE, ToolKind.EDIT])),
    st.builds(Tool, st.sampled_from(["Main", "Codex"]), st.sampled_from(["bash", "grep"])),
    st.builds(InputParam, st.sampled_from([ToolKind.READ, ToolKind.SEARCH]), st.just("path")),
)

_EXPRS = st.recursive(
    _LEAVES,
    lambda children: st.one_of(
        st.builds(lambda a, b: a & b, children, children),
        st.builds(lambda a, b: a | b, children, children),
        st.builds(lambda a: ~a, children),
        st.builds(IfParams, st.builds(ParamIs, st.just("flag"), st.booleans()), children),
    ),
    max_leaves=8,
)


@given(_EXPRS, _TOOLS, st.booleans())
def test_a_requirement_and_its_negation_never_both_hold(expr, tools, flag):
    ctx = EvalContext(tools, {"flag": flag})
    assert expr.evaluate(ctx) != (~expr).evaluate(ctx)
    assert (~~expr).evaluate(ctx) == expr.evaluate(ctx)
