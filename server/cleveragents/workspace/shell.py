"""``builtin/shell``: run a command in the sandbox root, confined by bubblewrap when it can.

Under ``bwrap`` (see :meth:`ShellTool.bwrap_argv` for the exact flags) the command sees:

* the whole system **read-only** (``--ro-bind / /``), with ``/home``, ``/root``,
  ``/tmp``, ``/var/tmp``, ``/run``, ``/mnt``, ``/media`` and ``/srv`` replaced by empty
  private tmpfs (``hidden_paths``), so other projects, the user's secrets and the
  daemons' Unix sockets are out of reach;
* the sandbox root bound **read-write** at its own path (``--bind-fd`` of the run's
  pinned root descriptor, so a swap of the root's name cannot change what is bound),
  and nothing else writable except those throwaway tmpfs;
* **no network** (``--unshare-net``: only a private loopback), its own PID, IPC and UTS
  namespaces, a user namespace with every capability dropped (so even root cannot remount
  ``/`` read-write), a new session (no ``TIOCSTI`` into the caller's terminal), and death
  with its parent.

Whether bwrap works is probed once per :class:`ShellTool`, at first use, by running it
with the same flags; a machine without user namespaces makes the probe fail, and the tool
then runs unconfined. An unconfined command's output says so (``confined: false`` and a
``note`` giving the reason); profiles that require confinement refuse it beforehand
(:mod:`cleveragents.workspace.profiles`, via ``spec.metadata["confinement"]``).

``confined: true`` means the command really ran inside that sandbox: its first line
writes a marker to a pipe only the finished sandbox can reach. A bwrap that fails to set
up (a bind that fails, an option it lacks) exits 1 before running anything; the call then
fails with bwrap's own message instead of reporting the command confined.

In both modes: the working directory is the sandbox root, stdin is empty, and each of
stdout/stderr is capped (head and tail kept, the middle replaced by a marker). The
command's whole process group is killed when the command ends, whether it timed out, was
cancelled or exited normally, so a background job (``sleep 1000 &``) does not outlive it.

The environment is built from nothing by allow-list (:func:`default_env`): ``PATH``,
``HOME`` (the sandbox root), ``LANG``, ``LC_*``, ``TERM`` and ``TZ``, plus the names in
:attr:`ShellTool.pass_env` (the daemon sets them from ``initializationOptions.shellEnv``).
Nothing else is inherited, so a key named by a model spec's ``apiKeyEnv``, a proxy URL
with a password or a ``DATABASE_URL`` never reaches a command unless the user names it.
That holds for the command's environment only: an *unconfined* command can still read
whatever the daemon can (its files, and ``/proc/<daemon>/environ`` unless
:func:`protect_process` made the daemon non-dumpable), and its record's ``note`` says so.

This module knows nothing of profiles or the runner.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from cleveragents.tool._spec import ToolAnnotations, ToolSpec
from cleveragents.tool._types import JSONValue

from ._sandbox import WorkspaceToolError, root_descriptor, sandbox_root
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

BASE_ENV_NAMES: tuple[str, ...] = ("PATH", "LANG", "TERM", "TZ")
"""Passed through from the daemon's environment when set (with every ``LC_*``)."""

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
"""``PATH`` for commands when the daemon has none."""

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""What a pass-through name must look like (no ``=``, no NUL, no wildcard)."""

_PR_SET_DUMPABLE = 4

_PROBE_TIMEOUT_S = 10.0
_KILL_GRACE_S = 2.0
_CHUNK = 65536
_OFF_VALUES = frozenset({"off", "0", "false", "no", "none"})
_STARTED = b"s"  # written by a confined command's first line: it is inside the sandbox


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


class _Capture:
    """One stream's first ``cap`` bytes and last ``cap // 2``; readable at any time, so a
    drain cut off (timeout, a pipe held open) still gives what it read."""

    __slots__ = ("cap", "first", "tail", "total")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.first = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.cap - len(self.first)
        if room > 0:
            self.first += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            half = self.cap // 2
            if len(self.tail) > half:
                del self.tail[: len(self.tail) - half]

    def result(self) -> _Captured:
        cap, first, tail, total = self.cap, self.first, self.tail, self.total
        if total <= cap:
            return _Captured(first.decode("utf-8", "replace"), total, False)
        half = cap // 2
        whole = first + tail if total - cap <= half else None
        head = first[: cap - half]
        last = whole[-half:] if whole is not None and half else tail
        marker = f"\n[... {total - cap} bytes omitted: output over {cap} bytes ...]\n"
        text = head.decode("utf-8", "replace") + marker + bytes(last).decode("utf-8", "replace")
        return _Captured(text, total, True)


async def _drain(stream: asyncio.StreamReader | None, capture: _Capture) -> None:
    """Read a stream to EOF into ``capture``."""
    if stream is None:
        return
    while chunk := await stream.read(_CHUNK):
        capture.feed(chunk)


async def _exited(proc: asyncio.subprocess.Process) -> None:
    """Return once the process has exited, whoever still holds its pipes.

    ``Process.wait()`` also waits for stdout and stderr to close, so a background job
    holding them (``sleep 1000 &``) would keep a finished command "running" until its
    timeout. A pidfd becomes readable at the exit itself. Without pidfds (not Linux, an
    old kernel) this falls back to ``wait()``, and such a command runs to its timeout.
    """
    try:
        fd = os.pidfd_open(proc.pid)
    except ProcessLookupError:
        return  # already exited and reaped
    except (AttributeError, OSError):
        await proc.wait()
        return
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, readable)
    try:
        await ready
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def check_env_names(names: Sequence[str]) -> tuple[str, ...]:
    """``names`` as a tuple, or ``ValueError`` naming the first one that is not a variable
    name (``shellEnv`` lists names, never ``NAME=value`` pairs or patterns)."""
    if isinstance(names, str):
        raise ValueError("the pass-through list must be a list of names, not one string")
    for name in names:
        if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not an environment variable name")
    return tuple(names)


def default_env(home: str, pass_env: Sequence[str] = ()) -> dict[str, str]:
    """A command's environment: the allow-list, ``HOME=home``, then ``pass_env``.

    Built from nothing, not by removing what looks secret: a filter by name let through
    ``HTTPS_PROXY=http://user:pw@...``, ``DATABASE_URL`` and any key named freely by a
    model spec's ``apiKeyEnv``. ``HOME`` is always ``home``, even if listed in ``pass_env``.
    """
    source = os.environ
    env = {name: source[name] for name in BASE_ENV_NAMES if name in source}
    env.update({k: v for k, v in source.items() if k.startswith("LC_")})
    env.setdefault("PATH", DEFAULT_PATH)
    env.update({name: source[name] for name in pass_env if name in source})
    env["HOME"] = home
    return env


def protect_process() -> bool:
    """Make this process non-dumpable, so its children cannot read its ``/proc`` entries.

    ``prctl(PR_SET_DUMPABLE, 0)`` makes ``/proc/<pid>/environ``, ``mem``, ``fd/`` and the
    like owned by root, and refuses ``ptrace`` from the same user: an unconfined command
    then cannot read the daemon's keys from its environment. Children get their own
    dumpable flag back at ``execve``, so they work as usual. A no-op (``False``) off
    Linux and for root, whom the flag does not stop. Returns whether it was applied.
    """
    if not sys.platform.startswith("linux") or os.geteuid() == 0:
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


class ShellTool:
    """The shell tool: holds the limits, the bwrap choice and the cached probe.

    ``bwrap="auto"`` (the default) honours ``$CLEVERAGENTS_BWRAP`` (``off`` or a path) and
    otherwise looks ``bwrap`` up on ``PATH``; ``bwrap=None`` never confines; any other
    string is the bwrap executable to use. ``hidden_paths`` are masked by tmpfs inside the
    sandbox, ``extra_ro_paths`` are bound read-only on top (for example a toolchain under
    ``$HOME``). ``pass_env`` names the daemon's variables that commands also receive, on
    top of the allow-list (see :func:`default_env`); the daemon sets it from
    ``initializationOptions.shellEnv`` through :meth:`set_pass_env`. ``env``, when given,
    is the whole environment instead (tests, embedders), with no allow-list applied.
    """

    def __init__(
        self,
        limits: WorkspaceLimits | None = None,
        *,
        bwrap: str | None = "auto",
        hidden_paths: Sequence[str] = DEFAULT_HIDDEN_PATHS,
        extra_ro_paths: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        pass_env: Sequence[str] = (),
    ) -> None:
        self.limits = limits or WorkspaceLimits()
        self._bwrap_choice = bwrap
        self.hidden_paths = tuple(hidden_paths)
        self.extra_ro_paths = tuple(extra_ro_paths)
        self._env = dict(env) if env is not None else None
        self.pass_env: tuple[str, ...] = check_env_names(pass_env)
        self._lock = threading.Lock()
        self._confinement: Confinement | None = None
        self._userns = True

    def set_pass_env(self, names: Sequence[str]) -> None:
        """Replace the pass-through list (``ValueError`` for a name that is not one);
        later commands see it."""
        self.pass_env = check_env_names(names)

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

    def bwrap_argv(
        self,
        bwrap: str,
        root_real: str,
        command: str,
        root_fd: int | None = None,
        started_fd: int | None = None,
    ) -> list[str]:
        """The full bwrap command line for one command (order matters: later mounts win).

        With ``root_fd`` (passed to bwrap), the root mounted is that open directory,
        whatever its name leads to by the time bwrap runs (the run's pinned root).

        With ``started_fd`` (the write end of a pipe, passed to bwrap), the command runs
        behind a one-line ``/bin/sh`` that first writes :data:`_STARTED` to it: only a
        command that got inside the finished sandbox can write it. bwrap reports a failed
        setup (a bind that fails, say) as exit status 1 and a line on stderr, which a
        command can print too; the marker is what tells them apart. ``dash`` cannot
        name a descriptor above 9, so the marker goes through ``/proc/self/fd``."""
        bind = ["--bind", root_real] if root_fd is None else ["--bind-fd", str(root_fd)]
        run = ["/bin/sh", "-c", command]
        if started_fd is not None:
            mark = f"printf {_STARTED.decode()} > /proc/self/fd/{started_fd}"
            run = ["/bin/sh", "-c", f'{mark} && exec /bin/sh -c "$1"', "sh", command]
        return [
            bwrap,
            *self._common_flags(self._userns),
            *bind,
            root_real,
            "--chdir",
            root_real,
            *run,
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
        confined = confinement.confined and confinement.bwrap is not None
        # Read back after the exit: did the command get inside the sandbox at all?
        started_r, started_w = os.pipe() if confined else (-1, -1)
        try:
            proc = await self._spawn(root, command, confinement, started_w)
            cap = self.limits.max_shell_output_bytes
            out_cap, err_cap = _Capture(cap), _Capture(cap)
            out_task = asyncio.ensure_future(_drain(proc.stdout, out_cap))
            err_task = asyncio.ensure_future(_drain(proc.stderr, err_cap))
            wait_task = asyncio.ensure_future(proc.wait())
            exit_task = asyncio.ensure_future(_exited(proc))
            tasks: set[asyncio.Future[Any]] = {out_task, err_task, wait_task, exit_task}
            try:
                await asyncio.wait({exit_task}, timeout=timeout_ms / 1000)
            except asyncio.CancelledError:
                await _terminate(proc, tasks)
                raise
            if not exit_task.done():
                await _terminate(proc, tasks)
                raise WorkspaceToolError(
                    f"command timed out after {timeout_ms} ms and was killed"
                    + _partial(out_cap, "stdout")
                    + _partial(err_cap, "stderr")
                )
            # The command is over: whatever it left running in its group goes with it.
            await _terminate(proc, tasks)
            if confined and not _marked(started_r):
                raise WorkspaceToolError(
                    "bubblewrap could not set up the sandbox, so the command did not run "
                    f"(bwrap exited with status {proc.returncode})" + _partial(err_cap, "stderr")
                )
        finally:
            for fd in (started_r, started_w):
                if fd != -1:
                    os.close(fd)
        out, err = out_cap.result(), err_cap.result()
        code = proc.returncode if proc.returncode is not None else -signal.SIGKILL
        notes = []
        if not (out_task.done() and err_task.done()):
            notes.append(
                "a process that left the command's process group kept its output open; "
                f"the output was cut {_KILL_GRACE_S:g} s after the command ended"
            )
        if not confinement.confined:
            notes.append(
                f"NOT CONFINED: {confinement.reason}; the command ran with the daemon's "
                "own access to the filesystem and the network, and could read whatever "
                "the daemon can, its environment included"
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

    async def _spawn(
        self, root: str, command: str, confinement: Confinement, started_w: int
    ) -> asyncio.subprocess.Process:
        """Start the command in the root (under bwrap when ``confinement`` says so).

        The root is used as an open directory (the run's pinned one): bwrap binds it
        (``--bind-fd``) and the unconfined shell starts in it through ``/proc/self/fd``,
        so a swap of the root's name between the check and the spawn cannot move the
        command elsewhere. ``started_w`` is the marker pipe of a confined command."""
        root_fd = root_descriptor(root)
        try:
            if confinement.confined and confinement.bwrap is not None:
                argv = self.bwrap_argv(confinement.bwrap, root, command, root_fd, started_w)
                pass_fds: tuple[int, ...] = (root_fd, started_w)
            else:
                argv, pass_fds = ["/bin/sh", "-c", command], ()
            env = self._env if self._env is not None else default_env(root, self.pass_env)
            spawn = asyncio.ensure_future(
                asyncio.create_subprocess_exec(
                    *argv,
                    cwd=f"/proc/self/fd/{root_fd}",
                    pass_fds=pass_fds,
                    env=env,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    start_new_session=True,
                )
            )
            try:
                # Shielded: cancelled mid-spawn, asyncio would kill only the shell, not
                # its process group, and then wait for the orphans to close the pipes.
                return await asyncio.shield(spawn)
            except asyncio.CancelledError:
                proc = await spawn
                await _terminate(proc, {asyncio.ensure_future(proc.wait())})
                raise
        finally:
            os.close(root_fd)

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


def _marked(started_r: int) -> bool:
    """Whether the confined command's marker arrived (read without waiting)."""
    os.set_blocking(started_r, False)
    try:
        return os.read(started_r, len(_STARTED)) == _STARTED
    except BlockingIOError:
        return False  # nothing written, and a writer still open


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


async def _terminate(proc: asyncio.subprocess.Process, tasks: set[asyncio.Future[Any]]) -> None:
    """Kill the command's process group and collect what it wrote, within a grace period.

    Called whenever a command ends (exit, timeout or cancel), so no background job of an
    unconfined command outlives it.

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


def _partial(capture: _Capture, name: str) -> str:
    text = capture.result().text
    if not text:
        return ""
    return f"\n{name} (last 2000 characters):\n{text[-2000:]}"
