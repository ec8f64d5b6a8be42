"""``cleveragents demo --protocol acp``: a scripted turn over ACP, printed readably."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_the_acp_demo_prints_the_read_the_diff_the_permission_prompt_and_the_answer(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "workspace"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "greet.py").write_text(
        'def greet(name: str) -> str:\n    return f"Helo, {name}!"\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "cleveragents", "demo", "--protocol", "acp",
         "--workspace", str(workspace), "--state-dir", str(tmp_path / "state")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    wanted = [
        "<- tool call [pending] Read src/greet.py (read)",
        "<- fs/read_text_file src/greet.py: the editor answers from its buffer",
        "<- tool call update [completed] Read src/greet.py",
        "<- tool call [pending] Edit src/greet.py (edit)",
        "<- session/request_permission: Edit src/greet.py? "
        "[Allow, Always allow, Reject, Always reject]",
        "-> the user picks: Allow (allow_once)",
        "<- tool call update [completed] Edit src/greet.py",
        '     -    return f"Helo, {name}!"',
        '     +    return f"Hello, {name}!"',
        "<- agent: Fixed the typo in src/greet.py: it now greets with Hello.",
        "<- session/prompt answered: stopReason end_turn",
    ]
    positions = [lines.index(line) for line in wanted]
    assert positions == sorted(positions)
    assert any(line.startswith("<- fs/write_text_file src/greet.py") for line in lines)
    assert all("\x1b" not in line for line in lines)
    assert (workspace / "src" / "greet.py").read_text() == (
        'def greet(name: str) -> str:\n    return f"Hello, {name}!"\n'
    )
