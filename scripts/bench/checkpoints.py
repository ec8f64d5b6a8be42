"""The checkpoint store on a generated workspace of 20,000 files (about 40 MB).

Goals (docs/checkpoints.md): the first checkpoint at most 3 s; a later one with 10 files
changed at most 150 ms; a diff of those two checkpoints at most 150 ms; a restore of 100
files at most 500 ms. Each later figure is the median of a few rounds, as a run's
iterations: each edits 10 files of its own (so the 10 of the round before, changed within
2 s, are read again too); then each of a few rounds edits 100 files and restores them.
The first checkpoint waits until the generated files are 2 s old, as a
checked-out tree is: a file changed within 2 s of a checkpoint is read again at the next
one (the racy-clean rule), and the figure for that case is printed too, without a goal.

Measured (2 cores, load averages 0.7-1.4, medians of 9): first 0.8-1.3 s, later 97-125 ms,
diff 3 ms, restore 150-200 ms, all met; the later checkpoint was 160-210 ms at loads up to
3 (missed there). It is nearly all Python's CPU over one ``lstat`` per entry; splitting
the read over two threads did not help (measured in the same run, rounds interleaved: a
helper thread reading ahead, 238 ms against 116 ms without; the bare walk split in two,
63 ms against 62 ms), as the GIL serialises the Python between the calls.

    python scripts/bench/checkpoints.py [--files N] [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "server"))

from _smoke import sized, verdict

from cleveragents.checkpoints import CheckpointStore

T = TypeVar("T")
GOALS_MS = {"first": 3000.0, "later": 150.0, "diff": 150.0, "restore": 500.0}
PER_DIRECTORY = 100
RACY_S = 2.1


def generate(root: Path, files: int) -> int:
    """``files`` source-like text files of 1-3 KB, 100 a directory, two levels deep;
    the bytes written."""
    rng = random.Random(22)
    words = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz_", k=rng.randint(2, 9)))
             for _ in range(4000)]  # fmt: skip
    total = 0
    for index in range(files):
        folder = (root / _rel(index)).parent
        if index % PER_DIRECTORY == 0:
            folder.mkdir(parents=True, exist_ok=True)
        lines = [
            " ".join(rng.choices(words, k=rng.randint(3, 12))) for _ in range(rng.randint(20, 60))
        ]
        data = ("\n".join(lines) + "\n").encode()
        (root / _rel(index)).write_bytes(data)
        total += len(data)
    (root / ".gitignore").write_text("*.pyc\nbuild/\n")
    time.sleep(RACY_S)  # a checked-out tree is older than the racy window (see the docstring)
    return total


CPU: dict[str, list[float]] = {}


def timed(call: Callable[[], T], name: str = "") -> tuple[float, T]:
    """Wall-clock ms of ``call``, and its result; its CPU ms are kept under ``name`` (on a
    shared machine the wall clock also counts the time other processes held the cores)."""
    started, cpu = time.perf_counter(), time.process_time()
    result = call()
    CPU.setdefault(name, []).append((time.process_time() - cpu) * 1000.0)
    return (time.perf_counter() - started) * 1000.0, result


def _rel(index: int) -> str:
    folder = f"pkg{index // 1000:02d}/mod{index // PER_DIRECTORY % 10:02d}"
    return f"{folder}/file{index % PER_DIRECTORY:03d}.py"


def edit(root: Path, files: int, count: int, round_: int) -> list[str]:
    """Append a line to ``count`` files spread over the tree; their relative paths."""
    step = max(1, files // count)
    edited = []
    for index in range(round_, files, step)[:count]:
        rel = _rel(index)
        with open(root / rel, "a", encoding="utf-8") as handle:
            handle.write(f"edited in round {round_}\n")
        edited.append(rel)
    return edited


def report(name: str, what: str, ms: float) -> bool:
    goal = GOALS_MS[name]
    ok = ms <= goal
    cpu = statistics.median(CPU[name])
    verdict_ = "OK" if ok else "MISSED"
    print(f"{what}: {ms:.0f} ms (goal <= {goal:.0f} ms) {verdict_}; CPU {cpu:.0f} ms")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=sized(20_000, 300))
    parser.add_argument("--rounds", type=int, default=sized(5, 2))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ca-bench-") as scratch:
        root, state = Path(scratch) / "workspace", Path(scratch) / "state"
        root.mkdir()
        size = generate(root, args.files)
        print(f"workspace: {args.files} files, {size / 1e6:.1f} MB")
        with CheckpointStore.open(state, root) as store:
            first_ms, first = timed(lambda: store.take(label="first"), "first")
            later, diffs, restores, racy = [], [], [], []
            previous = first
            for round_ in range(args.rounds):  # as a run's iterations: 10 files each
                edited = edit(root, args.files, 10, round_)
                ms, checkpoint = timed(lambda: store.take(label="later"), "later")
                assert set(edited) <= set(checkpoint.changed_paths), checkpoint.changed_paths
                later.append(ms)
                ms, diff = timed(lambda p=previous.id, c=checkpoint.id: store.diff(p, c), "diff")
                assert len(diff.files) == 10, diff.files
                diffs.append(ms)
                previous = checkpoint
            for round_ in range(args.rounds):  # 100 files edited, then put back
                edited = edit(root, args.files, 100, args.rounds + round_)
                changed = store.take(label="a hundred edits")
                ms, restored = timed(
                    lambda c=previous.id, e=changed.id: store.restore(c, expected_id=e),
                    "restore",
                )
                assert sorted(f.path for f in restored.files) == sorted(edited), restored
                restores.append(ms)
                racy.append(timed(lambda: store.take(label="right after a restore"))[0])
            stored = store.stored_bytes()
    ok = report("first", f"first checkpoint of {args.files} files", first_ms)
    ok &= report("later", "later checkpoint, 10 files changed (median)", statistics.median(later))
    ok &= report("diff", "diff of those two checkpoints (median)", statistics.median(diffs))
    ok &= report("restore", "restore of 100 files (median)", statistics.median(restores))
    print(f"load average when done: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(
        f"checkpoint right after a restore, its 100 files re-read (racy-clean, no goal): "
        f"{statistics.median(racy):.0f} ms; store: {stored / 1e6:.1f} MB "
        f"for {size / 1e6:.1f} MB of files"
    )
    return verdict(ok)


if __name__ == "__main__":
    raise SystemExit(main())
