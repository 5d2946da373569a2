import pytest

from tests.sample_tools import ALL
from toolhub.core import CapabilityMode, ConfigViolation, ErrorKind, Tool, ToolError, ToolKind
from toolhub.core.kinds import _MODES_BY_KIND


def test_display_shows_detail_not_kind():
    err = ToolError(ErrorKind.NOT_FOUND, "no such file", {"path": "x"})
    assert str(err) == "no such file"
    assert ToolError.from_dict(err.to_dict()) == err


def test_error_kinds_cover_the_seed_and_behavior_versions():
    names = {k.value for k in ErrorKind}
    assert {
        "not_implemented",
        "invalid_arguments",
        "not_found",
        "permission_denied",
        "unauthorized",
        "timeout",
        "cancelled",
        "rate_limited",
        "execution",
        "custom",
        "behavior_version_unsupported",
    } <= names


def test_custom_error_carries_its_code():
    err = ToolError.custom("stream_no_terminal", "ended")
    assert err.kind is ErrorKind.CUSTOM and err.code == "stream_no_terminal"


def test_violation_summary_names_everything():
    v = ConfigViolation(
        "Main:bash",
        "wrong type",
        category="params_type",
        field_path="params.enabled_background",
        expected="bool",
        actual="yes",
    )
    assert (
        v.summary() == "Main:bash: params.enabled_background; wrong type; expected bool; got 'yes'"
    )
    assert set(v.to_dict()) == {"tool", "message", "field_path", "expected", "actual", "category"}


def test_every_kind_has_a_capability_row():
    assert set(_MODES_BY_KIND) == set(ToolKind)


@pytest.mark.parametrize(
    ("kind", "mode", "allowed"),
    [
        (ToolKind.READ, CapabilityMode.READ_ONLY, True),
        (ToolKind.EDIT, CapabilityMode.READ_ONLY, False),
        (ToolKind.EDIT, CapabilityMode.READ_WRITE, True),
        (ToolKind.EDIT, CapabilityMode.EXECUTE, False),
        (ToolKind.EXECUTE, CapabilityMode.READ_WRITE, False),
        (ToolKind.EXECUTE, CapabilityMode.EXECUTE, True),
        (ToolKind.USE_TOOL, CapabilityMode.READ_ONLY, False),
        (ToolKind.USE_TOOL, CapabilityMode.EXECUTE, True),
        (ToolKind.OTHER, CapabilityMode.READ_WRITE, False),
        (ToolKind.OTHER, CapabilityMode.ALL, True),
        (ToolKind.PLAN, CapabilityMode.READ_ONLY, True),
    ],
)
def test_capability_mode_table(kind, mode, allowed):
    assert mode.allows(kind) is allowed


def test_kindless_tools_kept_from_baseline_but_external_only_under_all():
    assert CapabilityMode.READ_ONLY.allows(None)
    assert not CapabilityMode.READ_ONLY.allows(None, external=True)
    assert CapabilityMode.ALL.allows(None, external=True)


def test_unknown_kind_sinks_to_other():
    assert ToolKind.parse("teleport") is ToolKind.OTHER
    assert ToolKind.parse("read") is ToolKind.READ


def _all_tool_classes() -> list[type[Tool]]:
    classes = list(ALL)
    try:
        from toolhub.tools import BUILTIN_TOOLS
    except ImportError:
        return classes
    return classes + list(BUILTIN_TOOLS)


def test_capabilities_read_only_matches_metadata():
    for cls in _all_tool_classes():
        tool = cls()
        assert tool.capabilities().read_only == cls.is_read_only(), cls.fq_id()
        if cls.read_only is None:
            assert cls.is_read_only() == cls.kind.is_read_only, cls.fq_id()


def test_identity_read_only_honors_per_tool_override():
    from tests.sample_tools import Empty, NoArgs

    class Peek(Tool[NoArgs, Empty]):
        id = "peek"
        kind = ToolKind.PLAN
        read_only = True

    assert ToolKind.PLAN.is_read_only is False
    assert Peek.is_read_only() is True and Peek().capabilities().read_only is True
