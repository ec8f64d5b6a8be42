"""``cleveragents run`` from the shell: a one-iteration scripted run, end to end and to its
first output line, against ``python -c pass`` (goals: at most 0.5 s end to end, the first
line within 0.25 s).

Each sample spawns ``cleveragents run -m scripted:FILE "hi"`` in a scratch workspace with
a scratch state dir (stdout a pipe, stdin /dev/null: the answer alone on stdout, the run's
lines on stderr, its header first), starts the clock at the spawn, stops one clock at the
first line on stderr and another at the exit. The floor, ``python -c
pass`` (spawn to exit), is measured in the same rounds, interleaved (alternating which
goes first); medians are reported, with each against the floor, and the CPU time each
took (its reaped children's included, a spawned daemon's too), which a busy machine
inflates less than the wall clock.

Bytecode: both run with ``PYTHONPYCACHEPREFIX`` set to a temporary directory (and
``PYTHONDONTWRITEBYTECODE`` unset), warmed up once, so the project's modules load from
cached bytecode as an installed package's would.

    python scripts/bench/cli_startup.py [--rounds N] [--command "python -m cleveragents"]
                                        [--against OTHER_CHECKOUT/server]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _smoke import sized, verdict

GOAL_END_S = 0.5
GOAL_FIRST_S = 0.25
TIMEOUT_S = 60.0


def default_command() -> list[str]:
    """The console script beside this interpreter (what a person types), else ``-m``."""
    script = Path(sys.executable).with_name("cleveragents")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "cleveragents"]


def child_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("CLEVERAGENTS_") and k != "PYTHONDONTWRITEBYTECODE"}  # fmt: skip
    env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    env["XDG_CONFIG_HOME"] = str(tmp / "config")  # no config.toml of the person running it
    return env


def cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float | None, float]:
    """Seconds from spawn to exit, to the first line on stderr (None: it printed none),
    and of CPU (the command's and its reaped children's, a spawned daemon's included:
    less sensitive than the wall clock to a busy machine). A non-zero exit is an error,
    with what the command said."""
    cpu = cpu_of_children()
    started = time.perf_counter()
    process = subprocess.Popen(
        argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        first = process.stderr.readline()  # off a terminal, the run's header is there
        first_s = time.perf_counter() - started if first else None
        _, rest = process.communicate(timeout=TIMEOUT_S)
        err = first + rest
        end_s = time.perf_counter() - started
    finally:
        process.kill()
        process.wait()
    if process.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)} exited {process.returncode}: {err.decode()}")
    return end_s, first_s, cpu_of_children() - cpu


def bench(rounds: int, command: list[str], against: Path | None) -> bool:
    with tempfile.TemporaryDirectory(prefix="cli-startup-") as scratch:
        tmp = Path(scratch)
        workspace = tmp / "workspace"
        workspace.mkdir()
        turns = tmp / "turns.json"
        turns.write_text(json.dumps([{"content": "hi"}]))
        env = child_env(tmp)
        run = [*command, "run", "-m", f"scripted:{turns}", "hi", "--state-dir", str(tmp / "state")]
        series: dict[str, tuple[list[str], dict[str, str]]] = {
            "cleveragents run": (run, env),
            "python -c pass": ([sys.executable, "-c", "pass"], env),
        }
        if against is not None:
            series[f"run from {against}"] = (run, {**env, "PYTHONPATH": str(against)})
        for argv, argv_env in series.values():  # warm-up: fills the bytecode cache
            timed(argv, workspace, argv_env)
        ends: dict[str, list[float]] = {name: [] for name in series}
        firsts: dict[str, list[float]] = {name: [] for name in series}
        cpus: dict[str, list[float]] = {name: [] for name in series}
        for round_no in range(rounds):
            names = list(series)
            if round_no % 2:
                names.reverse()
            for name in names:
                argv, argv_env = series[name]
                end_s, first_s, cpu_s = timed(argv, workspace, argv_env)
                ends[name].append(end_s)
                cpus[name].append(cpu_s)
                if first_s is not None:
                    firsts[name].append(first_s)
    base = statistics.median(ends["python -c pass"]) * 1000
    base_cpu = statistics.median(cpus["python -c pass"]) * 1000
    print(f"{shlex.join(command)} run -m scripted:FILE hi, {rounds} rounds, medians (ms)")
    print(f"{'':<28} {'end to end':<22}  {'first line':<22}  cpu")
    medians: dict[str, tuple[float, float]] = {}
    for name in series:
        end = statistics.median(ends[name]) * 1000
        cpu = statistics.median(cpus[name]) * 1000
        if name == "python -c pass":
            print(f"{name:<28} {end:7.1f} (the floor){'':<33}{cpu:7.1f}")
            continue
        if not firsts[name]:
            raise RuntimeError(f"{name} printed nothing on stderr")
        first = statistics.median(firsts[name]) * 1000
        medians[name] = (end, first)
        print(f"{name:<28} {end:7.1f} {end / base:5.1f}x floor  "
              f"{first:7.1f} {first / base:5.1f}x floor  "
              f"{cpu:7.1f} {cpu / base_cpu:5.1f}x floor")  # fmt: skip
    end, first = medians["cleveragents run"]
    for name, (other_end, other_first) in medians.items():
        if name != "cleveragents run":
            print(f"{name} / cleveragents run: end to end {other_end / end:.1f}x, "
                  f"first line {other_first / first:.1f}x")  # fmt: skip
    end_ok, first_ok = end <= GOAL_END_S * 1000, first <= GOAL_FIRST_S * 1000
    print(f"end to end {end:.0f} ms (goal <= {GOAL_END_S * 1000:.0f} ms): "
          f"{'met' if end_ok else 'MISSED'}")  # fmt: skip
    print(f"first line {first:.0f} ms (goal <= {GOAL_FIRST_S * 1000:.0f} ms): "
          f"{'met' if first_ok else 'MISSED'}")  # fmt: skip
    return end_ok and first_ok


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=sized(15, 2))
    parser.add_argument("--command", help="the command to time (default: cleveragents)")
    parser.add_argument(
        "--against", type=Path, metavar="SERVER_DIR",
        help="also time the same run from another checkout's server/ (PYTHONPATH), "
        "interleaved: before and after a change, measured in one run",
    )  # fmt: skip
    args = parser.parse_args()
    command = shlex.split(args.command) if args.command else default_command()
    return verdict(bench(args.rounds, command, args.against))


if __name__ == "__main__":
    sys.exit(main())
