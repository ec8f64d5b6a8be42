"""Loop overhead: ToolCallingRuntime against a minimal hand-written loop of the same kind.

Both sides do the same work per iteration: ask the same scripted model, validate each
call's arguments with the same compiled validator (fastjsonschema, through
``ToolSpec.validate_input``), thread the reserved inputs, run the no-op tool calls
(the async floor awaits a lone call and ``gather``s several), record each call as a
``ToolCallRecord``, and feed the results back as messages. The floor leaves out only
what is the runtime's own machinery: registry, stages, policy, events and
cancellation. The sync runtime uses a sync no-op tool with ``blocking=False``; the
async runtime an async no-op tool.

Runs interleaved in one process, several rounds, and reports the median microseconds per
tool call of each side and their ratio (goal: 1.25x or less). It also reports
``run_tool_loop`` with an async no-op tool against the same loop with the inline sync
one (goal: 2x or less: one event loop per run, not per call), and the cost per
iteration over iterations 1-100 against 901-1000 of a 1,000-iteration run (goal: flat,
a ratio near 1.0).

    python scripts/bench/loop_overhead.py [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from cleveragents.llm.scripted import ScriptedModel
from cleveragents.tool import (
    CancelToken,
    EventSink,
    IterationFinished,
    IterationStarted,
    LLMRequest,
    Message,
    RunEvent,
    ToolActorContext,
    ToolCall,
    ToolCallingRuntime,
    ToolCallRecord,
    ToolRegistry,
    ToolRunner,
    ToolSpec,
)

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"i": {"type": "integer"}}}


def script(iterations: int, calls_per_iteration: int) -> list[dict[str, Any]]:
    turn = {
        "toolCalls": [{"name": "noop", "arguments": {"i": i}} for i in range(calls_per_iteration)]
    }
    return [turn] * iterations + [{"content": "done"}]


def noop(inputs: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True}


async def anoop(inputs: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True}


def runtime_for(turns: list[dict[str, Any]], *, is_async: bool) -> ToolCallingRuntime:
    registry = ToolRegistry()
    if is_async:
        registry.register(ToolSpec("noop", "No-op", SCHEMA, anoop))
    else:
        registry.register(ToolSpec("noop", "No-op", SCHEMA, noop, blocking=False))
    return ToolCallingRuntime(
        registry, ToolRunner(registry), ScriptedModel(turns), max_iterations=len(turns) + 1
    )


# -- the floors: minimal loops doing the same work --------------------------------------
#
# Same model object, same compiled input validator, the reserved inputs threaded in,
# a ToolCallRecord per call and a tool message fed back: what the runtime must do, with
# nothing else (no registry, stages, policy, events or cancellation).

RESERVED = {"sandbox_root": None, "resource_bindings": {}}


def _ignore(text: str) -> None:
    pass


def floor_sync(model: ScriptedModel, spec: ToolSpec) -> list[ToolCallRecord]:
    context = ToolActorContext()
    cancel = CancelToken()
    messages: list[Message] = [Message("user", "go")]
    records: list[ToolCallRecord] = []
    iteration = 0
    while True:
        iteration += 1
        response = model(LLMRequest(messages, (), iteration, context, cancel, _ignore))
        messages.append(Message("assistant", response.content, response.tool_calls))
        if not response.tool_calls:
            return records
        for call in response.tool_calls:
            started = time.perf_counter()
            spec.validate_input(call.arguments)
            output = noop({**call.arguments, **RESERVED})
            record = ToolCallRecord(
                call.name, call.arguments, output, (time.perf_counter() - started) * 1000,
                True, None, iteration, call.id,
            )  # fmt: skip
            records.append(record)
            messages.append(Message("tool", json.dumps(output), [], call.id, call.name))


async def floor_async(model: ScriptedModel, spec: ToolSpec) -> list[ToolCallRecord]:
    context = ToolActorContext()
    cancel = CancelToken()
    messages: list[Message] = [Message("user", "go")]
    records: list[ToolCallRecord] = []
    iteration = 0

    async def one(call: ToolCall, iteration: int) -> ToolCallRecord:
        started = time.perf_counter()
        spec.validate_input(call.arguments)
        output = await anoop({**call.arguments, **RESERVED})
        return ToolCallRecord(
            call.name, call.arguments, output, (time.perf_counter() - started) * 1000,
            True, None, iteration, call.id,
        )  # fmt: skip

    while True:
        iteration += 1
        response = model(LLMRequest(messages, (), iteration, context, cancel, _ignore))
        calls = response.tool_calls
        messages.append(Message("assistant", response.content, calls))
        if not calls:
            return records
        if len(calls) == 1:
            done = [await one(calls[0], iteration)]
        else:
            done = await asyncio.gather(*(one(call, iteration) for call in calls))
        for call, record in zip(calls, done, strict=True):
            records.append(record)
            messages.append(Message("tool", json.dumps(record.output), [], call.id, call.name))


# -- measurement ------------------------------------------------------------------------


def timed(fn: Callable[[], object]) -> float:
    """One sample, with the collector paused as ``timeit`` does, so GC pauses that land
    on whichever side happens to cross a threshold do not decide the ratio."""
    gc.collect()
    gc.disable()
    try:
        started = time.perf_counter()
        fn()
        return time.perf_counter() - started
    finally:
        gc.enable()


def compare(
    name: str, iterations: int, per_iteration: int, rounds: int
) -> tuple[float, float, float]:
    turns = script(iterations, per_iteration)
    calls = iterations * per_iteration
    sync_rt = runtime_for(turns, is_async=False)
    async_rt = runtime_for(turns, is_async=True)
    model = ScriptedModel(turns)
    spec = ToolSpec("noop", "No-op", SCHEMA, noop)
    samples: dict[str, list[float]] = {k: [] for k in ("rt", "floor", "art", "afloor", "srt")}
    loop = asyncio.new_event_loop()
    try:
        for _ in range(rounds):
            samples["rt"].append(timed(lambda: sync_rt.run_tool_loop("go", ToolActorContext())))
            samples["floor"].append(timed(lambda: floor_sync(model, spec)))
            samples["art"].append(
                timed(lambda: loop.run_until_complete(async_rt.arun_tool_loop("go")))
            )
            samples["afloor"].append(
                timed(lambda: loop.run_until_complete(floor_async(model, spec)))
            )
            samples["srt"].append(timed(lambda: async_rt.run_tool_loop("go", ToolActorContext())))
    finally:
        loop.close()
    us = {k: statistics.median(v) / calls * 1e6 for k, v in samples.items()}
    sync_ratio = us["rt"] / us["floor"]
    async_ratio = us["art"] / us["afloor"]
    handler_ratio = us["srt"] / us["rt"]
    print(
        f"{name:<24} sync  runtime {us['rt']:7.2f} us/call  floor {us['floor']:7.2f}"
        f"  ratio {sync_ratio:5.2f}x"
    )
    print(
        f"{'':<24} async runtime {us['art']:7.2f} us/call  floor {us['afloor']:7.2f}"
        f"  ratio {async_ratio:5.2f}x"
    )
    print(
        f"{'':<24} run_tool_loop, async tool {us['srt']:7.2f} us/call"
        f"  against the inline sync tool: ratio {handler_ratio:5.2f}x"
    )
    return sync_ratio, async_ratio, handler_ratio


class IterationClock(EventSink):
    """Times each iteration from the sink's own start and end events."""

    def __init__(self) -> None:
        self.durations: list[float] = []
        self._started = 0.0

    def on_event(self, event: RunEvent, /) -> None:
        if isinstance(event, IterationStarted):
            self._started = time.perf_counter()
        elif isinstance(event, IterationFinished):
            self.durations.append(time.perf_counter() - self._started)


