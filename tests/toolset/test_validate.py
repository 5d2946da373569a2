import pytest

from toolhub.core import ConfigError


def cats(report):
    return [v.category for v in report.violations]


def test_default_tool_set_when_tools_are_omitted(builder):
    toolset = builder.build({})
    assert set(toolset.entries) == {"echo", "noop"}


def test_unknown_tool_suggests_close_ids(builder):
    report = builder.validate({"tools": [{"id": "Main:ecoh"}, {"id": "Main:nope"}]})
    assert cats(report) == ["tool_not_found", "tool_not_found"]
    assert "Main:echo" in report.violations[0].message
    assert report.violations[1].field_path == "tools[1].id"


def test_validate_config_reports_param_field_path_and_value(builder):
    report = builder.validate(
        {"tools": [{"id": "Main:echo"}, {"id": "Main:writer", "params": {"needs_reader": "maybe"}}]}
    )
    (v,) = report.violations
    assert (v.tool, v.field_path, v.category, v.actual) == (
        "Main:writer",
        "params.needs_reader",
        "params_type",
        "maybe",
    )


def test_every_param_problem_of_the_stage_is_reported(builder):
    report = builder.validate(
        {
            "tools": [
                {"id": "Main:echo"},
                {"id": "Main:writer", "params": {"limit": 0, "colour": "red"}},
                {"id": "Main:noop", "params": {"x": 1}},
            ]
        }
    )
    # An unknown param no longer hides the constraint error beside it (issue 16).
    assert sorted(cats(report)) == [
        "params_constraint",
        "params_unknown_field",
        "params_unknown_field",
    ]
    report = builder.validate(
        {"tools": [{"id": "Main:echo"}, {"id": "Main:writer", "params": {"limit": 0}}]}
    )
    assert cats(report) == ["params_constraint"]


def test_validate_config_rejects_duplicate_client_name(builder):
    report = builder.validate({"tools": [{"id": "Main:echo"}, {"id": "Main:noop", "name": "echo"}]})
    assert cats(report) == ["duplicate_client_name"]


def test_validate_config_allows_name_override_to_disambiguate(builder):
    report = builder.validate(
        {"tools": [{"id": "Alpha:read_file"}, {"id": "Main:echo", "name": "read_file2"}]}
    )
    assert report.ok


@pytest.mark.parametrize("name", ["has space", "dots.here", "", "ü", "x" * 65])
def test_name_override_outside_charset_is_rejected(builder, name):
    report = builder.validate({"tools": [{"id": "Main:echo", "name": name}]})
    assert cats(report) == ["invalid_name"]


def test_rename_onto_an_existing_parameter_is_a_collision(builder):
    report = builder.validate({"tools": [{"id": "Main:echo", "rename": {"text": "times"}}]})
    assert cats(report) == ["rename_collision"]
    report = builder.validate(
        {"tools": [{"id": "Main:echo", "rename": {"text": "x", "times": "x"}}]}
    )
    assert cats(report) == ["rename_collision"]


def test_swapping_two_parameter_names_is_allowed(builder):
    report = builder.validate(
        {"tools": [{"id": "Main:echo", "rename": {"text": "times", "times": "text"}}]}
    )
    assert report.ok


def test_rename_of_unknown_parameter(builder):
    report = builder.validate({"tools": [{"id": "Main:echo", "rename": {"colour": "c"}}]})
    assert cats(report) == ["rename_unknown_param"]


def test_mutually_exclusive_variants(builder):
    report = builder.validate(
        {"tools": [{"id": "Alpha:read_file"}, {"id": "Beta:read_file", "name": "rb"}]}
    )
    assert cats(report) == ["variant_conflict", "variant_conflict"]


def test_requirement_error_mentions_what_is_missing(builder):
    report = builder.validate({"tools": [{"id": "Main:writer"}]})
    (v,) = report.violations
    assert v.category == "requirements" and "a tool of kind `read`" in v.message
    report = builder.validate({"tools": [{"id": "Main:writer", "params": {"needs_reader": False}}]})
    assert report.ok


