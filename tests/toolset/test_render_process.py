"""Client templates in render processes: time and memory hold whatever the template does, a
killed process is replaced, and what renders there is what renders in-process."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from jinja2 import ChainableUndefined
from jinja2.sandbox import ImmutableSandboxedEnvironment

from toolhub.core import ConfigError, TemplateRenderError
from toolhub.core.template_limits import tool_names
from toolhub.tools import CATALOG
from toolhub.toolset import ToolSetBuilder
from toolhub.toolset.render_process import RENDER_BUDGET_S, RenderPool

pytestmark = pytest.mark.timeout(60)

BUDGET_S = 0.5
NESTED_LOOPS = "${% for i in range(10000) %}${% for j in range(10000) %}${% endfor %}${% endfor %}"
CONTEXT = {"tools": {"by_kind": {"read": "view_file", "execute": "run"}}, "params": {}}


@pytest.fixture
def pool() -> Iterator[RenderPool]:
    p = RenderPool(budget_s=BUDGET_S)
    yield p
    p.close()


def _pids(pool: RenderPool) -> set[int]:
    return {child.proc.pid for child in pool._idle}


def test_renders_like_in_process_and_reuses_its_process(pool: RenderPool) -> None:
    text = "${% for k, v in tools.by_kind|dictsort %}${{ k }}=${{ v }} ${% endfor %}${{ 2**10 }}"
    assert pool.render(text, CONTEXT) == "execute=run read=view_file 1024"
    first = _pids(pool)
    assert pool.render("again ${{ tools.by_kind.read }}", CONTEXT) == "again view_file"
    assert _pids(pool) == first and len(first) == 1
    assert pool.render("plain text", CONTEXT) == "plain text"


def test_sandbox_refusals_come_back_and_keep_the_process(pool: RenderPool) -> None:
    pool.render("${{ 1 }}", {})
    before = _pids(pool)
    with pytest.raises(TemplateRenderError, match="`\\*\\*` would make an integer"):
        pool.render("${{ 9**(9**9) }}", {})
    assert _pids(pool) == before


def test_loops_without_output_are_stopped_at_the_budget(pool: RenderPool) -> None:
    pool.render("${{ 1 }}", {})
    (old,) = _pids(pool)
    start = time.monotonic()
    with pytest.raises(TemplateRenderError, match=f"it took longer than {BUDGET_S:g} s"):
        pool.render(NESTED_LOOPS, {})
    assert BUDGET_S <= time.monotonic() - start < BUDGET_S + 10  # not the loops' minutes
    assert not Path(f"/proc/{old}").exists()  # killed and reaped
    assert pool.render("fresh ${{ 1 + 1 }}", {}) == "fresh 2"
    assert old not in _pids(pool)


def test_a_process_that_cannot_answer_at_all_is_killed(pool: RenderPool) -> None:
    """A stopped process answers nothing, not even a signal handler: what one C operation
    holding the GIL looks like from outside. The budget holds all the same."""
    pool.render("${{ 1 }}", {})
    (pid,) = _pids(pool)
    os.kill(pid, signal.SIGSTOP)
    start = time.monotonic()
    with pytest.raises(TemplateRenderError, match="it took longer than"):
        pool.render("${{ 2 }}", {})
    assert time.monotonic() - start < BUDGET_S + 10  # not for ever
    assert pool.render("${{ 3 }}", {}) == "3"


def test_memory_bombs_fail_inside_the_render_process(pool: RenderPool) -> None:
    for bomb in (
        "${{ 'x'|center(2**30) }}",
        "${{ ('x' * 60000).split('x')|join('y' * 60000) }}",
    ):
        with pytest.raises(TemplateRenderError, match="the template ran out of memory"):
            pool.render(bomb, {})
    assert pool.render("${{ 'still' }} here", {}) == "still here"


def test_a_dead_idle_process_is_replaced(pool: RenderPool) -> None:
    pool.render("${{ 1 }}", {})
    (pid,) = _pids(pool)
    os.kill(pid, signal.SIGKILL)
    assert pool.render("${{ 4 }}", {}) == "4"
    assert pid not in _pids(pool)


def test_a_process_that_dies_while_rendering_is_reported() -> None:
    pool = RenderPool(budget_s=10)
    failure: list[str] = []

    def render() -> None:
        with pytest.raises(TemplateRenderError) as err:
            pool.render(NESTED_LOOPS, {})
        failure.append(err.value.detail)

    thread = threading.Thread(target=render)
    thread.start()
    deadline = time.monotonic() + 60  # a busy machine gives the child a sliver of a core
    while time.monotonic() < deadline:  # started (about 0.1 s of CPU) and well into the loops
        busy = [p for p in _render_children() if _cpu_s(p) > 0.3]
        if busy:
            break
        time.sleep(0.01)
    for child in busy:
        child.kill()
    thread.join()
    assert failure == [
        "template could not be rendered: the render process stopped (signal SIGKILL)"
    ]
    assert pool.render("${{ 5 }}", {}) == "5"
    pool.close()


def _cpu_s(proc: psutil.Process) -> float:
    """CPU seconds ``proc`` used; 0 once it is gone."""
    try:
        return float(sum(proc.cpu_times()[:2]))
    except psutil.NoSuchProcess:
        return 0.0


def _render_children() -> list[psutil.Process]:
    """The render children of this process (one that ends while being looked at is not)."""
    found = []
    for child in psutil.Process().children():
        try:
            if any(part.endswith("render_child.py") for part in child.cmdline()):
                found.append(child)
        except psutil.NoSuchProcess:
            pass
    return found


def _flood(pool: RenderPool, payloads: int) -> tuple[float, list[str]]:
    """``payloads`` slow templates at once; how long until all were answered, and the answers."""
    errors: list[str] = []

    def slow() -> None:
        with pytest.raises(TemplateRenderError) as err:
            pool.render(NESTED_LOOPS, {})
        errors.append(err.value.detail)

    threads = [threading.Thread(target=slow) for _ in range(payloads)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.monotonic() - start, errors


def test_slow_templates_do_not_queue_each_other() -> None:
    # A budget long enough that a busy machine's overhead stays under it: side by side the
    # flood takes one budget and that overhead, one after another it would take two or more.
    budget_s = 3.0
    pool = RenderPool(processes=2, budget_s=budget_s)
    pool.render("${{ 1 }}", {})  # started
    try:
        elapsed, errors = _flood(pool, pool.processes)
    finally:
        pool.close()
    assert elapsed < pool.processes * budget_s  # side by side, not one after another
    assert len(errors) == pool.processes


def test_a_flood_of_slow_templates_drains_and_the_pool_recovers() -> None:
    """The review's eight nested-loop payloads, which used to hold every worker thread."""
    pool = RenderPool(budget_s=0.25)
    elapsed, errors = _flood(pool, 8)
    assert len(errors) == 8 and all("took longer than 0.25 s" in e for e in errors)
    # Each render is killed at its budget (unbounded, these payloads run for minutes); the
    # bound leaves a busy machine room for the restarts.
    assert elapsed < 8 / pool.processes * (0.25 + 0.5) * 5
    assert pool.render("${{ 'after' }}", {}) == "after"
    pool.close()