def flatness(rounds: int) -> float:
    turns = script(1000, 1)
    runtime = runtime_for(turns, is_async=False)
    early: list[float] = []
    late: list[float] = []
    for _ in range(rounds):
        clock = IterationClock()
        runtime.run_tool_loop("go", sink=clock)
        early.append(statistics.median(clock.durations[:100]))
        late.append(statistics.median(clock.durations[900:1000]))
    ratio = statistics.median(late) / statistics.median(early)
    print(
        f"{'flatness (sync, 1,000)':<24} iterations 1-100 {statistics.median(early) * 1e6:6.2f} us,"
        f" 901-1000 {statistics.median(late) * 1e6:6.2f} us  ratio {ratio:5.2f}x"
    )
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    # CLEVERAGENTS_BENCH_SMOKE=1 (tests/test_bench_smoke.py): one round, end to end, untimed.
    smoke = os.environ.get("CLEVERAGENTS_BENCH_SMOKE") == "1"
    parser.add_argument("--rounds", type=int, default=1 if smoke else 15)
    args = parser.parse_args()
    one = compare("200 iter x 1 call", 200, 1, args.rounds)
    eight = compare("50 iter x 8 calls", 50, 8, args.rounds)
    flat = flatness(max(3, args.rounds // 3))
    worst = max(*one[:2], *eight[:2])
    handlers = max(one[2], eight[2])
    print(
        f"worst ratio {worst:.2f}x (goal <= 1.25x); async tools in run_tool_loop"
        f" {handlers:.2f}x (goal <= 2x); flatness {flat:.2f}x (goal ~1.0x)"
    )


if __name__ == "__main__":
    main()
