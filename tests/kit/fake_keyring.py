"""A keyring backend for tests: the OS keyring is never touched.

In process, ``keyring.set_keyring(MemoryKeyring())``. For the real command, name it in
the environment (``keyring_env``): keyring loads ``PYTHON_KEYRING_BACKEND`` by import
path, and this backend keeps its passwords in the JSON file ``FAKE_KEYRING_FILE``
names, which a test reads to see what the command stored."""

from __future__ import annotations

import json
import os
from pathlib import Path

from keyring.backend import KeyringBackend
from keyring.errors import PasswordDeleteError

from kit.paths import ROOT

NULL_BACKEND = "keyring.backends.null.Keyring"
"""keyring's own backend that keeps nothing: the command falls back to its key file."""


class MemoryKeyring(KeyringBackend):
    """Passwords in a dict, or in the JSON file ``FAKE_KEYRING_FILE`` when it is set."""

    priority = 1  # usable (keyring passes over backends of priority 0 or less)

    def __init__(self) -> None:
        super().__init__()
        self.passwords: dict[str, str] = {}

    def _load(self) -> dict[str, str]:
        path = os.environ.get("FAKE_KEYRING_FILE")
        if not path:
            return self.passwords
        try:
            return dict(json.loads(Path(path).read_text()))
        except FileNotFoundError:
            return {}

    def _save(self, passwords: dict[str, str]) -> None:
        path = os.environ.get("FAKE_KEYRING_FILE")
        if path:
            Path(path).write_text(json.dumps(passwords))
        else:
            self.passwords = passwords

    def get_password(self, service: str, username: str) -> str | None:
        return self._load().get(f"{service}/{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        passwords = self._load()
        passwords[f"{service}/{username}"] = password
        self._save(passwords)

    def delete_password(self, service: str, username: str) -> None:
        passwords = self._load()
        if passwords.pop(f"{service}/{username}", None) is None:
            raise PasswordDeleteError("no such password")
        self._save(passwords)


def keyring_env(store: Path) -> dict[str, str]:
    """The environment that makes the command use this backend, keeping its passwords
    in ``store``."""
    tests = str(ROOT / "tests")
    path = os.pathsep.join(p for p in (tests, os.environ.get("PYTHONPATH")) if p)
    return {"PYTHON_KEYRING_BACKEND": "kit.fake_keyring.MemoryKeyring",
            "FAKE_KEYRING_FILE": str(store), "PYTHONPATH": path}  # fmt: skip
