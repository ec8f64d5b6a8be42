"""Every benchmark that ``scripts/bench/run_all`` runs also runs here, at its smoke size
(``CLEVERAGENTS_BENCH_SMOKE=1``: a few rounds of a tiny workload), so none rots between
full runs. Only that it finishes and prints its figures is checked, never its timing:
the figures of a tiny run on a busy machine mean nothing."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from kit.paths import ROOT

BENCH = ROOT / "scripts" / "bench"


def run_all_benchmarks() -> list[str]:
    """The names ``run_all`` loops over (its ``for bench in ...; do`` line)."""
    found = re.search(r"^for bench in (.+?); do$", (BENCH / "run_all").read_text(), re.M)
    assert found is not None, "scripts/bench/run_all no longer has its `for bench in` loop"
    return found.group(1).split()


def test_run_all_names_every_benchmark_script() -> None:
    scripts = {path.stem for path in BENCH.glob("*.py") if not path.stem.startswith("_")}
    assert set(run_all_benchmarks()) == scripts


# One worker runs them one after another: each is busy enough to slow the tests beside it.
@pytest.mark.xdist_group("bench")
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", run_all_benchmarks())
def test_the_benchmark_runs_end_to_end_at_its_smoke_size(name: str) -> None:
    env = {**os.environ, "CLEVERAGENTS_BENCH_SMOKE": "1"}
    done = subprocess.run(
        [sys.executable, str(BENCH / f"{name}.py")], capture_output=True, text=True,
        env=env, cwd=ROOT, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "goal" in done.stdout, f"{name} printed no figures:\n{done.stdout[-3000:]}"
    assert re.search(r"\d", done.stdout)
