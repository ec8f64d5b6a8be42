"""Helpers of the checkpoint tests: a workspace's full state, and shell commands."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path


def state_of(root: Path, *, skip_git: bool = True) -> dict[str, tuple[str, int, bytes]]:
    """Every entry beneath ``root``: kind, permission bits and content (a link's target)."""
    found: dict[str, tuple[str, int, bytes]] = {}
    for folder, dirs, files in os.walk(root):
        if skip_git and ".git" in dirs:
            dirs.remove(".git")
        for name in dirs + files:
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                found[rel] = ("link", 0, os.fsencode(os.readlink(path)))
            elif stat.S_ISDIR(info.st_mode):
                found[rel] = ("dir", 0, b"")
            elif stat.S_ISREG(info.st_mode):
                found[rel] = ("file", stat.S_IMODE(info.st_mode), path.read_bytes())
            else:
                found[rel] = ("special", 0, b"")
    return found


def bytes_of(folder: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every file beneath ``folder`` with its mode, modification time and bytes."""
    found = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        content = path.read_bytes() if stat.S_ISREG(info.st_mode) else b""
        found[path.relative_to(folder).as_posix()] = (info.st_mode, info.st_mtime_ns, content)
    return found


def sh(command: str, cwd: Path) -> str:
    """Run ``command`` in a real shell in ``cwd``; its output (it must succeed)."""
    done = subprocess.run(
        ["/bin/sh", "-c", command], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, f"{command!r} failed: {done.stderr}"
    return done.stdout


def write(root: Path, rel: str, text: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8")
    else:
        path.write_bytes(text)
    return path
