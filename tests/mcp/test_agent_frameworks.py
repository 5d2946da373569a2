"""Agent frameworks' own MCP support, each at a pinned version in its own virtualenv
(``tests/client_venvs.py``), run against ``toolhub mcp`` as their users run it:

- Google ADK (``google-adk[mcp]``): an ``LlmAgent`` with an ``McpToolset``, run by ADK's runner
  with a scripted ``BaseLlm`` that records what ADK hands the model (adk_client.py);
- LlamaIndex (``llama-index-tools-mcp``): ``McpToolSpec`` tools called as its agents call them,
  over streamable HTTP (``toolhub mcp --transport http``, bearer auth) (llama_index_client.py);
- smolagents (``smolagents[mcp]`` with ``mcp<2``, which its adapter mcpadapt needs): a
  ``ToolCallingAgent`` executing calls (smolagents_client.py).

For each: a result reaches the model once (toolhub's structured copy goes only to clients that
ask for it: ``toolhub/mcp/call_results.py``), every parameter's description and bounds reach the
model as the framework converts the schema (or the framework's own loss is pinned here and
documented in docs/integrations.md), an optional integer argument can be left out or given, and
a model's out-of-bounds argument comes back as an error result the model reads. Each driver runs
once per module; the tests read its one JSON answer.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.client_venvs import client_python
from tests.http_process import serving
from tests.mcp.stdio_support import TOOLHUB, toolhub_args, toolhub_env
from tests.toolset.catalog_schemas import BOUNDS as CATALOG_BOUNDS
from toolhub import Session
from toolhub.ports import free_port

#: The third-party clients these tests run (built in the background: tests/conftest.py).
NEEDS_CLIENTS = ("google-adk", "llama-index", "smolagents")

pytestmark = pytest.mark.timeout(900)

HERE = Path(__file__).parent
LINES = 300
#: One line of the file read below; it must appear exactly once in what the model is given.
MARKER = "marker-0150"
#: What a call is given, as a model would ask: the whole file; an optional integer given (a
#: negative offset, the last two lines); a bound broken (``limit`` has ``minimum: 1``).
CALLS = [
    {"name": "read_file", "args": {"path": "big.txt"}},
    {"name": "read_file", "args": {"path": "big.txt", "offset": -2}},
    {"name": "read_file", "args": {"path": "big.txt", "limit": 0}},
]
#: JSON Schema keywords that bound a value, and their names in google-genai's ``Schema``.
BOUNDS = {**CATALOG_BOUNDS, "enum": "enum"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A workspace with a file of ``LINES`` numbered lines, and how to start ``toolhub mcp``
    on it (the same for every framework)."""
    home = tmp_path_factory.mktemp("frameworks")
    workspace = home / "ws"
    workspace.mkdir()
    text = "\n".join(f"line {n:04d} of a long file, marker-{n:04d}" for n in range(1, LINES + 1))
    (workspace / "big.txt").write_text(text + "\n")
    return {"command": TOOLHUB, "args": toolhub_args(workspace), "env": toolhub_env(home)}