def test_unknown_preset_and_versions(builder):
    assert cats(builder.validate({"preset": "nope", "tools": [{"id": "Main:echo"}]})) == [
        "behavior_preset"
    ]
    report = builder.validate(
        {"tools": [{"id": "Main:echo"}, {"id": "Main:writer", "version": "v9"}]}
    )
    assert cats(report) == ["behavior_version"]
    assert "current, legacy-0, legacy-1" in report.violations[0].message
    report = builder.validate({"tools": [{"id": "Main:echo", "version": "legacy-1"}]})
    assert cats(report) == ["behavior_version"]


def test_deprecated_version_is_a_warning_not_a_violation(builder):
    report = builder.validate(
        {"tools": [{"id": "Main:echo"}, {"id": "Main:writer", "version": "legacy-1"}]}
    )
    assert report.ok and "deprecated" in report.warnings[0].message
    report = builder.validate(
        {"preset": "legacy", "tools": [{"id": "Main:echo"}, {"id": "Main:writer"}]}
    )
    assert report.ok and report.warnings


def test_malformed_config_shapes_are_violations_not_exceptions(builder):
    assert cats(builder.validate({"tools": "all"})) == ["config_type"]
    assert cats(builder.validate({"tools": [{"name": "x"}]})) == ["missing_field"]
    assert cats(builder.validate({"colour": 1})) == ["unknown_field"]
    assert cats(builder.validate([1, 2])) == ["config_parse"]


def test_build_raises_config_error_with_every_violation(builder):
    with pytest.raises(ConfigError) as err:
        builder.build({"tools": [{"id": "Main:a"}, {"id": "Main:b"}]})
    assert len(err.value.violations) == 2


def test_config_file_yaml_and_json(builder, tmp_path):
    (tmp_path / "t.yaml").write_text("tools:\n  - id: Main:echo\n    name: say\n")
    (tmp_path / "t.json").write_text('{"tools": [{"id": "Main:noop"}]}')
    (tmp_path / "bad.yaml").write_text("tools: [unclosed\n")
    assert list(builder.build(tmp_path / "t.yaml").entries) == ["say"]
    assert list(builder.build(tmp_path / "t.json").entries) == ["noop"]
    assert cats(builder.validate(tmp_path / "bad.yaml")) == ["config_parse"]
    assert cats(builder.validate(tmp_path / "missing.yaml")) == ["config_parse"]


def test_independent_problems_are_reported_in_one_pass(tmp_path) -> None:
    """What took a newcomer seven fix-and-rerun rounds comes back at once: an unknown tool, a
    bad version, an unknown param beside a wrong type, a duplicate name, a rename of a param
    that does not exist and a variant conflict; the one dependent check (requirements, which
    the unknown tool might meet) says it was not checked, and why."""
    from toolhub.session import default_builder

    report = default_builder().validate(
        {
            "tools": [
                {"id": "Main:read_fil"},
                {"id": "Main:bash", "version": "v99", "params": {"max_timeout_ms": "x", "oops": 1}},
                {"id": "Main:grep", "name": "glob"},
                {"id": "Main:glob"},
                {"id": "Main:edit_file", "rename": {"nope": "n"}},
                {"id": "Codex:apply_patch"},
            ]
        }
    )
    found = sorted(cats(report))
    for category in (
        "tool_not_found",
        "behavior_version",
        "params_unknown_field",
        "params_type",
        "duplicate_client_name",
        "rename_unknown_param",
        "variant_conflict",
        "not_checked",
    ):
        assert category in found, (category, found)
    skipped = next(v for v in report.violations if v.category == "not_checked")
    assert "Main:read_fil" in skipped.message and "fix those first" in skipped.message


def test_a_wrong_shape_hides_no_other_violation(builder):
    """A typo'd key no longer stops the checks against the registry (issue 40): the entries
    left out of the check keep their index in the paths of what is found after."""
    report = builder.validate(
        {
            "tools": [
                {"idd": "Main:echo"},
                {"id": "Main:ech", "colour": "red"},
                {"id": "Main:noop", "version": "nope"},
            ],
        }
    )
    found = {(v.category, v.field_path) for v in report.violations}
    assert ("missing_field", "tools[0].id") in found
    assert ("unknown_field", "tools[0].idd") in found
    assert ("unknown_field", "tools[1].colour") in found
    assert ("tool_not_found", "tools[1].id") in found, "Main:ech is still looked up"
    assert ("behavior_version", "tools[2].version") in found, "and so is entry 2"
    typo = next(v for v in report.violations if v.field_path == "tools[0].idd")
    assert "did you mean 'id'?" in typo.message
