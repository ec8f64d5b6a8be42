"""Daemon start to ``initialize`` reply against a bare pygls server (goal: <= 1.15x).

Each sample spawns a process, writes ``initialize`` at once (it waits in the pipe) and
stops the clock when the reply has been read; the process is then killed and reaped.
Daemon: ``python -m cleveragents serve --state-dir TMP``. Bare: ``python -c`` running
``pygls.lsp.server.LanguageServer("bare", "1").start_io()``. Both get the same
``initialize`` params, from the same bare client (``_rpc.Peer``). Rounds are
interleaved (alternating which goes first); medians are reported.

Bytecode: both sides run with ``PYTHONPYCACHEPREFIX`` set to a temporary directory (and
``PYTHONDONTWRITEBYTECODE`` unset), warmed up once, so each imports cached bytecode as an
installed package would, and nothing is written beside the sources. With ``--as-is`` a third
series runs the daemon with the environment as it is, for information: with
``PYTHONDONTWRITEBYTECODE=1`` and an editable install, the project's own modules are
compiled from source at every start (``--as-is``).

Then it explains the gap: ``-X importtime`` of both servers up to the ``initialize``
reply (modules only the daemon imports, grouped by package and by import root) and the
in-process time of each start-up step, medians of a few fresh interpreters.

    python scripts/bench/daemon_startup.py [--rounds N] [--no-analysis]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import re
from collections import defaultdict
from pathlib import Path

import _rpc
from _smoke import sized

STEPS_DAEMON = r"""
import gc, json, sys, time
from pathlib import Path
if sys.argv[2:] == ["nogc"]:
    gc.disable()
marks = [("start", time.perf_counter())]
def mark(step):
    marks.append((step, time.perf_counter()))
import cleveragents.cli
mark("import cleveragents.cli (argparse)")
import pygls.lsp.server
mark("import pygls.lsp.server (lsprotocol.types: both servers)")
import cleveragents.tool
mark("import cleveragents.tool")
import cleveragents.protocol
mark("import cleveragents.protocol (attrs wire types)")
import cleveragents.daemon
mark("import cleveragents.daemon (the rest)")
import cleveragents.workspace
mark("import cleveragents.workspace")
cleveragents.workspace.builtin_tools()
mark("builtin_tools() (schema validators compiled)")
cleveragents.daemon.create_server(Path(sys.argv[1]))
mark("create_server() (builtin_tools() again + LanguageServer())")
steps = {step: t - marks[i][1] for i, (step, t) in enumerate(marks[1:])}
steps["full (gen-2) GC passes, count"] = gc.get_stats()[2]["collections"]
print(json.dumps(steps))
"""

STEPS_BARE = r"""
import gc, json, sys, time
if sys.argv[2:] == ["nogc"]:
    gc.disable()
t0 = time.perf_counter()
from pygls.lsp.server import LanguageServer
t1 = time.perf_counter()
LanguageServer("bare", "1")
t2 = time.perf_counter()
print(json.dumps({"import pygls.lsp.server": t1 - t0, "LanguageServer()": t2 - t1}))
"""

STEP_RUNS = sized(3, 1)
IMPORT_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)$")


def child_env(pycache: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    if pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


async def spawn_to_initialize(
    argv: list[str], tmp: Path, env: dict[str, str], stderr_name: str
) -> tuple[float, str]:
    """Seconds from spawn to the ``initialize`` reply, and the process's stderr."""
    workspace = tmp / "workspace"
    stderr_path = tmp / stderr_name
    stderr_path.write_bytes(b"")
    params = _rpc.initialize_params(workspace, [{"content": "hi"}])
    with stderr_path.open("ab") as stderr:
        started = _rpc.now()
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            cwd=workspace,
            env=env,
            limit=_rpc.LIMIT,
        )
    try:
        peer = _rpc.Peer(process, stderr_path)
        result = await peer.request("initialize", params)
        elapsed = _rpc.now() - started
        if not isinstance(result, dict) or "capabilities" not in result:
            raise RuntimeError(f"odd initialize reply: {result!r}")
        if process.stdin is not None:  # end cleanly so -X importtime output is complete
            process.stdin.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), 5)
    finally:
        await _rpc.kill(process)
    return elapsed, stderr_path.read_text(encoding="utf-8", errors="replace")


def parse_importtime(text: str) -> list[tuple[str, int, int, int]]:
    """(module, self us, cumulative us, depth) per line of ``-X importtime`` output."""
    rows = []
    for line in text.splitlines():
        match = IMPORT_LINE.match(line)
        if match:
            depth = (len(match.group(3)) - 1) // 2
            rows.append((match.group(4), int(match.group(1)), int(match.group(2)), depth))
    return rows


