"""``cleveragents runs list`` and ``runs show``: past runs drawn for people.

Takes the wire shapes (``RunSummary`` and ``RunResult`` dicts) and returns lines; the
command line reads them from the transcripts. A prompt, a model's text and a tool's
output are all model- or user-controlled, so every line passes through ``printable``.
Times are shown in the local time zone.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ._terminal import printable
from ._views import duration, one_line, record_line


def local_time(iso: str) -> str:
    try:
        return datetime.fromisoformat(iso).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return iso or "?"


def table(header: list[str], rows: list[list[str]], last_width: int | None = None) -> list[str]:
    """Columns padded to their widest cell; the last one is not padded (and is cut)."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    out = []
    for row in [header, *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        last = row[-1]
        if last_width is not None and len(last) > last_width:
            last = last[: last_width - 1] + "…"
        out.append(printable("  ".join([*cells, last])).rstrip())
    return out


def list_lines(summaries: list[dict[str, Any]], width: int = 100) -> list[str]:
    if not summaries:
        return ["no runs yet"]
    rows = [
        [str(s.get("runId")), local_time(str(s.get("startedAt", ""))), str(s.get("status")),
         str(s.get("iterations", 0)), str(s.get("toolCallCount", 0)),
         one_line(str(s.get("prompt", "")), 200)]
        for s in summaries
    ]  # fmt: skip
    header = ["RUN", "STARTED", "STATUS", "ITER", "CALLS", "PROMPT"]
    fixed = sum(max(len(r[i]) for r in [header, *rows]) + 2 for i in range(5))
    return table(header, rows, last_width=max(20, width - fixed))


def show_lines(result: dict[str, Any], started_at: str = "", prompt: str = "") -> list[str]:
    records = result.get("toolCallHistory") or []
    lines = [f"run         {result.get('runId')}", f"status      {result.get('status')}"]
    if started_at:
        lines.append(f"started     {local_time(started_at)}")
    lines.append(f"duration    {duration(float(result.get('durationMs') or 0))}")
    lines.append(f"iterations  {result.get('iterations', 0)}")
    count = len(records) + int(result.get("omittedRecords") or 0)
    lines.append(f"tool calls  {count}")
    usage = result.get("usage")
    if isinstance(usage, dict):
        lines.append(
            f"tokens      {usage.get('inputTokens', 0):,} in / {usage.get('outputTokens', 0):,} out"
        )
    error = result.get("error")
    if isinstance(error, dict):
        lines.append(f"error       {error.get('message')} ({error.get('code')})")
    if prompt:
        lines += ["", "prompt:", *["  " + line for line in printable(prompt).split("\n")]]
    content = str(result.get("content") or "")
    label = "last text (stopped at the limit):" if result.get("status") == "limit" else "content:"
    # Cleaned before splitting: a CR in the text must not start a line of its own.
    lines += ["", label, *["  " + line for line in printable(content).split("\n")]]
    if records:
        rows = []
        for number, record in enumerate(records, 1):
            status, tool, took, output = record_line(record)
            rows.append([str(number), str(record.get("iteration", "")), status, tool, took,
                         output])  # fmt: skip
        lines += ["", *table(["#", "ITER", "STATUS", "TOOL", "TIME", "RESULT"], rows)]
    if result.get("omittedRecords"):
        lines.append(f"({result['omittedRecords']} earlier records left out of the result)")
    return [printable(line) for line in lines]
