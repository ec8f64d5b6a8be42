"""``run/list`` over 10,000 transcripts (goal: at most 50 ms once the index is built).

Writes N finished transcripts into a scratch state dir, then times
``TranscriptStore.summaries()`` cold (first build), warm (from the index, the case every
later ``run/list`` is in), and cold again in a new store that reads the saved index.

    python scripts/bench/run_list.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "server"))

from _smoke import sized, verdict

from cleveragents.transcripts import META, TranscriptStore

GOAL_MS = 50.0


def populate(store: TranscriptStore, runs: int) -> None:
    for index in range(runs):
        run_id = f"run-{index:05d}"
        transcript = store.claim(run_id)
        started_at = f"2026-01-01T00:00:{index % 60:02d}.000+00:00"
        transcript.append(META, {"runId": run_id, "prompt": "hi " * 90, "startedAt": started_at})
        result = {"runId": run_id, "status": "completed", "content": "hi", "toolCallHistory": [],
                  "iterations": 1, "terminatedByLimit": False, "durationMs": 1.0}  # fmt: skip
        transcript.append("run/finished", {"runId": run_id, "seq": 2, "result": result})
        transcript.close()


def timed(store: TranscriptStore) -> tuple[float, int]:
    started = time.perf_counter()
    count = len(store.summaries())
    return (time.perf_counter() - started) * 1000.0, count


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=sized(10_000, 20))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        state = Path(scratch)
        store = TranscriptStore(state)
        populate(store, args.runs)
        cold, count = timed(store)
        assert count == args.runs, count
        warm = statistics.median(timed(store)[0] for _ in range(5))
        reloaded, _ = timed(TranscriptStore(state))
    ok = warm <= GOAL_MS
    print(json.dumps({"runs": args.runs, "cold_ms": round(cold, 1), "warm_ms": round(warm, 1),
                      "new_store_ms": round(reloaded, 1), "goal_ms": GOAL_MS}))  # fmt: skip
    print(
        f"run/list over {args.runs} transcripts: {warm:.1f} ms warm "
        f"(goal <= {GOAL_MS:.0f} ms) {'OK' if ok else 'MISSED'}; first build {cold:.0f} ms"
    )
    return verdict(ok)


if __name__ == "__main__":
    raise SystemExit(main())
