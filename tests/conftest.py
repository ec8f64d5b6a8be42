"""Shared pytest configuration (helpers live in each folder's *_kit / toolkit module)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_model_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests name their model; a developer's CLEVERAGENTS_MODEL must not leak in (the
    daemon subprocesses inherit this environment)."""
    monkeypatch.delenv("CLEVERAGENTS_MODEL", raising=False)
