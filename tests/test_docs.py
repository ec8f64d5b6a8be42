"""Every Python example in the docs runs as written (docs are part of the feature)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from kit.paths import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def examples() -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        for number, match in enumerate(BLOCK.finditer(doc.read_text(encoding="utf-8")), 1):
            found.append((f"{doc.relative_to(ROOT)}#{number}", match.group(1)))
    return found


@pytest.mark.parametrize(("where", "code"), examples(), ids=[w for w, _ in examples()])
def test_the_example_runs(where: str, code: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, f"{where} failed:\n{result.stderr[-3000:]}"
