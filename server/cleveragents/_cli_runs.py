"""What the command line reads from past runs: a run id from a unique prefix, the latest
run of a workspace, and what a run was started with (workspace, model, profile).

It reads transcripts through ``cleveragents.transcripts`` alone (no daemon, no pygls),
for ``run --continue`` and ``runs list|show``. What it cannot find is a
``RunNotFoundError`` whose message names the run and, for a prefix that fits several,
the candidates.
"""

from __future__ import annotations

import attrs

from .protocol import methods as m
from .transcripts import META, RunNotFoundError, TranscriptStore

MIN_PREFIX = 4
"""The shortest prefix of a run id that may stand for it."""
SHOWN_CANDIDATES = 8


@attrs.frozen
class RunFacts:
    """What a run was started with, from its transcript's first lines (``None``: not
    recorded, as in a transcript written before the field existed)."""

    run_id: str
    workspace: str | None = None
    model: str | None = None
    profile: str | None = None
    started_at: str = ""
    prompt: str = ""
    continue_from: str | None = None

    def about(self) -> dict[str, str | None]:
        """As ``runs show`` takes it (the transcript's own names)."""
        return {"startedAt": self.started_at, "prompt": self.prompt,
                "workspace": self.workspace, "model": self.model, "profile": self.profile,
                "continueFrom": self.continue_from}  # fmt: skip


def resolve(store: TranscriptStore, text: str) -> str:
    """The run ``text`` names: its id, or a unique prefix of at least ``MIN_PREFIX``
    characters (the newest matches are listed when several fit)."""
    if store.exists(text):
        return text
    if len(text) < MIN_PREFIX:
        raise RunNotFoundError(
            f"unknown run {text!r} (a prefix of a run id needs at least {MIN_PREFIX} characters)"
        )
    matches = [str(s["runId"]) for s in store.summaries() if str(s["runId"]).startswith(text)]
    if len(matches) == 1:
        return matches[0]
    if matches:  # summaries() is newest first
        more = len(matches) - SHOWN_CANDIDATES
        raise RunNotFoundError(
            f"{text!r} is the start of {len(matches)} run ids: "
            + ", ".join(matches[:SHOWN_CANDIDATES])
            + (f" and {more} more" if more > 0 else "")
            + "; give more of the id"
        )
    raise RunNotFoundError(f"unknown run {text!r}")


def facts(store: TranscriptStore, run_id: str) -> RunFacts:
    """``$/meta`` and ``run/started`` of a run (its first two lines), as ``RunFacts``."""
    meta: dict[str, object] = {}
    workspace: str | None = None
    for event in store.events(run_id):
        method, params = event.get("method"), event.get("params")
        if not isinstance(params, dict):
            break
        if method == META and not meta:
            meta = params
            continue
        if method == m.RUN_STARTED and isinstance(params.get("sandboxRoot"), str):
            workspace = params["sandboxRoot"]
        break  # run/started is the line after $/meta: nothing further is needed

    def text(key: str) -> str | None:
        value = meta.get(key)
        return value if isinstance(value, str) and value else None

    return RunFacts(
        run_id, workspace, text("model"), text("profile"), text("startedAt") or "",
        text("prompt") or "", text("continueFrom"),
    )  # fmt: skip


def latest_in(store: TranscriptStore, workspace: str) -> str | None:
    """The newest finished run whose sandbox root was ``workspace``."""
    for summary in store.summaries():
        if summary["active"]:
            continue
        if facts(store, str(summary["runId"])).workspace == workspace:
            return str(summary["runId"])
    return None
