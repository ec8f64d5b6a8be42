"""Shared pytest configuration and the fixtures every folder uses (helpers live in the
``kit`` package)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _no_model_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests name their model; a developer's CLEVERAGENTS_MODEL must not leak in (the
    daemon subprocesses inherit this environment)."""
    monkeypatch.delenv("CLEVERAGENTS_MODEL", raising=False)


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    """The daemon's state dir for this test (created by the daemon when it needs it)."""
    return tmp_path / "state"
