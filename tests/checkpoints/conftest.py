"""Fixtures of the checkpoint tests: a workspace, a state dir outside it, and its store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cleveragents.checkpoints import CheckpointSettings, CheckpointStore


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "workspace"
    folder.mkdir()
    return folder


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def settings() -> CheckpointSettings:
    """A small size cap, so a file over it is cheap to make."""
    return CheckpointSettings(max_file_bytes=64 * 1024)


@pytest.fixture
def store(state: Path, root: Path, settings: CheckpointSettings) -> Iterator[CheckpointStore]:
    with CheckpointStore.open(state, root, settings) as opened:
        yield opened
