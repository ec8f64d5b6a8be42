"""Shared pytest configuration and the fixtures every folder uses (helpers live in the
``kit`` package)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# Hypothesis's 200 ms deadline per example is a timing assertion, and it fails tests
# whenever the machine is busy (scripts/test runs two workers a core): no deadline.
settings.register_profile("cleveragents", deadline=None)
settings.load_profile("cleveragents")


@pytest.fixture(autouse=True)
def _no_model_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests name their model; a developer's CLEVERAGENTS_MODEL must not leak in (the
    daemon subprocesses inherit this environment)."""
    monkeypatch.delenv("CLEVERAGENTS_MODEL", raising=False)
    # Nor a key a developer stored with `cleveragents keys`: no test reads or writes the
    # OS keyring (tests of the keyring store name a fake backend).
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    """The daemon's state dir for this test (created by the daemon when it needs it)."""
    return tmp_path / "state"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (scripts/test) starts two workers a core: most tests wait on a daemon
    or a command they started, so one worker a core leaves the cores half idle (measured:
    2 cores, 4 workers ran the subprocess-heavy folders 15-45% faster than 2 workers).
    ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still decides when set."""
    if "PYTEST_XDIST_AUTO_NUM_WORKERS" in os.environ:
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    return 2 * (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    )
