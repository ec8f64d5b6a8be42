"""ACP's session files under the state dir: never written or read through a link, never
waited on (a FIFO), and a bounded number of logs open however many sessions there are."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from cleveragents.acp._store import MAX_OPEN_LOGS, SessionStore


def meta(session_id: str) -> dict[str, object]:
    return {"sessionId": session_id, "cwd": "/ws", "mode": "supervised", "runs": []}


def test_a_link_planted_at_a_session_s_names_is_never_written_through(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "state")
    store.save(meta("s1"))
    target = tmp_path / "shell-rc"
    target.write_text("original\n")
    folder = tmp_path / "state" / "acp"
    (folder / "s2.jsonl").symlink_to(target)
    (folder / "s2.json").symlink_to(target)
    (folder / ".s2.json.tmp").symlink_to(target)  # the old fixed temp name
    store.append("s2", {"sessionUpdate": "agent_message_chunk", "content": "model text"})
    store.save(meta("s2"))  # replaces the link s2.json itself
    store.close()
    assert target.read_text() == "original\n"
    assert not (folder / "s2.json").is_symlink()
    assert store.load("s2") == meta("s2")
    assert (os.stat(folder / "s2.json").st_mode & 0o777) == 0o600
    assert (os.stat(folder).st_mode & 0o777) == 0o700


def test_a_fifo_or_a_link_where_a_session_file_should_be_is_skipped_not_waited_on(
    tmp_path: Path,
) -> None:
    store = SessionStore(tmp_path / "state")
    store.save(meta("s1"))
    folder = tmp_path / "state" / "acp"
    os.mkfifo(folder / "s2.json")
    os.mkfifo(folder / "s2.jsonl")
    (folder / "s3.json").symlink_to("/etc/passwd")
    done = threading.Event()
    found: list[object] = []

    def read() -> None:
        found.extend([store.all(), store.updates("s2"), store.load("s3")])
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(5), "a session file read waited on a FIFO"
    assert found == [[meta("s1")], [], None]


def test_no_more_than_a_bounded_number_of_session_logs_stay_open(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "state")
    before = len(os.listdir("/proc/self/fd"))
    for n in range(MAX_OPEN_LOGS * 4):
        store.append(f"s{n}", {"sessionUpdate": "agent_message_chunk", "n": n})
    # The logs, and the state dir's own pinned descriptor.
    assert len(os.listdir("/proc/self/fd")) - before <= MAX_OPEN_LOGS + 1
    store.append("s0", {"sessionUpdate": "agent_message_chunk", "n": "again"})  # reopened
    store.close()
    assert [u["n"] for u in store.updates("s0")] == [0, "again"]