def test_render_processes_get_no_environment(
    pool: RenderPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLHUB_API_TOKEN", "hub-SECRET")
    pool.render("${{ 1 }}", {})
    (pid,) = _pids(pool)
    assert Path(f"/proc/{pid}/environ").read_bytes() == b""


def test_a_forked_process_gets_its_own_render_processes(pool: RenderPool) -> None:
    assert pool.render("${{ 'parent' }}", {}) == "parent"
    parent = _pids(pool)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the forked child reports through its exit status
        try:
            ok = pool.render("${{ 'child' }}", {}) == "child" and not (_pids(pool) & parent)
            os._exit(0 if ok else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert pool.render("${{ 'parent' }} again", {}) == "parent again"
    assert _pids(pool) == parent


def test_unserialisable_variables_are_a_render_error(pool: RenderPool) -> None:
    with pytest.raises(TemplateRenderError, match="its variables are not JSON"):
        pool.render("${{ x }}", {"x": object()})


# -- through the builder ----------------------------------------------------------------------


def test_hostile_overrides_are_template_render_violations_each(builder: ToolSetBuilder) -> None:
    config = {
        "tools": [
            {"id": "Main:echo", "description": "${{ 9**(9**9) }}"},
            {"id": "Main:noop", "description": "${{ 'a' * 10**8 }}"},
        ]
    }
    with pytest.raises(ConfigError) as err:
        builder.build(config)
    violations = err.value.violations
    assert [(v.tool, v.category, v.field_path) for v in violations] == [
        ("Main:echo", "template_render", "description"),
        ("Main:noop", "template_render", "description"),
    ]
    assert "`**` would make an integer" in violations[0].message
    assert "`*` would make 100,000,000 items" in violations[1].message


def test_an_override_past_the_budget_is_a_violation(builder: ToolSetBuilder) -> None:
    start = time.monotonic()
    with pytest.raises(ConfigError) as err:
        builder.build({"tools": [{"id": "Main:echo", "description": NESTED_LOOPS}]})
    assert time.monotonic() - start < RENDER_BUDGET_S + 1.0
    assert err.value.violations[0].category == "template_render"
    assert f"took longer than {RENDER_BUDGET_S:g} s" in err.value.violations[0].message


def test_the_builtin_catalog_renders_as_before() -> None:
    """Every built-in description renders as the plain sandbox (no limits) rendered it, and an
    override with the same text — rendered in a render process — gives the same definitions."""
    builder = ToolSetBuilder(CATALOG, plugins=False)
    toolset = builder.build(None)
    plain = ImmutableSandboxedEnvironment(
        variable_start_string="${{",
        variable_end_string="}}",
        block_start_string="${%",
        block_end_string="%}",
        comment_start_string="${#",
        comment_end_string="#}",
        undefined=ChainableUndefined,
        keep_trailing_newline=True,
    )
    plain.filters["names"] = tool_names  # the one filter toolhub adds
    for entry in toolset.entries.values():
        assert entry.tool is not None
        context = toolset.renderer.context(entry.tool.template_extra(entry.params))
        expected = plain.from_string(entry.tool.description_template).render(context)
        assert entry.definition.description == expected, entry.fq_id
    overridden = builder.build(
        {
            "tools": [
                {"id": e.fq_id, "name": e.client_name, "description": e.tool.description_template}
                for e in toolset.entries.values()
                if e.tool is not None
            ]
        }
    )
    assert overridden.definitions() == toolset.definitions()
