"""``cleveragents run`` through the real CLI (the run service in its process), with a
model and a tool output full of terminal escape sequences: none reaches the terminal, in
either output mode, nor later through ``cleveragents runs`` reading the transcript."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from cleveragents.client._views import JsonView, Output

CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Everything but newline and tab that a terminal might act on: ESC, BEL, CR, C1, DEL."""

HOSTILE = (
    "\x1b]0;pwned title\x07"  # OSC 0: window title
    "\x1b]52;c;ZWNobyBwd25lZA==\x1b\\"  # OSC 52: clipboard
    "\x1b[2A\x1b[2J"  # cursor up two lines, clear the screen
    "\x9b1;1H\x9d0;8-bit\x9c"  # 8-bit CSI and OSC
    "\r\x08\x7f"
)
FIRST = f"Reading{HOSTILE} the notes."
LAST = f"Done{HOSTILE}.\n\tBye."
NOTES = f"notes line one{HOSTILE}\nline two\n"
ODD_TOOL = f"builtin/no{HOSTILE}such"
MISSING = f"missing{HOSTILE}.txt"


def cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "cleveragents", *args],
        capture_output=True,
        timeout=60,
        env=dict(os.environ),
        stdin=subprocess.DEVNULL,  # nothing piped: the prompt is the argument alone
    )


def run_cli(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[bytes]:
    (tmp_path / "ws").mkdir(exist_ok=True)
    (tmp_path / "ws" / "notes.txt").write_text(NOTES)
    turns: list[dict[str, Any]] = [
        {
            "content": FIRST,
            "toolCalls": [
                {"name": "builtin/file-read", "arguments": {"path": "notes.txt"}},
                {"name": ODD_TOOL, "arguments": {"why": HOSTILE}},
                {"name": "builtin/file-read", "arguments": {"path": MISSING}},
            ],
        },
        {"content": LAST},
    ]
    script = tmp_path / "turns.json"
    script.write_text(json.dumps(turns))
    return cli("run", f"read the notes{HOSTILE}", "--model", f"scripted:{script}",
               "--workspace", str(tmp_path / "ws"), "--state-dir", str(tmp_path / "state"),
               *extra)  # fmt: skip


def test_run_prints_model_and_tool_text_without_escape_sequences(tmp_path: Path) -> None:
    out = run_cli(tmp_path)
    assert out.returncode == 0, out.stderr
    stdout, stderr = out.stdout.decode(), out.stderr.decode()
    assert not CONTROLS.findall(stdout)
    assert not CONTROLS.findall(stderr)
    # The words around the sequences still show, with their newlines and tabs: the
    # answer alone on stdout (not a terminal), the rest of the run on stderr.
    assert stdout == "Done.\n\tBye.\n"
    assert "Reading the notes." in stderr
    assert "  started builtin/nosuch {" in stderr
    assert re.search(r"failed +builtin/nosuch [0-9.]+ ms: unknown tool", stderr)


def test_run_json_escapes_every_control_and_keeps_the_text_exact(tmp_path: Path) -> None:
    out = run_cli(tmp_path, "--json")
    assert out.returncode == 0, out.stderr
    stdout = out.stdout.decode()
    assert not CONTROLS.findall(stdout)
    events = [json.loads(line) for line in stdout.splitlines()]
    finished = events[-1]["params"]["result"]
    assert finished["content"] == LAST
    by_name = {(r["toolName"], r["inputs"].get("path")): r for r in finished["toolCallHistory"]}
    assert by_name["builtin/file-read", "notes.txt"]["output"]["content"] == NOTES
    assert by_name[ODD_TOOL, None]["success"] is False
    assert by_name["builtin/file-read", MISSING]["success"] is False


def test_runs_list_and_show_print_the_transcript_without_escape_sequences(
    tmp_path: Path,
) -> None:
    assert run_cli(tmp_path).returncode == 0
    state = str(tmp_path / "state")
    listing = cli("runs", "list", "--state-dir", state)
    assert listing.returncode == 0, listing.stderr
    assert "read the notes" in listing.stdout.decode()
    assert not CONTROLS.findall(listing.stdout.decode())
    run_id = listing.stdout.decode().splitlines()[1].split()[0]  # under the header
    shown = cli("runs", "show", run_id, "--state-dir", state)
    assert shown.returncode == 0, shown.stderr
    assert not CONTROLS.findall(shown.stdout.decode())
    assert "Done.\n  \tBye." in shown.stdout.decode()
    as_json = cli("runs", "show", run_id, "--json", "--state-dir", state)
    assert not CONTROLS.findall(as_json.stdout.decode())
    assert json.loads(as_json.stdout)["content"] == LAST


def test_a_json_line_is_the_params_text_with_controls_and_lone_surrogates_escaped() -> None:
    params = {"runId": "r", "seq": 2, "iteration": 1, "text": f"a{HOSTILE}\udcffb é"}
    text = json.dumps(params, ensure_ascii=False, separators=(",", ":"))
    stream = io.StringIO()
    JsonView(Output(stream)).event_text("run/messageDelta", text)
    line = stream.getvalue()
    assert not CONTROLS.findall(line)
    line.encode("utf-8")  # no lone surrogate left raw
    assert json.loads(line) == {"method": "run/messageDelta", "params": params}
    # Nothing else differs from the transcript's line (é stays as it is).
    escaped = "".join(
        f"\\u{ord(c):04x}" if 0x7F <= ord(c) <= 0x9F or 0xD800 <= ord(c) <= 0xDFFF else c
        for c in text
    )
    assert line == '{"method":"run/messageDelta","params":' + escaped + "}\n"
