"""``builtin/shell``: run a command in the sandbox root, confined by bubblewrap when it can.

Under ``bwrap`` (see :meth:`ShellTool.bwrap_argv` for the exact flags) the command sees:

* the whole system **read-only** (``--ro-bind / /``), with ``/home``, ``/root``,
  ``/tmp``, ``/var/tmp``, ``/run``, ``/mnt``, ``/media`` and ``/srv`` replaced by empty
  private tmpfs (``hidden_paths``), so other projects, the user's secrets and the
  daemons' Unix sockets are out of reach;
* the sandbox root bound **read-write** at its own path, and nothing else writable
  except those throwaway tmpfs;
* **no network** (``--unshare-net``: only a private loopback), its own PID, IPC and UTS
  namespaces, a user namespace with every capability dropped (so even root cannot remount
  ``/`` read-write), a new session (no ``TIOCSTI`` into the caller's terminal), and death
  with its parent.

Whether bwrap works is probed once per :class:`ShellTool`, at first use, by running it
with the same flags; a machine without user namespaces makes the probe fail, and the tool
then runs unconfined. An unconfined command's output says so (``confined: false`` and a
``note`` giving the reason); profiles that require confinement refuse it beforehand
(:mod:`cleveragents.workspace.profiles`, via ``spec.metadata["confinement"]``).

In both modes: the working directory is the sandbox root, stdin is empty, the
environment is the daemon's minus variables whose names look secret (``*KEY*``,
``*TOKEN*``, ``*SECRET*``, ``*PASSW*``, ``*CREDENTIAL*``, ``*AUTH*``...), the timeout
kills the whole process group, and each of stdout/stderr is capped (head and tail kept,
the middle replaced by a marker).

This module knows nothing of profiles or the runner.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from cleveragents.tool._spec import ToolAnnotations, ToolSpec
from cleveragents.tool._types import JSONValue

from ._sandbox import WorkspaceToolError, sandbox_root
from .files import WorkspaceLimits

BWRAP_ENV = "CLEVERAGENTS_BWRAP"
"""``off`` disables confinement; a path selects the bwrap binary; unset means PATH lookup."""

DEFAULT_HIDDEN_PATHS: tuple[str, ...] = (
    "/home",
    "/root",
    "/tmp",
    "/var/tmp",
    "/run",
    "/mnt",
    "/media",
    "/srv",
)
"""Directories replaced by an empty tmpfs inside the sandbox (the root is bound back).

