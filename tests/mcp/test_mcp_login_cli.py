"""``cleveragents mcp login NAME`` and ``logout NAME`` on the command line, against the
loopback OAuth server: login opens the sign-in page with ``$BROWSER`` (here a script
that does what a browser does: GET it, follow the redirects to the callback), prints
the URL, and keeps the tokens where the daemon finds them; logout deletes them; a stdio
or unknown server is a usage error naming it."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from kit.oauth import auth_server

BROWSE = """import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=10) as page:
    page.read()
"""


async def cli(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    browser = tmp_path / "browse.py"
    browser.write_text(BROWSE)
    env = {
        **os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "BROWSER": f"{sys.executable} {browser} %s",
    }  # fmt: skip
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cleveragents", "mcp", *args, "--state-dir", str(tmp_path / "state"),
        cwd=tmp_path, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def config(tmp_path: Path, text: str) -> None:
    folder = tmp_path / "config" / "cleveragents"
    folder.mkdir(parents=True)
    (folder / "config.toml").write_text(text)


async def test_login_signs_in_through_the_browser_and_logout_forgets(tmp_path: Path) -> None:
    async with auth_server() as web:
        config(tmp_path, f'[mcp_servers.web]\nurl = "{web.url}"\n')
        code, out, err = await cli(tmp_path, "login", "web")
        assert code == 0, err
        assert "signed in to web" in out
        assert f"{web.base}/authorize?" in err
        assert web.get("/stats")["code"] == 1
    kept = tmp_path / "state" / "mcp-auth" / "web.json"
    assert kept.is_file()
    code, out, _ = await cli(tmp_path, "logout", "web")
    assert (code, out.strip()) == (0, "forgot the tokens and registration of web")
    assert not kept.exists()
    code, out, _ = await cli(tmp_path, "logout", "web")
    assert (code, out.strip()) == (0, "nothing was stored for web")


async def test_login_names_what_it_cannot_sign_in_to(tmp_path: Path) -> None:
    config(tmp_path, '[mcp_servers.git]\ncommand = "mcp-server-git"\n')
    code, _, err = await cli(tmp_path, "login", "git")
    assert code == 2
    assert "git is a stdio server" in err
    code, _, err = await cli(tmp_path, "login", "nope")
    assert code == 2
    assert "no MCP server named 'nope'" in err
