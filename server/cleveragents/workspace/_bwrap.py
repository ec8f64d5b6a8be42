"""Bubblewrap for ``builtin/shell``: where it is, whether it works here, its command line.

* :func:`locate` honours the tool's choice and ``$CLEVERAGENTS_BWRAP`` (:data:`BWRAP_ENV`).
* :func:`probe` runs bwrap once with the real flags, with a user namespace and then
  without, and says whether commands can be confined (:class:`Confinement`).
* :func:`bwrap_argv` is the full command line of one command: the flags of
  :func:`common_flags`, the run's pinned root bound by descriptor (``--bind-fd``), and a
  one-line wrapper that writes :data:`STARTED` once inside the finished sandbox, which
  :func:`marked` reads back.

``docs/security.md`` §3 shows the command line and what it hides. This module runs no
command but the probe, and knows nothing of the tool's inputs or outputs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence

import attrs

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

STARTED = b"s"
"""Written by a confined command's first line: it got inside the sandbox."""

_PROBE_TIMEOUT_S = 10.0
_OFF_VALUES = frozenset({"off", "0", "false", "no", "none"})


@attrs.define(frozen=True, slots=True)
class Confinement:
    """Whether commands run under bwrap, which binary, and why (or why not)."""

    confined: bool
    bwrap: str | None
    reason: str


def locate(choice: str | None) -> tuple[str | None, str]:
    """The bwrap executable for ``choice`` (see :class:`~cleveragents.workspace.ShellTool`),
    or ``None`` and why there is none."""
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


def probe(
    choice: str | None, hidden_paths: Sequence[str], extra_ro_paths: Sequence[str]
) -> tuple[Confinement, bool]:
    """Whether bwrap can confine commands here, and whether with a user namespace.

    Without a user namespace (refused by the kernel, or a setuid bwrap) the sandbox
    still works; ``--cap-drop ALL`` is then what keeps root from remounting ``/``
    writable."""
    path, why = locate(choice)
    if path is None:
        return Confinement(False, None, why), True
    error = ""
    for userns in (True, False):
        argv = [path, *common_flags(userns, hidden_paths, extra_ro_paths), "true"]
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
            return Confinement(True, path, "commands run under bubblewrap"), userns
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        error = lines[-1] if lines else f"exit status {done.returncode}"
    reason = f"bubblewrap ({path}) cannot create a sandbox here: {error}"
    return Confinement(False, path, reason), True


def common_flags(
    userns: bool, hidden_paths: Sequence[str], extra_ro_paths: Sequence[str]
) -> list[str]:
    """The namespaces, the read-only system, the hidden directories and the extra
    read-only binds: every flag but the root's bind and the command."""
    flags = ["--unshare-user"] if userns else []
    flags += ["--cap-drop", "ALL", "--unshare-net", "--unshare-pid", "--unshare-ipc"]
    flags += ["--unshare-uts", "--die-with-parent", "--new-session", "--ro-bind", "/", "/"]
    for hidden in hidden_paths:
        real = os.path.realpath(hidden)
        if real != os.sep and os.path.isdir(real):
            flags += ["--tmpfs", real]
    flags += ["--dev", "/dev", "--proc", "/proc"]
    for extra in extra_ro_paths:
        real = os.path.realpath(extra)
        if os.path.exists(real):
            flags += ["--ro-bind", real, real]
    return flags


def bwrap_argv(
    bwrap: str,
    flags: Sequence[str],
    root_real: str,
    command: str,
    root_fd: int | None = None,
    started_fd: int | None = None,
    hidden: Sequence[str] = (),
) -> list[str]:
    """The full bwrap command line for one command (order matters: later mounts win).

    Each of ``hidden`` (a folder beneath the root: the daemon's state dir, when the root
    holds it) is covered by an empty tmpfs mounted after the root, so the command
    neither reads nor changes what is there.

    With ``root_fd`` (passed to bwrap), the root mounted is that open directory,
    whatever its name leads to by the time bwrap runs (the run's pinned root).

    With ``started_fd`` (the write end of a pipe, passed to bwrap), the command runs
    behind a one-line ``/bin/sh`` that first writes :data:`STARTED` to it: only a
    command that got inside the finished sandbox can write it. bwrap reports a failed
    setup (a bind that fails, say) as exit status 1 and a line on stderr, which a
    command can print too; the marker is what tells them apart. ``dash`` cannot
    name a descriptor above 9, so the marker goes through ``/proc/self/fd``."""
    bind = ["--bind", root_real] if root_fd is None else ["--bind-fd", str(root_fd)]
    run = ["/bin/sh", "-c", command]
    if started_fd is not None:
        mark = f"printf {STARTED.decode()} > /proc/self/fd/{started_fd}"
        run = ["/bin/sh", "-c", f'{mark} && exec /bin/sh -c "$1"', "sh", command]
    covers = [flag for path in hidden for flag in ("--tmpfs", path)]
    return [bwrap, *flags, *bind, root_real, *covers, "--chdir", root_real, *run]


def marked(started_r: int) -> bool:
    """Whether the confined command's marker arrived (read without waiting)."""
    os.set_blocking(started_r, False)
    try:
        return os.read(started_r, len(STARTED)) == STARTED
    except BlockingIOError:
        return False  # nothing written, and a writer still open
