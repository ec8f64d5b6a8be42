"""Wire types of ``initialize``: the client's options and capabilities, and the daemon's."""

from __future__ import annotations

from typing import Any

import attrs

from ...tool import Decision
from ._mcp import McpServerEntry
from ._optional import opt


@attrs.define
class CustomProfile:
    """An automation profile defined by the client: what each tool kind may do."""

    __wire_strict__ = True  # a misspelt key is an error, not a silently ignored setting

    read: Decision
    """Decision for ``read`` tools."""
    write: Decision
    """Decision for ``write`` tools."""
    execute: Decision
    """Decision for ``builtin/shell``."""
    requires_confined_shell: bool | None = opt()
    """``true``: an unconfined ``builtin/shell`` is asked instead of allowed. Default ``false``."""
    never_ask: bool | None = opt()
    """``true``: whatever would be asked is refused instead. Default ``false``."""
    unconfined_root: bool | None = opt()
    """``true``: while the daemon runs as root, an unconfined ``builtin/shell`` is decided
    as ``execute`` says instead of refused outright (it would act as root on the whole
    machine). Default ``false``; no built-in profile sets it."""
    description: str | None = opt()
    """Free text."""


@attrs.define
class InitializationOptions:
    """``initialize`` → ``initializationOptions``: defaults for every run."""

    model: str | dict[str, Any] | None = opt()
    """Default model spec for every run (model specs, PROTOCOL.md §14). Replaces ``serve
    --model``."""
    automation_profile: str | None = opt()
    """Default automation profile for every run. Replaces ``serve --profile``. Checked at
    ``run/start``, not here."""
    instructions: bool | None = opt()
    """``false``: runs get none of the daemon's instructions (the default system prompt and the
    workspace's ``AGENTS.md``) unless ``run/start`` asks with ``instructions: true``. Default
    ``true``."""
    state_dir: str | None = opt()
    """Directory for transcripts (``STATE_DIR/runs/``). Replaces ``serve --state-dir``."""
    profiles: dict[str, CustomProfile] | None = opt()
    """Custom automation profiles by name (custom profiles, PROTOCOL.md §16). Checked here."""
    max_tool_output_bytes: int | None = opt()
    """A tool output larger than this many bytes (a string's UTF-8 text, any other output's JSON
    text) is cut for the record, the notifications and the model; the full output is kept under the
    state dir (limits, PROTOCOL.md §2). Default 1,048,576 (1 MiB); from 1 to 16,777,216 (16 MiB), so
    that every record fits one frame."""
    shell_env: list[str] | None = opt()
    """Names of environment variables of the daemon's own environment passed through to
    ``builtin/shell`` commands, beyond its fixed allow-list (``PATH``, ``LANG``, ``LC_*``, ``TERM``,
    ``TZ``, and ``HOME`` set to the sandbox root; see docs/security.md). Names only, never
    ``NAME=value``; a name not set in the daemon's environment is left out. Checked here."""
    token: str | None = opt()
    """The ``--tcp`` access token (TCP, PROTOCOL.md §2); required on TCP, ignored on stdio."""
    mcp_servers: list[McpServerEntry] | None = opt()
    """MCP servers for every run, started in the background once ``initialize`` is answered (MCP
    servers, PROTOCOL.md §7). Checked here."""
    checkpoints: bool | None = opt()
    """``false``: no run of this daemon takes checkpoints (``run/start``'s ``checkpoints``
    cannot turn them back on). Default ``true``."""


@attrs.define
class ClientCapabilitiesCleverAgents:
    """``initialize`` → ``capabilities.experimental.cleveragents``: what the client serves."""

    permissions: bool | None = opt()
    """``true``: the client answers ``permission/request``. Otherwise every "ask" becomes a
    refusal."""
    llm: bool | None = opt()
    """``true``: the client answers ``llm/generate``, so runs may use the ``client`` model."""
    elicitation: bool | None = opt()
    """``true``: the client answers ``mcp/elicit`` (an MCP server asking the user).
    Otherwise every elicitation is declined for it."""


@attrs.define
class DaemonCapabilities:
    """The ``initialize`` result's ``capabilities.experimental.cleveragents``."""

    protocol_version: int
    """The protocol version, the integer ``1``."""
    methods: list[str]
    """Every method name of the protocol, in both directions."""
    builtin_tools: list[str]
    """Names of the built-in tools."""
