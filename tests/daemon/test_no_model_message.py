"""A ``run/start`` without a model, on a daemon that has none, is told every place one
can be set, ``config.toml`` by its real path among them; and the advice works: with
``model`` set in that file, ``cleveragents serve``'s daemon runs the same request."""

from __future__ import annotations

import json
from pathlib import Path

from kit.rawpeer import RawDaemon


async def start_without_a_model(tmp_path: Path, config_home: Path) -> dict[str, object]:
    (tmp_path / "ws").mkdir(exist_ok=True)
    daemon = await RawDaemon.start(
        tmp_path / "ws", tmp_path / "state", env={"XDG_CONFIG_HOME": str(config_home)}
    )
    try:
        return await daemon.call(2, "run/start", {"prompt": "Say hi."})
    finally:
        await daemon.kill()


async def test_the_no_model_error_names_config_toml_and_following_it_works(
    tmp_path: Path,
) -> None:
    config_home = tmp_path / "config"
    reply = await start_without_a_model(tmp_path, config_home)
    error = reply["error"]
    assert isinstance(error, dict)
    assert error["code"] == -32020
    config = config_home / "cleveragents" / "config.toml"
    assert f"set model in {config}" in error["message"]
    assert "CLEVERAGENTS_MODEL" in error["message"]

    script = tmp_path / "turns.json"
    script.write_text(json.dumps([{"content": "Hi."}]))
    config.parent.mkdir(parents=True)
    config.write_text(f"model = {json.dumps(f'scripted:{script}')}\n")
    reply = await start_without_a_model(tmp_path, config_home)
    result = reply["result"]
    assert isinstance(result, dict)
    assert (result["status"], result["content"]) == ("completed", "Hi.")
