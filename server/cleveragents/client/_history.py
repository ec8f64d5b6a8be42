"""``cleveragents runs list`` and ``runs show``: past runs drawn for people.

Takes the wire shapes (``RunSummary`` and ``RunResult`` dicts) and what else the
transcript says of a run (its workspace, model, profile), and returns lines; the command
line reads them from the transcripts. A prompt, a model's text and a tool's output are
all model- or user-controlled, so every line passes through ``printable``. Times are
shown in the local time zone; a run id as its shortest unique prefix (at least 8
characters), which every command takes in its place; a home directory as ``~``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ._terminal import printable
from ._views import duration, limit_words, one_line, record_line


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


SHORT_ID = 8


def short_ids(ids: Sequence[str], among: Sequence[str]) -> dict[str, str]:
    """Each id cut to the shortest prefix (at least ``SHORT_ID`` characters) that no
    other id in ``among`` starts with."""
    ordered = sorted(set(among) | set(ids))
    out: dict[str, str] = {}
    for run_id in ids:
        i = ordered.index(run_id)
        common = max((_common(run_id, ordered[j]) for j in (i - 1, i + 1)
                      if 0 <= j < len(ordered)), default=0)  # fmt: skip
        out[run_id] = run_id[: max(SHORT_ID, common + 1)]
    return out


def _common(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def home_short(path: str) -> str:
    """``path`` with the home directory written ``~``."""
    home = os.path.expanduser("~")
    if home not in ("", "/") and (path == home or path.startswith(home + os.sep)):
        return "~" + path[len(home) :]
    return path


def _left_cut(text: str, width: int) -> str:
    return text if len(text) <= width else "…" + text[len(text) - width + 1 :]


def list_lines(
    summaries: list[dict[str, Any]], width: int = 100, among: Sequence[str] = ()
) -> list[str]:
    """The runs table. A summary may carry ``model`` and ``workspace`` besides its
    ``RunSummary`` fields; ``among`` are all the run ids (for the short ids)."""
    if not summaries:
        return ["no runs yet"]
    ids = short_ids([str(s.get("runId")) for s in summaries], among)
    rows = [
        [ids[str(s.get("runId"))], local_time(str(s.get("startedAt", ""))), str(s.get("status")),
         str(s.get("iterations", 0)), str(s.get("toolCallCount", 0)),
         one_line(str(s.get("model") or "-"), 28),
         _left_cut(home_short(one_line(str(s.get("workspace") or "-"), 400)), 32),
         one_line(str(s.get("prompt", "")), 200)]
        for s in summaries
    ]  # fmt: skip
    header = ["RUN", "STARTED", "STATUS", "ITER", "CALLS", "MODEL", "WORKSPACE", "PROMPT"]
    fixed = sum(max(len(r[i]) for r in [header, *rows]) + 2 for i in range(len(header) - 1))
    return table(header, rows, last_width=max(20, width - fixed))


def show_lines(result: dict[str, Any], about: Mapping[str, str | None] | None = None) -> list[str]:
    """One run for people. ``about`` is what its transcript says besides the result:
    ``startedAt``, ``prompt``, ``workspace``, ``model``, ``profile``, ``continueFrom``."""
    about = about or {}
    records = result.get("toolCallHistory") or []
    status = str(result.get("status"))
    if status == "limit":  # which limit, in words
        status += f" ({limit_words(result)[0]})"
    lines = [f"run         {result.get('runId')}", f"status      {status}"]
    if about.get("startedAt"):
        lines.append(f"started     {local_time(str(about['startedAt']))}")
    for key, label in (("workspace", "workspace"), ("model", "model"), ("profile", "profile"),
                       ("continueFrom", "continues")):  # fmt: skip
        if about.get(key):
            lines.append(f"{label:<11} {one_line(str(about[key]), 400)}")
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
    prompt = str(about.get("prompt") or "")
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
