"""Tool-set presets (issue 17): ``preset: <name>`` instead of a tool list, validated like any
config; explicit entries override the preset's by id or add tools; an unknown preset lists the
known ones; and every path that takes a config (Session.embedded, the gateway's
``POST /v1/sessions``, ``toolhub tools --config``) builds the same tool set. The OpenCode family
rules (variant conflicts, requirements) are checked here too, on the real built-ins."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cli.in_process import run_cli
from toolhub import ConfigError, Session
from toolhub.core import CapabilityMode, ToolKind
from toolhub.tools import CATALOG, TOOLSET_PRESETS
from toolhub.toolset import ToolSetBuilder


@pytest.fixture(scope="module")
def builder() -> ToolSetBuilder:
    return ToolSetBuilder(CATALOG, plugins=False)


def cats(report: Any) -> list[str]:
    return sorted(v.category for v in report.violations)


def names(session: Session) -> list[str]:
    return [d["name"] for d in session.definitions("mcp")]


def schema(session: Session, name: str) -> dict[str, Any]:
    (found,) = [d["inputSchema"] for d in session.definitions("mcp") if d["name"] == name]
    return found


@pytest.mark.parametrize("mode", list(CapabilityMode))
@pytest.mark.parametrize("preset", sorted(TOOLSET_PRESETS))
def test_every_preset_is_valid_in_every_mode(
    builder: ToolSetBuilder, preset: str, mode: CapabilityMode
) -> None:
    report = builder.validate({"preset": preset, "mode": mode.value})
    assert report.ok, report.violations
    assert report.resolved  # never filtered down to nothing
    if mode is CapabilityMode.READ_ONLY:
        changes = {ToolKind.EDIT, ToolKind.WRITE, ToolKind.DELETE, ToolKind.MOVE, ToolKind.EXECUTE}
        assert not {r.kind for r in report.resolved} & changes


def test_the_documented_presets_exist_and_are_described() -> None:
    assert set(TOOLSET_PRESETS) == {"coding", "explore", "plan", "codex", "opencode", "hashline"}
    assert all(p["description"] and p["tools"] for p in TOOLSET_PRESETS.values())
    doc = (Path(__file__).resolve().parents[2] / "docs/contract.md").read_text()
    for name in TOOLSET_PRESETS:
        assert f"`{name}`" in doc


def test_a_preset_lists_its_tools_with_renames(tmp_path: Path) -> None:
    with Session.embedded({"preset": "coding"}, tmp_path, state_dir=tmp_path / "s") as s:
        listed = names(s)
        assert "run_terminal_command" in listed and "bash" not in listed
        assert {"get_command_output", "wait_commands", "kill_command"} <= set(listed)
        assert "background" in schema(s, "run_terminal_command")["properties"]
    with Session.embedded({"preset": "opencode"}, tmp_path, state_dir=tmp_path / "o") as s:
        assert names(s) == ["bash", "read", "edit", "write", "grep", "glob", "todowrite", "skill"]
        assert "filePath" in schema(s, "read")["properties"]


def test_explicit_entries_override_by_id_and_add(tmp_path: Path) -> None:
    config = {
        "preset": "coding",
        "tools": [
            {"id": "Main:bash", "params": {"max_timeout_ms": 1000}},
            {"id": "Main:read_file", "name": "view"},
            {"id": "Main:memory_search"},
        ],
    }
    with Session.embedded(config, tmp_path, state_dir=tmp_path / "s") as s:
        listed = names(s)
        assert listed[0] == "view" and listed[-1] == "memory_search"
        bash = schema(s, "run_terminal_command")  # the preset's name and rename survive
        assert bash["properties"]["timeout"]["maximum"] == 1000
        assert "background" in bash["properties"]
        assert len(listed) == len(TOOLSET_PRESETS["coding"]["tools"]) + 1


def test_overrides_merge_params_and_survive_serialization(builder: ToolSetBuilder) -> None:
    from toolhub.toolset import ToolSetConfig, merge

    config = ToolSetConfig.load(
        {"preset": "codex", "tools": [{"id": "Main:bash", "params": {"max_timeout_ms": 1000}}]}
    )
    # A worker gets the config serialized, every field present: the overlay must not change.
    for cfg in (config, ToolSetConfig.model_validate(config.model_dump(mode="json"))):
        (bash,) = [
            t for t in merge(cfg, builder.registry).config.tools or [] if t.id == "Main:bash"
        ]
        assert bash.name == "shell"
        assert bash.params == {"enabled_background": False, "max_timeout_ms": 1000}


def test_a_preset_is_filtered_by_mode(tmp_path: Path) -> None:
    config = {"preset": "coding", "mode": "read_only"}
    with Session.embedded(config, tmp_path, state_dir=tmp_path / "s") as s:
        listed = set(names(s))
    assert {"read_file", "grep"} <= listed
    assert not listed & {"write_file", "edit_file", "run_terminal_command", "kill_command"}


def test_an_unknown_preset_lists_the_known_ones(builder: ToolSetBuilder) -> None:
    report = builder.validate({"preset": "codding"})
    (v,) = report.violations
    assert v.category == "behavior_preset" and v.field_path == "preset" and v.actual == "codding"
    for known in [*TOOLSET_PRESETS, "current", "legacy-1"]:
        assert known in (v.expected or "") and known in v.message


def test_a_preset_and_its_overrides_are_validated_like_any_config(
    builder: ToolSetBuilder,
) -> None:
    mixed = builder.validate({"preset": "opencode", "tools": [{"id": "Main:edit_file"}]})
    assert set(cats(mixed)) == {"variant_conflict"}
    bad = builder.validate(
        {"preset": "coding", "tools": [{"id": "Main:grep", "params": {"max_lines": 0}}]}
    )
    assert cats(bad) == ["params_constraint"]
    typo = builder.validate({"preset": "plan", "tools": [{"id": "Main:gerp"}]})
    assert cats(typo) == ["tool_not_found"]


def test_behavior_presets_still_pin_versions(builder: ToolSetBuilder) -> None:
    report = builder.validate({"preset": "legacy-1"})
    assert report.ok
    versions = {r.config.id: r.version for r in report.resolved}
    assert versions["Main:read_file"] == "legacy-1" and "Main:bash" in versions


def test_preset_names_cannot_clash(builder: ToolSetBuilder) -> None:
    fresh = ToolSetBuilder(plugins=False)
    fresh.register_toolset_preset("mine", [{"id": "Main:read_file"}], "one tool")
    with pytest.raises(ValueError, match="tool-set preset"):
        fresh.register_preset("mine", {})
    with pytest.raises(ValueError, match="behavior preset"):
        fresh.register_toolset_preset("current", [])
    with pytest.raises(ValueError):
        fresh.register_toolset_preset("broken", [{"name": "no id"}])


def test_opencode_family_rules(builder: ToolSetBuilder) -> None:
    conflict = builder.validate(
        {"tools": [{"id": "OpenCode:read"}, {"id": "Main:write_file", "name": "w"}]}
    )
    assert cats(conflict) == ["variant_conflict", "variant_conflict"]
    edit_alone = builder.validate({"tools": [{"id": "OpenCode:edit"}]})
    assert cats(edit_alone) == ["requirements"]
    # OpenCode's bash is foreground only: it is no producer for the task tools.
    tasks = builder.validate({"tools": [{"id": "OpenCode:bash"}, {"id": "Main:task_output"}]})
    assert cats(tasks) == ["requirements"]
    # Beside the Main tool it runs, a variant must have the same params (one value is kept).
    quiet = {"enabled_background": False}
    both = [
        {"id": "Main:bash", "name": "sh", "params": quiet},
        {"id": "OpenCode:bash", "params": {**quiet, "max_timeout_ms": 5}},
    ]
    differ = builder.validate({"tools": both})
    assert [(v.tool, v.category) for v in differ.violations] == [("OpenCode:bash", "requirements")]
    assert "same params" in differ.violations[0].message
    assert builder.validate({"tools": [both[0], {**both[1], "params": quiet}]}).ok
    # Non-file OpenCode tools mix with Main ones.
    mixed = builder.validate(
        {"tools": [{"id": "OpenCode:todowrite"}, {"id": "OpenCode:bash"}, {"id": "Main:read_file"}]}
    )
    assert mixed.ok


def test_a_preset_through_the_gateway(tmp_path: Path) -> None:
    from toolhub.gateway import GatewaySettings, ThreadedServer, create_app

    def factory(config: Any, workspace: Path, session_id: str) -> Session:
        return Session.embedded(
            config, workspace, session_id=session_id, state_dir=tmp_path / "s" / session_id
        )

    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.txt").write_text("hello\n")
    app = create_app(GatewaySettings(workspace=tmp_path / "ws"), factory=factory)
    server = ThreadedServer(app).start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as c:
            made = c.post("/v1/sessions", json={"config": {"preset": "opencode"}})
            assert made.status_code == 201, made.text
            sid = made.json()["session_id"]
            tools = c.get(f"/v1/sessions/{sid}/tools", params={"format": "mcp"}).json()
            assert [t["name"] for t in tools][:2] == ["bash", "read"]
            call = c.post(
                f"/v1/sessions/{sid}/calls",
                json={"name": "read", "arguments": {"filePath": "a.txt"}},
            )
            assert call.status_code == 200 and "<path>a.txt</path>" in call.text, call.text
            bad = c.post("/v1/sessions", json={"config": {"preset": "nope"}})
            assert bad.status_code == 422 and "opencode" in bad.text
    finally:
        server.stop()


def test_a_preset_through_the_cli(tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TOOLHUB_") or k == "TOOLHUB_ALLOW_ROOT"
    }
    env["TOOLHUB_HOME"] = str(tmp_path / "home")
    config = tmp_path / "toolset.yaml"
    config.write_text("preset: hashline\ntools:\n  - id: Main:bash\n    name: sh\n")
    done = run_cli(
        ["tools", "--config", str(config), "--format", "mcp", "--workspace", str(tmp_path)],
        env,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    listed = [t["name"] for t in json.loads(done.stdout)]
    assert listed[:3] == ["hashline_read", "hashline_edit", "hashline_grep"] and "sh" in listed
    config.write_text("preset: nope\n")
    bad = run_cli(["validate", str(config)], env, tmp_path)
    assert bad.returncode == 1 and "hashline" in bad.stdout + bad.stderr


def test_a_config_error_names_the_preset_problem(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        Session.embedded({"preset": "nope"}, tmp_path, state_dir=tmp_path / "s")
    assert [v.field_path for v in err.value.violations] == ["preset"]
