"""End-to-end fixtures: the real ``cleveragents serve`` subprocess driven by pytest-lsp."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from kit.lsp import SERVE, Session, attach, initialize_params, make_client


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    (root / "hello.txt").write_text("hello world\n")
    return root.resolve()


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVE, client_factory=make_client))
async def daemon(
    lsp_client: LanguageClient, workspace: Path, state_dir: Path
) -> AsyncIterator[Any]:
    """The real daemon subprocess, initialized (pytest-lsp yields its client)."""
    current = Session(lsp_client, workspace, state_dir)
    attach(lsp_client, current)
    result = await lsp_client.initialize_session(initialize_params(workspace, state_dir))
    current.capabilities = result.capabilities.experimental["cleveragents"]
    lsp_client.session = current  # type: ignore[attr-defined]
    yield
    await lsp_client.shutdown_session()


@pytest.fixture
def session(daemon: Any) -> Session:
    return daemon.session  # type: ignore[no-any-return]
