"""Every number of docs/security.md's table of the daemon's limits (§9) is the code's:
each row names the constant that holds its bound, and the first number of its "limit"
cell, with its unit, must equal it. A bound changed in the code without the docs (or
the other way round) fails here."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import attrs
import pytest

SECURITY_MD = Path(__file__).resolve().parents[1] / "docs" / "security.md"
MARKER = "<!-- limits: checked by tests/test_security_limits.py -->"
_UNITS = {"KiB": 1024, "MiB": 1024**2, "ms": 0.001, "s": 1, "min": 60, "": 1}
_NUMBER = re.compile(r"(\d[\d,]*(?:\.\d+)?)\s*(KiB|MiB|ms|min|s\b)?")


def _rows() -> list[tuple[str, str, str]]:
    """(what, limit, constant) of each table row after the marker."""
    text = SECURITY_MD.read_text(encoding="utf-8")
    assert MARKER in text, "the limits table lost its marker"
    rows = []
    for line in text.split(MARKER, 1)[1].lstrip().splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        rows.append((cells[0], cells[1], cells[2].strip("`")))
    return rows


def _constant(dotted: str) -> Any:
    """``package._module.NAME`` or ``package._module.AttrsClass.field`` (its default)."""
    parts = dotted.split(".")
    for split in range(len(parts) - 1, 0, -1):
        try:
            value: Any = importlib.import_module("cleveragents." + ".".join(parts[:split]))
        except ImportError:
            continue
        for name in parts[split:]:
            if attrs.has(value):  # a field of a settings class: its default
                value = getattr(attrs.fields(value), name).default
            else:
                value = getattr(value, name)
        return value
    raise AssertionError(f"no module for {dotted}")


def _first_number(cell: str) -> float:
    found = _NUMBER.search(cell.replace("2^30", ""))
    assert found is not None, f"no number in {cell!r}"
    number = float(found.group(1).replace(",", ""))
    return number * _UNITS[found.group(2) or ""]


ROWS = [row for row in _rows() if row[2]]


def test_the_table_names_a_constant_for_nearly_every_bound() -> None:
    assert len(ROWS) >= 30


@pytest.mark.parametrize(("what", "limit", "constant"), ROWS, ids=[r[2] for r in ROWS])
def test_each_limit_in_security_md_is_the_codes(what: str, limit: str, constant: str) -> None:
    assert _first_number(limit) == pytest.approx(_constant(constant)), (what, limit)
