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


TOML = re.compile(r"^```toml\n(.*?)^```", re.S | re.M)


class AnyVariable(dict[str, str]):
    """An environment in which every variable a file names is set."""

    def __contains__(self, key: object) -> bool:
        return True

    def __getitem__(self, key: str) -> str:
        return "set-in-the-environment"

    def get(self, key: str, default: object = None) -> str:  # type: ignore[override]
        return "set-in-the-environment"


def test_every_config_toml_example_is_read_as_it_stands() -> None:
    """Each ``toml`` block of the docs is valid TOML, and its ``[mcp_servers.NAME]``
    tables are entries ``config.toml`` would take (variables they name taken as set)."""
    import tomllib

    from cleveragents import _mcp_files

    read = 0
    for doc in DOCS:
        for block in TOML.findall(doc.read_text(encoding="utf-8")):
            data = tomllib.loads(block)
            if "mcp_servers" in data:
                _mcp_files.toml_entries(data["mcp_servers"], doc.name, AnyVariable())
                read += 1
    assert read >= 2
