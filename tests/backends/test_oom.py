"""oom_score_adj on the real kernel: a command runs at the highest value (the OOM killer takes
it first, also when its toolhub process is protected), a toolhub process protects itself where
it may (``CAP_SYS_RESOURCE``), and where it may not it keeps its value and says so once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from toolhub.backends.oom import COMMAND_OOM_SCORE_ADJ, PROTECTED_OOM_SCORE_ADJ
from toolhub.backends.process import ProcessRunner

REPO = Path(__file__).resolve().parents[2]
_CAP_SYS_RESOURCE = 24
PROBE = """
import logging
from pathlib import Path
from toolhub.backends.oom import protect
from toolhub.backends.process import ProcessRunner
logging.basicConfig(level=logging.WARNING)
first, again = protect("the probe"), protect("the probe")
print(first, again, Path("/proc/self/oom_score_adj").read_text().strip())
runner = ProcessRunner(Path("."), Path("logs"))
print(runner.run("cat /proc/self/oom_score_adj", log_name="adj").output.head_and_tail(99)[0])
"""


def _may_lower() -> bool:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> _CAP_SYS_RESOURCE & 1)
    return False


def test_a_command_runs_first_in_the_oom_killers_line(tmp_path: Path) -> None:
    runner = ProcessRunner(tmp_path, tmp_path / "logs")
    result = runner.run("cat /proc/self/oom_score_adj", log_name="adj")
    assert result.output.head_and_tail(100)[0] == f"{COMMAND_OOM_SCORE_ADJ}\n"


def test_a_toolhub_process_protects_itself_where_it_may_and_says_so_where_not(
    tmp_path: Path,
) -> None:
    probe = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    found = probe.stdout.split()
    if _may_lower():
        assert found[:3] == ["True", "True", str(PROTECTED_OOM_SCORE_ADJ)]
        assert "needs CAP_SYS_RESOURCE" not in probe.stderr
    else:
        own = Path("/proc/self/oom_score_adj").read_text().strip()
        assert found[:3] == ["False", "False", own]
        assert probe.stderr.count("needs CAP_SYS_RESOURCE") == 1  # once, not per call
    assert found[3] == str(COMMAND_OOM_SCORE_ADJ)  # its commands go first either way
