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
with the same flags (:mod:`~cleveragents.workspace._bwrap`); a machine without user
namespaces makes the probe fail, and the tool then runs unconfined. An unconfined
command's output says so (``confined: false`` and a ``note`` giving the reason);
profiles that require confinement refuse it beforehand
(:mod:`cleveragents.workspace.profiles`, via ``spec.metadata["confinement"]``).

``confined: true`` means the command really ran inside that sandbox: its first line
writes a marker to a pipe only the finished sandbox can reach. A bwrap that fails to set
up (a bind that fails, an option it lacks) exits 1 before running anything; the call then
fails with bwrap's own message instead of reporting the command confined.

In both modes: the working directory is the sandbox root, stdin is empty, and each of
stdout/stderr is capped (head and tail kept, the middle replaced by a marker). No command
gains privileges through a setuid or setgid file (bubblewrap sets ``no_new_privs``; an
unconfined command runs under ``setpriv --no-new-privs`` when ``setpriv`` is there), and
after a command run as root the files it left lose their setuid and setgid bits
(:mod:`~cleveragents.workspace._setid`). The
command's whole process group is killed when the command ends, whether it timed out, was
cancelled or exited normally, so a background job (``sleep 1000 &``) does not outlive it
(:mod:`~cleveragents.workspace._process`, :mod:`~cleveragents.workspace._capture`).

The environment is built from nothing by allow-list (:func:`default_env`, in
:mod:`~cleveragents.workspace._shell_env`): ``PATH``,
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
import logging
import os
import shutil
import signal
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from cleveragents.tool import JSONValue, ToolAnnotations, ToolSpec

from ._bwrap import (
    BWRAP_ENV,
    DEFAULT_HIDDEN_PATHS,
    Confinement,
    bwrap_argv,
    common_flags,
    marked,
    probe,
)
from ._capture import Capture, drain, partial
from ._errors import WorkspaceToolError
from ._limits import WorkspaceLimits
from ._pinned import denied_beneath, root_descriptor
from ._process import KILL_GRACE_S, exited, terminate
from ._sandbox import sandbox_root
from ._setid import MAX_SETID_SCAN_ENTRIES, SetidSweep, running_as_root, strip_setid
from ._shell_env import (
    BASE_ENV_NAMES,
    DEFAULT_PATH,
    ENV_NAME,
    check_env_names,
    default_env,
    protect_process,
)

logger = logging.getLogger(__name__)

__all__ = [
    "BASE_ENV_NAMES",
    "BWRAP_ENV",
    "DEFAULT_HIDDEN_PATHS",
    "DEFAULT_PATH",
    "ENV_NAME",
    "Confinement",
    "ShellTool",
    "check_env_names",
    "default_env",
    "protect_process",
]