def top_package(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "cleveragents" and len(parts) > 1:
        return ".".join(parts[:2])
    return parts[0]


async def analyse(tmp: Path, env: dict[str, str], daemon: list[str], bare: list[str]) -> None:
    print("\n-- where the gap comes from (cached bytecode) --")
    _, daemon_err = await spawn_to_initialize(
        [daemon[0], "-X", "importtime", *daemon[1:]], tmp, env, "it-daemon.err"
    )
    _, bare_err = await spawn_to_initialize(
        [bare[0], "-X", "importtime", *bare[1:]], tmp, env, "it-bare.err"
    )
    daemon_rows = parse_importtime(daemon_err)
    bare_rows = parse_importtime(bare_err)
    bare_names = {row[0] for row in bare_rows}
    extra = {row[0] for row in daemon_rows} - bare_names
    total_daemon = sum(row[1] for row in daemon_rows) / 1000
    total_bare = sum(row[1] for row in bare_rows) / 1000
    extra_ms = sum(row[1] for row in daemon_rows if row[0] in extra) / 1000
    print(
        f"-X importtime, all imports up to the initialize reply: daemon {total_daemon:.1f} ms"
        f" ({len(daemon_rows)} modules), bare {total_bare:.1f} ms ({len(bare_rows)} modules);"
        f" {len(extra)} modules only the daemon imports: {extra_ms:.1f} ms"
        " (importtime inflates these figures)"
    )
    by_package: dict[str, int] = defaultdict(int)
    for name, self_us, _cum, _depth in daemon_rows:
        if name in extra:
            by_package[top_package(name)] += self_us
    print("daemon-only imports by package (self time, ms):")
    for package, us in sorted(by_package.items(), key=lambda kv: -kv[1])[:14]:
        print(f"    {us / 1000:7.1f}  {package}")
    print("daemon-only modules with the largest self time (ms):")
    ranked = sorted((row for row in daemon_rows if row[0] in extra), key=lambda row: -row[1])
    for name, self_us, _cum, _depth in ranked[:8]:
        print(f"    {self_us / 1000:7.1f}  {name}")
    bare_self = {row[0]: row[1] for row in bare_rows}
    print("largest shared modules (self time, ms, daemon / bare):")
    shared = sorted((row for row in daemon_rows if row[0] in bare_self), key=lambda row: -row[1])
    for name, self_us, _cum, _depth in shared[:4]:
        print(f"    {self_us / 1000:7.1f} / {bare_self[name] / 1000:7.1f}  {name}")

    steps: dict[str, dict[str, list[float]]] = {"gc": defaultdict(list), "nogc": defaultdict(list)}
    for _ in range(STEP_RUNS):
        for script, gc_mode in itertools.product((STEPS_DAEMON, STEPS_BARE), ("gc", "nogc")):
            process = await asyncio.create_subprocess_exec(
                _rpc.PYTHON, "-c", script, str(tmp / "state"), gc_mode,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
                cwd=tmp / "workspace", env=env,
            )  # fmt: skip
            try:
                out, _ = await asyncio.wait_for(process.communicate(), _rpc.TIMEOUT)
            finally:
                await _rpc.kill(process)
            for step, seconds in json.loads(out).items():
                steps[gc_mode][step].append(seconds)
        started = _rpc.now()
        process = await asyncio.create_subprocess_exec(_rpc.PYTHON, "-c", "pass", env=env)
        try:
            await asyncio.wait_for(process.wait(), _rpc.TIMEOUT)
        finally:
            await _rpc.kill(process)
        steps["gc"]["python -c pass (spawn to exit)"].append(_rpc.now() - started)
    print(
        f"in-process steps, in order (median of {STEP_RUNS} fresh interpreters, ms;"
        " second column: the same with the garbage collector disabled):"
    )
    for step, values in steps["gc"].items():
        off = steps["nogc"].get(step)
        scale = 1 if step.endswith(", count") else 1000
        off_text = f"{_rpc.median(off) * scale:7.1f}" if off else " " * 7
        print(f"    {_rpc.median(values) * scale:7.1f} {off_text}  {step}")


async def bench(rounds: int, analysis: bool, as_is_too: bool) -> float:
    with _rpc.scratch() as tmp:
        cached = child_env(tmp / "pycache")
        as_is = child_env(None)
        daemon = _rpc.daemon_argv(tmp / "state")
        bare = [_rpc.PYTHON, "-c", _rpc.BARE_PYGLS]
        series: dict[str, tuple[list[str], dict[str, str]]] = {
            "daemon": (daemon, cached),
            "bare pygls": (bare, cached),
        }
        if as_is_too:
            series["daemon, environment as is"] = (daemon, as_is)
        for argv, env in series.values():  # warm-up: fills the bytecode cache
            await spawn_to_initialize(argv, tmp, env, "warm.err")
        samples: dict[str, list[float]] = {name: [] for name in series}
        for round_no in range(rounds):
            names = list(series)
            if round_no % 2:
                names.reverse()
            for name in names:
                argv, env = series[name]
                seconds, _ = await spawn_to_initialize(argv, tmp, env, "run.err")
                samples[name].append(seconds)
        ms = {name: _rpc.median(values) * 1000 for name, values in samples.items()}
        ratio = ms["daemon"] / ms["bare pygls"]
        print(f"spawn to initialize reply, {rounds} rounds, medians")
        for name, values in samples.items():
            print(
                f"{name:<27} {ms[name]:7.1f} ms"
                f"  (min {min(values) * 1000:.1f}, max {max(values) * 1000:.1f})"
            )
        print(f"ratio daemon/bare {ratio:.2f}x (goal <= 1.15x)")
        if as_is_too:
            print(
                f"as is / bare {ms['daemon, environment as is'] / ms['bare pygls']:.2f}x"
                f" (PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r})"
            )
        if analysis:
            await analyse(tmp, cached, daemon, bare)
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=sized(15, 1))
    parser.add_argument("--no-analysis", action="store_true")
    parser.add_argument(
        "--as-is", action="store_true", help="also time the daemon with the environment as is"
    )
    args = parser.parse_args()
    asyncio.run(bench(args.rounds, not args.no_analysis, args.as_is))


if __name__ == "__main__":
    main()
