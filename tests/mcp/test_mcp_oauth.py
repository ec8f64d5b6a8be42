"""Authorization of an HTTP MCP server against a loopback authorization server that
enforces the rules (``servers/oauth_server.py``: PKCE S256, the ``resource`` parameter,
registered redirect URIs, ``state``, single-use codes and refresh tokens, expiry,
``insufficient_scope``, dynamic registration): the sign-in through the loopback
callback, tokens kept 0600 and reused, refresh on expiry and on a 401, step-up, logout
and login, what a call says while a sign-in waits, and the callback's refusals."""

from __future__ import annotations

import asyncio
import contextlib
import json
import stat
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from cleveragents.mcp import McpServer, McpServerConfig, McpToolError, OAuthConfig, TokenStore
from cleveragents.mcp._oauth import LoopbackCallback
from cleveragents.tool import ToolRegistry
from kit.mcp import base_env
from kit.oauth import PRE_SECRET, Browser, auth_server, browse
from kit.wait import WAIT_S, wait_for


def server_for(
    config: McpServerConfig, state: Path, on_authorize: Callable[[McpServer], None]
) -> McpServer:
    return McpServer(
        config, scope="daemon", log_dir=state / "mcp", base_env=base_env(),
        tokens=TokenStore(state), on_authorize=on_authorize,
    )  # fmt: skip


@contextlib.asynccontextmanager
async def connected(
    url: str, state: Path, browser: Browser, **fields: Any
) -> AsyncIterator[McpServer]:
    config = McpServerConfig("web", url=url, startup_timeout_s=WAIT_S, **fields)
    server = server_for(config, state, browser)
    server.start()
    try:
        yield server
    finally:
        await server.stop()


async def until(condition: Callable[[], bool]) -> None:
    await wait_for(condition, interval=0.05)


async def test_a_sign_in_through_the_loopback_callback_makes_the_server_ready(
    tmp_path: Path,
) -> None:
    browser = Browser()
    async with auth_server() as web, connected(web.url, tmp_path, browser) as server:
        await until(lambda: server.status == "ready")
        assert await server.call_tool("add", {"a": 2, "b": 3}) == {"result": 5}
        (url,) = browser.urls
        assert "code_challenge_method=S256" in url
        assert "resource=" in url
        assert url.startswith(f"{web.base}/authorize?")
        stats = web.get("/stats")
        assert (stats["register"], stats["authorize"], stats["code"]) == (1, 1, 1)
    kept = tmp_path / "mcp-auth" / "web.json"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert stat.S_IMODE(kept.parent.stat().st_mode) == 0o700
    assert json.loads(kept.read_text())["url"] == web.url


async def test_kept_tokens_are_used_again_without_a_sign_in(tmp_path: Path) -> None:
    async with auth_server() as web:
        first = Browser()
        async with connected(web.url, tmp_path, first) as server:
            await until(lambda: server.status == "ready")
        again = Browser()
        async with connected(web.url, tmp_path, again) as server:
            await server.wait_ready()
            assert server.status == "ready"
            assert await server.call_tool("add", {"a": 1, "b": 1}) == {"result": 2}
        assert again.urls == []
        assert web.get("/stats")["authorize"] == 1


async def test_tokens_kept_for_another_url_are_not_sent(tmp_path: Path) -> None:
    store = TokenStore(tmp_path)
    store.update("web", "https://elsewhere.example/mcp", tokens={"access_token": "x"})
    assert store.load("web", "https://other.example/mcp") == {}
    assert store.load("web", "https://elsewhere.example/mcp")["tokens"] == {"access_token": "x"}


async def test_an_expired_token_is_refreshed_without_a_sign_in(tmp_path: Path) -> None:
    browser = Browser()
    async with auth_server("--expires-in", "1") as web, connected(web.url, tmp_path, browser) as s:
        await until(lambda: s.status == "ready")
        await asyncio.sleep(1.5)
        assert await s.call_tool("add", {"a": 4, "b": 4}) == {"result": 8}
        assert len(browser.urls) == 1
        assert web.get("/stats")["refresh"] >= 1


async def test_a_token_about_to_expire_is_refreshed_before_the_request(tmp_path: Path) -> None:
    async with auth_server() as web:
        async with connected(web.url, tmp_path, Browser()) as server:
            await until(lambda: server.status == "ready")
        # Kept with 10 s left of its hour: within the last 30 s, so it is refreshed first.
        store = TokenStore(tmp_path)
        store.update("web", web.url, expires_at=time.time() + 10)
        refused = web.get("/stats")["unauthorized"]
        again = Browser()
        async with connected(web.url, tmp_path, again) as server:
            await server.wait_ready()
            assert await server.call_tool("add", {"a": 1, "b": 1}) == {"result": 2}
        stats = web.get("/stats")
        assert (stats["refresh"], stats["unauthorized"], again.urls) == (1, refused, [])
        assert store.load("web", web.url)["expires_at"] > time.time() + 3000


async def test_a_revoked_token_is_refreshed_on_the_401(tmp_path: Path) -> None:
    browser = Browser()
    async with auth_server() as web, connected(web.url, tmp_path, browser) as server:
        await until(lambda: server.status == "ready")
        web.get("/revoke")
        assert await server.call_tool("add", {"a": 5, "b": 5}) == {"result": 10}
        assert len(browser.urls) == 1
        assert web.get("/stats")["refresh"] == 1


