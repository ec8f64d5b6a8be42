"""Anthropic prompt caching in a tool loop: the share of input tokens read from the cache.

A 20-iteration tool loop (19 iterations each call a file-reading tool, the 20th
answers) with thinking on, run by the real ``ToolCallingRuntime`` through the real
``AnthropicCaller`` and ``anthropic`` SDK against ``tests/kit/fake_anthropic.py`` on
loopback. The fake caches prefixes as the messages API documents (tools, then system,
then messages; a breakpoint caches up to its block from the model's minimum of 1,024
tokens; a later request reads the longest cached prefix at most 20 blocks before one of
its breakpoints) and reports ``cache_read_input_tokens``, ``cache_creation_input_tokens``
and ``input_tokens`` as the API does, counting a token per 4 characters.

The figure is the share of the input tokens of iterations 2 to 20 that the adapter
reported as cache reads (goal: at least 80%), with the spec's default breakpoints; the
same loop with ``cache: false`` reads nothing (0%, as every loop did before caching).
The first iteration only writes: nothing was cached before it.

    python scripts/bench/anthropic_cache.py [--iterations N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "server"))
# The fake and the loopback server are the tests' own (tests/kit).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from _smoke import sized, verdict

from cleveragents.llm.builtin.anthropic import AnthropicCaller
from cleveragents.llm.spec import ModelSpec, ReasoningSettings
from cleveragents.tool import (
    EventSink,
    IterationFinished,
    RunEvent,
    ToolCallingRuntime,
    ToolRegistry,
    ToolRunner,
    ToolSpec,
    Usage,
)
from kit.fake_anthropic import FakeAnthropic, Turn
from kit.loopback import LoopbackServer

GOAL = 0.80
MODEL = "claude-sonnet-4-5"
SYSTEM = (
    "You are a coding agent working in a repository. Read before you edit, keep each "
    "change small, run the tests after each change, and say what you changed and why. "
) * 60
"""About 2,500 tokens by the fake's count, the size of a real agent's instructions."""
FILE = "def handler(event, context):\n    return {'status': 200, 'body': event}\n" * 20
"""What each tool call returns: about 360 tokens, a small source file."""
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"path": {"type": "string", "description": "A path in the workspace."}},
    "required": ["path"],
}


def turns(iterations: int) -> tuple[list[Turn], Turn]:
    calls = [
        Turn(
            thinking=(f"File {i} may hold the handler; read it and compare with the last.",),
            text=f"Reading src/module_{i}.py.",
            calls=(("fs__read", {"path": f"src/module_{i}.py"}),),
        )
        for i in range(1, iterations)
    ]
    return calls, Turn(thinking=("Every module read.",), text="The handler is in module 3.")


class Usages(EventSink):
    """The usage the adapter reported for each iteration, in order."""

    def __init__(self) -> None:
        self.usage: list[Usage] = []

    def on_event(self, event: RunEvent, /) -> None:
        if isinstance(event, IterationFinished) and event.usage is not None:
            self.usage.append(event.usage)


async def loop(iterations: int, *, cache: bool) -> list[Usage]:
    """One tool loop against a fresh fake; the usage of each iteration."""
    scripted, answer = turns(iterations)
    fake = FakeAnthropic(scripted, final=answer)
    registry = ToolRegistry()
    registry.register(ToolSpec("fs/read", "Read a file.", SCHEMA, lambda inputs: FILE))
    registry.register(ToolSpec("fs/list", "List a folder.", SCHEMA, lambda inputs: []))
    with LoopbackServer(respond=fake, keep_alive=True) as server:
        spec = ModelSpec(
            "anthropic", model=MODEL, base_url=server.base_url, cache=cache,
            reasoning=ReasoningSettings(budget_tokens=2048),
        )  # fmt: skip
        caller = AnthropicCaller(spec)
        runtime = ToolCallingRuntime(
            registry, ToolRunner(registry), caller, max_iterations=iterations + 1,
            system_prompt=SYSTEM,
        )  # fmt: skip
        sink = Usages()
        try:
            result = await runtime.arun_tool_loop("Find the request handler.", sink=sink)
        finally:
            await caller.aclose()
    if fake.refusals or result.iterations != iterations:
        raise SystemExit(f"the loop did not run: {fake.refusals or result.iterations}")
    return sink.usage


def share_read(usage: list[Usage]) -> tuple[float, int, int]:
    """Cache reads over all input, from the second iteration on."""
    later = usage[1:]
    read = sum(u.cache_read_tokens or 0 for u in later)
    total = sum(u.input_tokens for u in later)
    return (read / total if total else 0.0), read, total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=sized(20, 4))
    args = parser.parse_args()
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        os.environ.pop(name, None)  # loopback only
    cached = asyncio.run(loop(args.iterations, cache=True))
    uncached = asyncio.run(loop(args.iterations, cache=False))
    share, _, total = share_read(cached)
    none, _, plain_total = share_read(uncached)
    print("iteration  input  cache read  cache write   (tokens, as the adapter reported them)")
    for i, u in enumerate(cached, 1):
        print(f"{i:9d} {u.input_tokens:6d} {u.cache_read_tokens or 0:11d} "
              f"{u.cache_write_tokens or 0:12d}")  # fmt: skip
    ok = share >= GOAL and none == 0.0
    print(
        f"{args.iterations}-iteration tool loop, iterations 2-{args.iterations}: "
        f"{share:.1%} of {total:,} input tokens read from the cache (goal >= {GOAL:.0%}) "
        f"{'OK' if share >= GOAL else 'MISSED'}; with cache: false {none:.0%} of "
        f"{plain_total:,} (goal 0%) {'OK' if none == 0.0 else 'MISSED'}"
    )
    return verdict(ok)


if __name__ == "__main__":
    raise SystemExit(main())
