"""The benchmarks' smoke size. With ``CLEVERAGENTS_BENCH_SMOKE=1`` each benchmark runs end to
end at a tiny size, in a few seconds, so that tests/test_bench_smoke.py can run them all
and none rots. Its figures then mean nothing, and a missed goal does not fail it; without
the variable nothing changes."""

from __future__ import annotations

import os

SMOKE = os.environ.get("CLEVERAGENTS_BENCH_SMOKE") == "1"


def sized(full: int, smoke: int) -> int:
    """``full`` normally; ``smoke`` in a smoke run."""
    return smoke if SMOKE else full


def verdict(ok: bool) -> int:
    """The exit code: a missed goal fails a full run, never a smoke run."""
    return 0 if ok or SMOKE else 1