async def test_insufficient_scope_asks_for_a_sign_in_with_the_wider_scope(tmp_path: Path) -> None:
    browser = Browser()
    async with auth_server() as web, connected(web.url, tmp_path, browser) as server:
        await until(lambda: server.status == "ready")
        assert await server.call_tool("admin", {}) == {"result": "admin done"}
        assert len(browser.urls) == 2
        assert "scope=read+admin" in browser.urls[1]


async def test_a_pre_registered_confidential_client_authenticates(tmp_path: Path) -> None:
    browser = Browser()
    oauth = OAuthConfig(client_id="pre", client_secret=PRE_SECRET)
    async with auth_server() as web, connected(web.url, tmp_path, browser, oauth=oauth) as s:
        await until(lambda: s.status == "ready")
        assert "client_id=pre&" in browser.urls[0]
        assert web.get("/stats")["register"] == 0
    assert PRE_SECRET not in (tmp_path / "mcp-auth" / "web.json").read_text()


async def test_while_a_sign_in_waits_a_call_says_how_to_give_it(tmp_path: Path) -> None:
    browser = Browser(opens=False)
    async with auth_server() as web, connected(web.url, tmp_path, browser) as server:
        await server.wait_ready()
        assert server.status == "needsAuth"
        assert server.authorization_url == browser.urls[0]
        with pytest.raises(McpToolError) as failed:
            await server.call_tool("add", {"a": 1, "b": 2})
        text = str(failed.value)
        assert "MCP server web needs authorization" in text
        assert browser.urls[0] in text
        assert "cleveragents mcp login web" in text
        # The registry names the server for a tool it never listed.
        registry = ToolRegistry()
        registry.explain_missing(lambda name: server.failure_text() if name else None)
        assert "needs authorization" in (registry.why_missing("mcp:web/add") or "")
        # The person signs in late: the server becomes ready.
        await asyncio.to_thread(browse, browser.urls[0])
        await until(lambda: server.status == "ready")


async def test_logout_forgets_and_login_asks_again(tmp_path: Path) -> None:
    browser = Browser()
    async with auth_server() as web, connected(web.url, tmp_path, browser) as server:
        await until(lambda: server.status == "ready")
        assert await server.logout() is True
        assert not (tmp_path / "mcp-auth" / "web.json").exists()
        assert server.status == "needsAuth"
        with pytest.raises(McpToolError, match="mcp/login"):
            await server.call_tool("add", {"a": 1, "b": 2})
        await server.login()
        await until(lambda: server.status == "ready")
        assert len(browser.urls) == 2


async def test_an_unauthorized_answer_names_the_url_and_how_to_sign_in(tmp_path: Path) -> None:
    async with auth_server() as web:
        config = McpServerConfig(
            "web", url=web.url + "?key=secret-in-query", headers={"Authorization": "Bearer no"}
        )
        server = server_for(config, tmp_path, Browser())
        server.start()
        try:
            await server.wait_ready()
            assert server.status == "failed"
            assert server.error is not None
            assert f"HTTP 401 from {web.url};" in server.error
            assert "mcp/login" in server.error
            assert "secret-in-query" not in server.error
        finally:
            await server.stop()


async def test_the_callback_takes_only_the_state_of_the_sign_in_in_progress(
    tmp_path: Path,
) -> None:
    callback = LoopbackCallback()
    async with contextlib.AsyncExitStack() as stack:
        tasks = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(tasks.cancel_scope.cancel)
        await callback.listen(stack, tasks, None)
        root = f"http://127.0.0.1:{callback.port}/callback"

        def status(query: str) -> int:
            try:
                with urllib.request.urlopen(f"{root}?{query}", timeout=10) as page:
                    return int(page.status)
            except urllib.error.HTTPError as refused:
                return refused.code

        assert await asyncio.to_thread(status, "code=c&state=s") == 400  # nothing waits
        callback.expect("right-state")
        assert await asyncio.to_thread(status, "code=c&state=wrong") == 400
        assert await asyncio.to_thread(status, "code=the-code&state=right-state") == 200
        result = await callback.result()
        assert not isinstance(result, str)
        assert (result.code, result.state) == ("the-code", "right-state")
        assert await asyncio.to_thread(status, "code=again&state=right-state") == 400


async def test_a_refused_sign_in_fails_the_server_with_the_servers_words(tmp_path: Path) -> None:
    callback = LoopbackCallback()
    callback.expect("s")
    assert callback._take("/callback?error=access_denied&state=s")[0].startswith("400")
    result = await callback.result()
    assert result == "the authorization server refused the sign-in: access_denied"


async def test_a_2025_03_26_server_naming_an_issuer_on_its_own_origin_signs_in(
    tmp_path: Path,
) -> None:
    browser = Browser()
    async with (
        auth_server("--legacy-issuer", "/oauth") as web,
        connected(web.url, tmp_path, browser) as server,
    ):
        await until(lambda: server.status == "ready")
        assert await server.call_tool("add", {"a": 2, "b": 2}) == {"result": 4}
        assert web.get("/stats")["code"] == 1


async def test_a_2025_03_26_server_naming_an_issuer_elsewhere_is_refused(tmp_path: Path) -> None:
    browser = Browser()
    async with (
        auth_server("--legacy-issuer", "http://attacker.example") as web,
        connected(web.url, tmp_path, browser) as server,
    ):
        await server.wait_ready()
        assert server.status == "failed"
        assert "issuer" in (server.error or "")
        assert browser.urls == []
        assert web.get("/stats")["authorize"] == 0