@attrs.frozen
class _Ran:
    """A command that ran to its exit: the process, its two streams, and whether both
    were read to their end (a process that left the group may hold them open)."""

    proc: asyncio.subprocess.Process
    out: Capture
    err: Capture
    drained: bool


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
        self._setpriv: str | None = None

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

    def _probe(self) -> Confinement:
        confinement, self._userns = probe(
            self._bwrap_choice, self.hidden_paths, self.extra_ro_paths
        )
        self._setpriv = shutil.which("setpriv")
        return confinement

    def bwrap_argv(
        self,
        bwrap: str,
        root_real: str,
        command: str,
        root_fd: int | None = None,
        started_fd: int | None = None,
    ) -> list[str]:
        """The full bwrap command line for one command, with this tool's mounts (see
        :func:`~cleveragents.workspace._bwrap.bwrap_argv`)."""
        flags = common_flags(self._userns, self.hidden_paths, self.extra_ro_paths)
        hidden = [each.real for each in denied_beneath(root_real)]  # the state dir
        return bwrap_argv(bwrap, flags, root_real, command, root_fd, started_fd, hidden)

    # ------------------------------------------------------------------ running

    async def __call__(self, inputs: dict[str, JSONValue]) -> dict[str, JSONValue]:
        root = sandbox_root(inputs)
        command, timeout_ms = self._arguments(inputs)
        confinement = await self.aconfinement()
        confined = confinement.confined and confinement.bwrap is not None
        # Read back after the exit: did the command get inside the sandbox at all?
        started_r, started_w = os.pipe() if confined else (-1, -1)
        sweep = SetidSweep()
        as_root, since_ns = running_as_root(), time.time_ns()
        try:
            ran = await self._run(root, command, confinement, started_w, timeout_ms)
            if confined and not marked(started_r):
                raise WorkspaceToolError(
                    "bubblewrap could not set up the sandbox, so the command did not run "
                    f"(bwrap exited with status {ran.proc.returncode})" + partial(ran.err, "stderr")
                )
        finally:
            for fd in (started_r, started_w):
                if fd != -1:
                    os.close(fd)
            if as_root:  # also after a timeout or a cancel: what was left is left
                sweep = await asyncio.shield(asyncio.to_thread(_sweep, root, since_ns))
        return self._output(ran, confinement, sweep)

    def _arguments(self, inputs: dict[str, JSONValue]) -> tuple[str, int]:
        """The command, and its timeout in ms, clamped to ``max_shell_timeout_ms``."""
        command = inputs.get("command")
        if not isinstance(command, str) or not command:
            raise WorkspaceToolError("command must be a non-empty string")
        timeout_ms = inputs.get("timeout_ms") or self.limits.default_shell_timeout_ms
        if not isinstance(timeout_ms, int) or timeout_ms < 1:
            raise WorkspaceToolError("timeout_ms must be a positive integer")
        return command, min(timeout_ms, self.limits.max_shell_timeout_ms)

    async def _run(
        self, root: str, command: str, confinement: Confinement, started_w: int, timeout_ms: int
    ) -> _Ran:
        """Run the command to its exit or its timeout; its whole group is killed after."""
        proc = await self._spawn(root, command, confinement, started_w)
        cap = self.limits.max_shell_output_bytes
        out_cap, err_cap = Capture(cap), Capture(cap)
        out_task = asyncio.ensure_future(drain(proc.stdout, out_cap))
        err_task = asyncio.ensure_future(drain(proc.stderr, err_cap))
        wait_task = asyncio.ensure_future(proc.wait())
        exit_task = asyncio.ensure_future(exited(proc))
        tasks: set[asyncio.Future[Any]] = {out_task, err_task, wait_task, exit_task}
        try:
            await asyncio.wait({exit_task}, timeout=timeout_ms / 1000)
        except asyncio.CancelledError:
            await terminate(proc, tasks)
            raise
        if not exit_task.done():
            await terminate(proc, tasks)
            raise WorkspaceToolError(
                f"command timed out after {timeout_ms} ms and was killed"
                + partial(out_cap, "stdout")
                + partial(err_cap, "stderr")
            )
        # The command is over: whatever it left running in its group goes with it.
        await terminate(proc, tasks)
        return _Ran(proc, out_cap, err_cap, out_task.done() and err_task.done())

    def _output(
        self, ran: _Ran, confinement: Confinement, sweep: SetidSweep
    ) -> dict[str, JSONValue]:
        """The tool's output, with a note on what was cut, on a missing confinement and
        on setuid or setgid bits taken off."""
        out, err = ran.out.result(), ran.err.result()
        code = ran.proc.returncode if ran.proc.returncode is not None else -signal.SIGKILL
        notes = []
        if not ran.drained:
            notes.append(
                "a process that left the command's process group kept its output open; "
                f"the output was cut {KILL_GRACE_S:g} s after the command ended"
            )
        if not confinement.confined:
            notes.append(
                f"NOT CONFINED: {confinement.reason}; the command ran with the daemon's "
                "own access to the filesystem and the network, and could read whatever "
                "the daemon can, its environment included"
            )
        if sweep.stripped:
            shown = ", ".join(sweep.stripped[:10]) + (", ..." if len(sweep.stripped) > 10 else "")
            notes.append(
                f"took the setuid/setgid bits off {len(sweep.stripped)} file(s) the command "
                f"left ({shown}): made as root, they would run as root for anyone"
            )
        if not sweep.complete:
            notes.append(
                f"the check for setuid/setgid files stopped after {MAX_SETID_SCAN_ENTRIES} "
                "entries of the sandbox root; files beyond were not checked"
            )
        if out.truncated or err.truncated:
            notes.append(
                f"output over {self.limits.max_shell_output_bytes} bytes per stream "
                "was cut in the middle"
            )
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
                if self._setpriv is not None:  # as bwrap does: no setuid file raises it
                    argv = [self._setpriv, "--no-new-privs", *argv]
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
                await terminate(proc, {asyncio.ensure_future(proc.wait())})
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
            validators_on_first_use=True,  # the project's own schema: compiled by a test
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


def _sweep(root: str, since_ns: int) -> SetidSweep:
    """:func:`strip_setid` over the run's pinned root (blocking)."""
    root_fd = root_descriptor(root)
    try:
        sweep = strip_setid(root_fd, since_ns)
    finally:
        os.close(root_fd)
    if sweep.stripped:
        logger.warning(
            "took the setuid/setgid bits off %d file(s) a command left under %s: %s",
            len(sweep.stripped), root, ", ".join(sweep.stripped[:10]),
        )  # fmt: skip
    return sweep