@pytest.fixture(scope="module")
def served_http(served: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The same server on streamable HTTP, with bearer auth: its URL and headers."""
    port = free_port()
    with serving(
        [TOOLHUB, *served["args"], "--transport", "http", "--port", str(port)],
        f"http://127.0.0.1:{port}/mcp",
        env={**served["env"], "TOOLHUB_API_TOKEN": "tok"},
        ready=lambda answer: answer.status_code == 401,  # up, and guarded
    ) as url:
        yield {"url": url, "headers": {"Authorization": "Bearer tok"}}


@pytest.fixture(scope="module")
def listed(served: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The input schema of each tool, as toolhub's MCP server lists it."""
    workspace = Path(served["args"][served["args"].index("--workspace") + 1])
    state = tmp_path_factory.mktemp("state")
    session = Session.embedded(None, workspace, state_dir=state)
    try:
        return {d["name"]: d["inputSchema"] for d in session.definitions("mcp")}
    finally:
        session.close()


def run_driver(venv: str, script: str, connection: dict[str, Any]) -> dict[str, Any]:
    """Run ``script`` (beside this file) with the python of the client virtualenv ``venv``;
    its last line of output, as JSON."""
    python = client_python(venv)
    done = subprocess.run(
        [str(python), str(HERE / script), json.dumps(connection)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def assert_kept(
    listed: dict[str, Any],
    converted: dict[str, dict[str, Any]],
    description: Callable[[dict[str, Any]], str],
    *,
    bounds: dict[str, str] | None,
) -> None:
    """Every top-level parameter of every tool keeps its description (``description`` finds it
    in the converted property) and, unless ``bounds`` is None, each bound keyword under its
    name in the converted form."""
    lost = []
    for tool, schema in listed.items():
        for name, prop in schema.get("properties", {}).items():
            seen = converted[tool].get(name)
            if seen is None:
                lost.append(f"{tool}.{name}")
                continue
            if prop.get("description") and prop["description"] not in description(seen):
                lost.append(f"{tool}.{name}.description")
            for keyword, theirs in (bounds or {}).items():
                if keyword in prop and seen.get(theirs) != prop[keyword]:
                    lost.append(f"{tool}.{name}.{keyword}")
    assert lost == []


def assert_once(text: str) -> None:
    """The file's text is in ``text`` once: no structured copy beside it."""
    assert text.count(MARKER) == 1, text.count(MARKER)
    assert "toolhub/output" not in text


# -- Google ADK --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def adk(served: dict[str, Any]) -> dict[str, Any]:
    return run_driver("google-adk", "adk_client.py", {**served, "calls": CALLS})


def test_adk_gives_the_model_each_result_once(adk: dict[str, Any]) -> None:
    whole, tail, refused = (r["response"] for r in adk["responses"])
    assert_once(json.dumps(whole, ensure_ascii=False))
    assert whole["isError"] is False
    assert "(lines 299-300 of 300)" in tail["content"][0]["text"]
    assert refused["isError"] is True
    # The failure's words once too: its typed error in ``_meta`` (which ADK also passes on)
    # says its kind, not the text again.
    assert json.dumps(refused).count("greater than or equal to 1") == 1, refused
    assert refused["meta"]["toolhub/error"]["kind"] == "invalid_arguments"


def test_adk_declarations_keep_every_description_and_bound(
    adk: dict[str, Any], listed: dict[str, Any]
) -> None:
    # ADK's default hands the model the MCP schema as listed; it only fences each description
    # (``<<<BEGIN_UNTRUSTED_TOOL_DESCRIPTION>>>``) against prompt injection.
    assert adk["listed"] == listed
    declared = {
        name: d["parameters_json_schema"]["properties"] for name, d in adk["declarations"].items()
    }
    same_names = {k: k for k in BOUNDS}
    assert_kept(listed, declared, lambda p: p.get("description", ""), bounds=same_names)
    # Its Gemini ``Schema`` conversion (the older path, behind a feature flag) keeps them too:
    # toolhub lists nullable as ``type: [t, "null"]``, which it turns into ``nullable``.
    converted = {
        name: d["parameters"]["properties"] for name, d in adk["gemini_schema_declarations"].items()
    }
    assert_kept(listed, converted, lambda p: p.get("description", ""), bounds=BOUNDS)
    assert converted["read_file"]["offset"]["nullable"] is True


# -- LlamaIndex --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def llama_index(served_http: dict[str, Any]) -> dict[str, Any]:
    return run_driver("llama-index", "llama_index_client.py", {**served_http, "calls": CALLS})


def test_llama_index_gives_the_model_each_result_once(llama_index: dict[str, Any]) -> None:
    whole, tail, refused = (r["text"] for r in llama_index["responses"])
    # It shows the model the whole ``CallToolResult`` as Python prints it: the text is in it
    # once, with its newlines escaped.
    assert_once(whole)
    assert whole.startswith("meta=None content=[TextContent(type='text', text='     1→line 0001")
    assert "(lines 299-300 of 300)" in tail
    assert "is_error=True" in refused and refused.count("greater than or equal to 1") == 1


def test_llama_index_keeps_descriptions_and_drops_bounds(
    llama_index: dict[str, Any], listed: dict[str, Any]
) -> None:
    params = {name: p["properties"] for name, p in llama_index["parameters"].items()}
    assert_kept(listed, params, lambda p: p.get("description", ""), bounds=None)
    # Its schema-to-pydantic conversion keeps type, default and description only: the model
    # is not shown bounds (toolhub still enforces them, as the refused call above shows).
    assert "minimum" not in params["read_file"]["limit"]
    assert "maximum" not in params["bash"]["timeout"]


# -- smolagents --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def smolagents(served: dict[str, Any], listed: dict[str, Any]) -> dict[str, Any]:
    required = {name: schema.get("required", []) for name, schema in listed.items()}
    return run_driver(
        "smolagents", "smolagents_client.py", {**served, "calls": CALLS, "required": required}
    )


def test_smolagents_needs_a_nullable_hint_for_optional_arguments(
    smolagents: dict[str, Any],
) -> None:
    # As listed (any MCP server's optional parameter), smolagents' own check refuses a call
    # that leaves an optional parameter out, before toolhub sees it ...
    first = smolagents["responses"][0]
    assert "Argument offset is required" in first["error"], first
    # ... and accepts it once the optional inputs say ``nullable: true``.
    whole, tail, refused = (
        r.get("observation", r.get("error")) for r in smolagents["with_nullable"]
    )
    assert_once(whole)
    assert "(lines 299-300 of 300)" in tail
    assert "greater than or equal to 1" in refused


def test_smolagents_shows_the_model_each_description_and_bound(
    smolagents: dict[str, Any], listed: dict[str, Any]
) -> None:
    same_names = {k: k for k in BOUNDS}
    assert_kept(listed, smolagents["inputs"], lambda p: p.get("description", ""), bounds=same_names)