``/run`` (and so ``/var/run``) is hidden for its Unix sockets: ``--unshare-net`` does not
stop a ``connect()`` to a socket file (Docker's, D-Bus's, a database's), even on a
read-only mount."""

SECRET_ENV_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE", re.IGNORECASE)
"""Environment variables whose names match are not passed to commands."""

_PROBE_TIMEOUT_S = 10.0
_KILL_GRACE_S = 2.0
_CHUNK = 65536
_OFF_VALUES = frozenset({"off", "0", "false", "no", "none"})


@attrs.define(frozen=True, slots=True)
class Confinement:
    """Whether commands run under bwrap, which binary, and why (or why not)."""

    confined: bool
    bwrap: str | None
    reason: str


@attrs.define(slots=True)
class _Captured:
    text: str
    total_bytes: int
    truncated: bool


async def _drain(stream: asyncio.StreamReader | None, cap: int) -> _Captured:
    """Read a stream to EOF, keeping its first and last bytes within ``cap``."""
    if stream is None:
        return _Captured("", 0, False)
    first = bytearray()
    tail = bytearray()
    half = cap // 2
    total = 0
    while chunk := await stream.read(_CHUNK):
        total += len(chunk)
        room = cap - len(first)
        if room > 0:
            first += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            tail += chunk
            if len(tail) > half:
                del tail[: len(tail) - half]
    if total <= cap:
        return _Captured(first.decode("utf-8", "replace"), total, False)
    whole = first + tail if total - cap <= half else None
    head = first[: cap - half]
    last = whole[-half:] if whole is not None and half else tail
    marker = f"\n[... {total - cap} bytes omitted: output over {cap} bytes ...]\n"
    text = head.decode("utf-8", "replace") + marker + bytes(last).decode("utf-8", "replace")
    return _Captured(text, total, True)


def default_env() -> dict[str, str]:
    """The daemon's environment minus variables whose names look like secrets."""
    return {k: v for k, v in os.environ.items() if not SECRET_ENV_NAME.search(k)}


class ShellTool:
    """The shell tool: holds the limits, the bwrap choice and the cached probe.

    ``bwrap="auto"`` (the default) honours ``$CLEVERAGENTS_BWRAP`` (``off`` or a path) and
    otherwise looks ``bwrap`` up on ``PATH``; ``bwrap=None`` never confines; any other
    string is the bwrap executable to use. ``hidden_paths`` are masked by tmpfs inside the
    sandbox, ``extra_ro_paths`` are bound read-only on top (for example a toolchain under
    ``$HOME``). ``env`` replaces the default scrubbed environment.
    """

    def __init__(
        self,
        limits: WorkspaceLimits | None = None,
        *,
        bwrap: str | None = "auto",
        hidden_paths: Sequence[str] = DEFAULT_HIDDEN_PATHS,
        extra_ro_paths: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.limits = limits or WorkspaceLimits()
        self._bwrap_choice = bwrap
        self.hidden_paths = tuple(hidden_paths)
        self.extra_ro_paths = tuple(extra_ro_paths)
        self._env = dict(env) if env is not None else None
        self._lock = threading.Lock()
        self._confinement: Confinement | None = None
        self._userns = True

    # ------------------------------------------------------------------ confinement

    def confinement(self) -> Confinement:
        """Probe bwrap once (blocking, a few milliseconds) and cache the answer."""
        with self._lock:
            if self._confinement is None:
                self._confinement = self._probe()
            return self._confinement

    async def aconfinement(self) -> Confinement:
        """:meth:`confinement` without blocking the event loop on the first probe."""
        if self._confinement is not None:
            return self._confinement
        return await asyncio.to_thread(self.confinement)

    async def is_confined(self) -> bool:
        """For ``ProfilePolicy``: will the next command run under bwrap?"""
        return (await self.aconfinement()).confined

    def _locate(self) -> tuple[str | None, str]:
        choice = self._bwrap_choice
        if choice is None:
            return None, "confinement is disabled for this shell tool"
        if choice == "auto":
            from_env = os.environ.get(BWRAP_ENV, "").strip()
            if from_env.lower() in _OFF_VALUES:
                return None, f"confinement is disabled by {BWRAP_ENV}={from_env}"
            choice = from_env or "bwrap"
        found = shutil.which(choice)
        if found is None:
            return None, f"bubblewrap ({choice!r}) was not found"
        return found, ""

    def _probe(self) -> Confinement:
        path, why = self._locate()
        if path is None:
            return Confinement(False, None, why)
        error = ""
        # Without a user namespace (refused by the kernel, or a setuid bwrap) the sandbox
        # still works; --cap-drop ALL is then what keeps root from remounting / writable.
        for userns in (True, False):
            argv = [path, *self._common_flags(userns), "true"]
            try:
                done = subprocess.run(
                    argv,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=_PROBE_TIMEOUT_S,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                error = str(exc)
                continue
            if done.returncode == 0:
                self._userns = userns
                return Confinement(True, path, "commands run under bubblewrap")
            lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
            error = lines[-1] if lines else f"exit status {done.returncode}"
        return Confinement(
            False, path, f"bubblewrap ({path}) cannot create a sandbox here: {error}"
        )

    def _common_flags(self, userns: bool) -> list[str]:
        flags = ["--unshare-user"] if userns else []
        flags += ["--cap-drop", "ALL", "--unshare-net", "--unshare-pid", "--unshare-ipc"]
        flags += ["--unshare-uts", "--die-with-parent", "--new-session", "--ro-bind", "/", "/"]
        for hidden in self.hidden_paths:
            real = os.path.realpath(hidden)
            if real != os.sep and os.path.isdir(real):
                flags += ["--tmpfs", real]
        flags += ["--dev", "/dev", "--proc", "/proc"]
        for extra in self.extra_ro_paths:
            real = os.path.realpath(extra)
            if os.path.exists(real):
                flags += ["--ro-bind", real, real]
        return flags

    def bwrap_argv(self, bwrap: str, root_real: str, command: str) -> list[str]:
        """The full bwrap command line for one command (order matters: later mounts win)."""
        return [
            bwrap,
            *self._common_flags(self._userns),
            "--bind",
            root_real,
            root_real,
            "--chdir",
            root_real,
            "/bin/sh",
            "-c",
            command,
        ]

    # ------------------------------------------------------------------ running

    async def __call__(self, inputs: dict[str, JSONValue]) -> dict[str, JSONValue]:
        root = sandbox_root(inputs)
        command = inputs.get("command")
        if not isinstance(command, str) or not command:
            raise WorkspaceToolError("command must be a non-empty string")
        timeout_ms = inputs.get("timeout_ms") or self.limits.default_shell_timeout_ms
        if not isinstance(timeout_ms, int) or timeout_ms < 1:
            raise WorkspaceToolError("timeout_ms must be a positive integer")
        timeout_ms = min(timeout_ms, self.limits.max_shell_timeout_ms)
        confinement = await self.aconfinement()
        if confinement.confined and confinement.bwrap is not None:
            argv = self.bwrap_argv(confinement.bwrap, root, command)
        else:
            argv = ["/bin/sh", "-c", command]
        env = self._env if self._env is not None else default_env()
        spawn = asyncio.ensure_future(
            asyncio.create_subprocess_exec(
                *argv,
                cwd=root,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        )
        try:
            # Shielded: cancelled mid-spawn, asyncio would kill only the shell, not its
            # process group, and then wait for the orphans to close the pipes.
            proc = await asyncio.shield(spawn)
        except asyncio.CancelledError:
            proc = await spawn
            await _terminate(proc, {asyncio.ensure_future(proc.wait())})
            raise
        cap = self.limits.max_shell_output_bytes
        out_task = asyncio.ensure_future(_drain(proc.stdout, cap))
        err_task = asyncio.ensure_future(_drain(proc.stderr, cap))
        wait_task = asyncio.ensure_future(proc.wait())
        tasks: set[asyncio.Future[Any]] = {out_task, err_task, wait_task}
        try:
            _done, pending = await asyncio.wait(tasks, timeout=timeout_ms / 1000)
        except asyncio.CancelledError:
            await _terminate(proc, tasks)
            raise
        if pending:
            await _terminate(proc, tasks)
            raise WorkspaceToolError(
                f"command timed out after {timeout_ms} ms and was killed"
                + _partial(out_task, "stdout")
                + _partial(err_task, "stderr")
            )
        out, err = out_task.result(), err_task.result()
        code = wait_task.result()
        notes = []
        if not confinement.confined:
            notes.append(
                f"NOT CONFINED: {confinement.reason}; the command ran with the daemon's "
                "own access to the filesystem and the network"
            )
        if out.truncated or err.truncated:
            notes.append(f"output over {cap} bytes per stream was cut in the middle")
        output: dict[str, JSONValue] = {
            "stdout": out.text,
            "stderr": err.text,
            "exit_code": 128 - code if code < 0 else code,
            "confined": confinement.confined,
            "truncated": out.truncated or err.truncated,
        }
        if notes:
            output["note"] = "; ".join(notes)
        return output

    def spec(self) -> ToolSpec:
        """``builtin/shell`` bound to this tool (its limits, bwrap choice and probe)."""
        lim = self.limits
        properties: dict[str, Any] = {
            "command": {"type": "string", "minLength": 1},
            "timeout_ms": {"type": "integer", "minimum": 1, "maximum": lim.max_shell_timeout_ms},
        }
        return ToolSpec(
            name="builtin/shell",
            description=(
                "Run a command with /bin/sh -c in the sandbox root. When confined "
                "(bubblewrap), only the sandbox root is writable and there is no network; "
                "the output's 'confined' says which. Stdin is empty. The default timeout "
                f"is {lim.default_shell_timeout_ms} ms (at most {lim.max_shell_timeout_ms}); "
                f"stdout and stderr are each capped at {lim.max_shell_output_bytes} bytes."
            ),
            input_schema={
                "type": "object",
                "properties": properties,
                "required": ["command"],
                "additionalProperties": False,
            },
            output_schema={
                "type": "object",
                "properties": {
                    "stdout": {"type": "string"},
                    "stderr": {"type": "string"},
                    "exit_code": {"type": "integer"},
                    "confined": {"type": "boolean"},
                    "truncated": {"type": "boolean"},
                    "note": {"type": "string"},
                },
                "required": ["stdout", "stderr", "exit_code", "confined", "truncated"],
                "additionalProperties": False,
            },
            handler=self,
            annotations=ToolAnnotations(destructive=True),
            kind="execute",
            timeout_s=lim.max_shell_timeout_ms / 1000 + 30,
            metadata={"confinement": self.is_confined},
        )


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


async def _terminate(proc: asyncio.subprocess.Process, tasks: set[asyncio.Future[Any]]) -> None:
    """Kill the command's process group and collect what it wrote, within a grace period.

    The group is signalled again once the leader is dead or the grace period is over: a
    defence against a child forked while the first signal was delivered. A process that
    left the group (``setsid``) escapes both when unconfined; under bwrap the PID
    namespace dies with its init.
    """
    _kill_group(proc)
    try:
        await asyncio.wait(tasks, timeout=_KILL_GRACE_S)
    finally:
        _kill_group(proc)
        for task in tasks:
            if not task.done():
                task.cancel()


def _partial(task: asyncio.Future[_Captured], name: str) -> str:
    if not task.done() or task.cancelled():
        return ""
    text = task.result().text
    if not text:
        return ""
    return f"\n{name} (last 2000 characters):\n{text[-2000:]}"
