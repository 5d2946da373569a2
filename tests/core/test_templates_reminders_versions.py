import pytest

from toolhub.core import (
    BehaviorVersion,
    Lifecycle,
    TemplateRenderer,
    TemplateRenderError,
    resolve_version,
    wrap_reminders,
)

R = TemplateRenderer(by_kind={"read": "view_file"}, params={"read": {"offset": "start_line"}})


def test_renders_kind_and_param_names():
    text = "Use ${{ tools.by_kind.read }} with `${{ params.read.offset }}`."
    assert R.render(text) == "Use view_file with `start_line`."


def test_render_missing_kind_output_position_is_empty_ok():
    assert R.render("[${{ tools.by_kind.lsp }}]") == "[]"
    assert R.render("${% if tools.by_kind.lsp %}lsp${% endif %}ok") == "ok"


def test_literal_braces_and_dollar_braces_are_plain_text():
    text = 'JSON: {"a": {{ b }}} costs ${5}'
    assert R.render(text) == text
    assert R.render(text + " ${{ tools.by_kind.read }}") == text + " view_file"


def test_conditional_sections_omit_absent_tools():
    text = "${% if tools.by_kind.read %}read with ${{ tools.by_kind.read }}${% endif %}"
    assert R.render(text) == "read with view_file"
    assert TemplateRenderer().render(text) == ""


def test_sandbox_refuses_attribute_escapes():
    with pytest.raises(TemplateRenderError) as err:
        R.render("${{ ''.__class__.__mro__[1].__subclasses__() }}")
    assert err.value.kind == "invalid_arguments"


def test_syntax_error_is_a_typed_render_error():
    with pytest.raises(TemplateRenderError):
        R.render("${% if %}")


def test_render_schema_descriptions_recurses_into_nested():
    schema = {
        "properties": {
            "a": {"description": "see ${{ tools.by_kind.read }}"},
            "b": {"items": {"description": "${{ params.read.offset }}"}},
        }
    }
    out = R.render_schema(schema)
    assert out["properties"]["a"]["description"] == "see view_file"
    assert out["properties"]["b"]["items"]["description"] == "start_line"


def test_format_with_reminders_wraps_and_appends():
    assert wrap_reminders("out", ["a", "b"]) == (
        "out\n\n<system-reminder>\na\n</system-reminder>\n\n<system-reminder>\nb\n</system-reminder>"
    )
    assert wrap_reminders("", ["a"], tag="note") == "<note>\na\n</note>"
    assert wrap_reminders("out", []) == "out"


VERSIONS = (
    BehaviorVersion("current"),
    BehaviorVersion("legacy-1", Lifecycle.DEPRECATED, replacement="current"),
    BehaviorVersion("legacy-0", Lifecycle.REMOVAL_CANDIDATE),
)


def test_resolution_order_override_then_preset_then_current():
    assert resolve_version("Main:x", VERSIONS, None, None).version == "current"
    assert resolve_version("Main:x", VERSIONS, None, {"Main:x": "legacy-1"}).version == "legacy-1"
    assert (
        resolve_version("Main:x", VERSIONS, "current", {"Main:x": "legacy-1"}).version == "current"
    )


def test_deprecated_version_produces_tool_warning():
    resolved = resolve_version("Main:x", VERSIONS, "legacy-1", None)
    assert resolved.version == "legacy-1" and "deprecated" in resolved.warning.message


def test_removal_candidate_version_is_rejected():
    resolved = resolve_version("Main:x", VERSIONS, "legacy-0", None)
    assert resolved.error and "removal" in resolved.error


def test_unsupported_version_errors_with_list():
    resolved = resolve_version("Main:x", VERSIONS, "v9", None)
    assert "current, legacy-0, legacy-1" in resolved.error


def test_override_on_unmanaged_tool_errors():
    assert resolve_version("Main:y", (), "legacy-1", None).error
    assert resolve_version("Main:y", (), None, None).version is None


def test_legacy_preset_falls_back_to_current_for_unported_tool():
    only_current = (BehaviorVersion("current"),)
    assert (
        resolve_version("Main:z", only_current, None, {"Main:z": "legacy-1"}).version == "current"
    )
