"""Fixtures: a workspace and a factory of real ACP agent subprocesses
(each closed, and its process reaped, at the end of the test)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kit.acp import AcpClient, Spawn, serve_command


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    (root / "src").mkdir(parents=True)
    (root / "src" / "greet.py").write_text('def greet():\n    return "hi"\n')
    return root.resolve()


@pytest.fixture
async def spawn(state_dir: Path) -> AsyncIterator[Spawn]:
    clients: list[AcpClient] = []

    async def start(model: Any, *extra: str, **capabilities: Any) -> AcpClient:
        client = await AcpClient(serve_command(model, state_dir, *extra)).start()
        clients.append(client)
        await client.initialize(**capabilities)
        return client

    yield start
    for client in clients:
        await client.close()
