"""The context budget on a long run: what compaction costs and what it saves.

A 300-iteration run, each iteration reading a 40 KB file with ``builtin/file-read``,
through the real run service, the real OpenAI adapter and SDK, against
``tests/kit/fake_window.py`` on loopback: an OpenAI-compatible server that refuses a
request over its window (48,000 tokens) with OpenAI's own 400 and counts every request
itself (a token per 4 bytes of the request's JSON).

It prints:

- the peak request size against the window (goal: never over it, no 400);
- the compactions, by strategy, and the model calls they cost (the summary requests);
- the input tokens the run sent in all (turns and summaries), against what a run that
  never compacts would have sent. That run cannot happen (the fake refuses it from the
  fifth iteration on), so its requests are measured for the first iterations against
  the same fake without a window, and the rest extrapolated: each iteration appends the
  same call and output, so its requests grow by a constant (checked on the measured ones).

    python scripts/bench/context_budget.py [--iterations N]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "server"))
# The fake is the tests' own (tests/kit).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from _smoke import sized, verdict

from cleveragents.runs import CompactionSettings, RunRequest, RunService, RunSettings
from cleveragents.tool import Compacted, RunEvent
from cleveragents.workspace import WorkspaceLimits, file_tools
from kit.fake_window import FILE, WindowedChat, write_big_file

WINDOW = 48_000
MEASURED = 12
"""Iterations of the never-compacting run measured against the fake without a window."""


class Compactions:
    def __init__(self) -> None:
        self.seen: list[Compacted] = []

    def on_event(self, event: RunEvent, text: str | None) -> None:
        if isinstance(event, Compacted):
            self.seen.append(event)


async def run(folder: Path, fake: WindowedChat, iterations: int, **request: Any) -> Any:
    root = folder / "ws"
    root.mkdir(parents=True, exist_ok=True)
    write_big_file(root)
    settings = RunSettings(state_dir=folder / "state", workspace_folders=(str(root),))
    service = RunService(settings, file_tools(WorkspaceLimits()))
    observer = Compactions()
    try:
        handle = await service.start(
            RunRequest(
                prompt=f"Read {FILE} again and again.",
                model=fake.spec(),
                max_iterations=iterations + 1,
                automation_profile="trusted",
                **request,
            ),
            observer,
        )
        result = await handle.result()
    finally:
        await service.aclose()
    return result, observer.seen


def never_compacting(folder: Path, iterations: int) -> tuple[int, int, int]:
    """What a run that never compacts would send in all: ``(total, first, growth)``."""
    with WindowedChat(None, MEASURED) as fake:
        asyncio.run(run(folder, fake, MEASURED, compaction=CompactionSettings(enabled=False)))
    sizes = fake.sizes[:MEASURED]
    steps = [b - a for a, b in itertools.pairwise(sizes)]
    growth = steps[-1]
    if max(steps[1:]) - min(steps[1:]) > growth // 100:
        raise SystemExit(f"the requests do not grow by a constant: {steps}")
    first = sizes[0]
    # Iteration i (from 1) sends first + (i - 1) * growth from the second on, and the
    # answer's iteration one more.
    turns = iterations + 1
    total = turns * first + growth * (turns - 1) * turns // 2
    return total, first, growth


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=sized(300, 20))
    args = parser.parse_args()
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        os.environ.pop(name, None)  # loopback only
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-context")
    with tempfile.TemporaryDirectory() as tmp:
        with WindowedChat(WINDOW, args.iterations) as fake:
            started = time.perf_counter()
            result, compactions = asyncio.run(run(Path(tmp) / "compacting", fake, args.iterations))
            seconds = time.perf_counter() - started
        never, first, growth = never_compacting(Path(tmp) / "never", args.iterations)
    if result.status != "completed":
        print(f"the run did not complete: {result.status} {result.error}")
        return 1
    peak = max(fake.sizes)
    sent = sum(fake.sizes) + sum(fake.summary_sizes)
    prunes = sum(1 for c in compactions if c.strategy == "prune")
    summaries = sum(1 for c in compactions if c.strategy == "summary")
    ok = peak <= WINDOW and not fake.refused
    print(
        f"{args.iterations}-iteration run reading a 40 KB file each time, "
        f"window {WINDOW:,} tokens; {result.iterations} iterations in {seconds:.1f} s"
    )
    print(
        f"peak request {peak:,} tokens = {peak / WINDOW:.0%} of the window "
        f"(goal <= 100%, no 400) {'OK' if ok else 'MISSED'}; refusals: {len(fake.refused)}"
    )
    print(
        f"compactions: {len(compactions)} ({prunes} prune, {summaries} summary); model calls "
        f"they cost: {len(fake.summary_sizes)} summary requests "
        f"({sum(fake.summary_sizes):,} input tokens), against {len(fake.sizes)} turn requests"
    )
    print(
        f"input tokens sent: {sent:,} with compaction; {never:,} never compacting (measured "
        f"{MEASURED} iterations: {first:,} then +{growth:,} each, extrapolated; the fake "
        f"would refuse it from {(WINDOW - first) // growth + 2} on): "
        f"{sent / never:.1%} of it"
    )
    return verdict(ok)


if __name__ == "__main__":
    raise SystemExit(main())
