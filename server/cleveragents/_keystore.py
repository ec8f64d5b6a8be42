"""Where ``cleveragents keys`` keeps API keys, and the key source the command line
installs so that a model finds them (``llm.spec.KeySource``).

Keys are kept by the name of their variable (``OPENAI_API_KEY``), so every provider that
reads that variable (``openai``, ``openai-responses``) finds the same key, and a spec's
own ``apiKeyEnv`` can have one too. Two stores, looked up in this order after the
environment, which always wins:

- the OS keyring, through the ``keyring`` package (the ``keyring`` extra), as service
  ``cleveragents``: when the package is installed and its backend is usable (not
  keyring's ``fail`` or ``null`` backend: ``PYTHON_KEYRING_BACKEND`` picks one);
- a file, ``CONFIG_DIR/keys.json``: 0600 in a 0700 folder, written whole (a new file
  renamed over the old), read only when it is a regular file of this user that nobody
  else can read (a link is refused).

``keys set`` writes to the first usable store. A key is never printed, never put in
an error, and never put into the environment (no tool's command or MCP server inherits
it): messages name the variable and the store. Nothing here is imported, and no store
opened, until a key is needed (the keyring package costs ~0.3 s to load), so ``serve``
pays nothing for it at start-up.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from .llm.errors import ModelConfigError
from .llm.spec import KeySource, set_key_source

SERVICE = "cleveragents"
"""The keyring service name; each key's user name is its variable."""
FILE_NAME = "keys.json"
MAX_FILE = 1 << 20
"""The key file is read up to this size: a key file is a few hundred bytes."""
STORED = "stored: cleveragents keys"
HINT = "(or store one: cleveragents keys set {name})"


class KeyStoreError(Exception):
    """A store cannot be read or written; the message names it, never a key."""


class KeyStore(Protocol):
    label: str
    """What messages call it: ``keyring (SecretService Keyring)``, ``file PATH``."""
    kind: str
    """``keyring`` or ``file``."""

    def get(self, variable: str) -> str | None: ...
    def set(self, variable: str, key: str) -> None: ...
    def remove(self, variable: str) -> bool: ...


def scrub(text: str, key: str) -> str:
    """``text`` with ``key`` cut out: a backend's own error text, before it is shown."""
    from .llm._redact import Redactor

    return Redactor.of([key])(text)[:300]


class FileStore:
    """Keys in one JSON file, ``{"version": 1, "keys": {VARIABLE: KEY}}``."""

    kind = "file"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.label = f"file {path}"

    def get(self, variable: str) -> str | None:
        return self._read().get(variable)

    def variables(self) -> set[str]:
        return set(self._read())

    def set(self, variable: str, key: str) -> None:
        keys = self._read()
        keys[variable] = key
        self._write(keys)

    def remove(self, variable: str) -> bool:
        keys = self._read()
        if keys.pop(variable, None) is None:
            return False
        if keys:
            self._write(keys)
        else:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        return True

    def _read(self) -> dict[str, str]:
        path = self.path
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            why = "it is a symbolic link" if os.path.islink(path) else exc.strerror
            raise KeyStoreError(f"cannot read the key file {path}: {why}") from None
        with os.fdopen(fd, "rb") as file:
            info = os.fstat(file.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise KeyStoreError(f"the key file {path} is not a regular file")
            if info.st_uid != os.geteuid():
                raise KeyStoreError(f"the key file {path} belongs to another user")
            if info.st_mode & 0o077:
                raise KeyStoreError(
                    f"the key file {path} can be read by others (mode "
                    f"{stat.S_IMODE(info.st_mode):04o}): chmod 600 {path}, and think about "
                    "replacing the keys it holds"
                )
            data = file.read(MAX_FILE + 1)
        try:
            parsed = json.loads(data) if len(data) <= MAX_FILE else None
        except (ValueError, UnicodeDecodeError):
            parsed = None  # the parser's message may quote the file: keys
        keys = parsed.get("keys") if isinstance(parsed, dict) else None
        if not isinstance(keys, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in keys.items()
        ):
            raise KeyStoreError(
                f"the key file {path} is not one cleveragents wrote: remove it, and set "
                "the keys again (cleveragents keys set PROVIDER)"
            )
        return dict(keys)

    def _write(self, keys: dict[str, str]) -> None:
        folder = self.path.parent
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.chmod(folder, 0o700)  # our own folder (config.toml's): nobody else lists it
            temporary = folder / f".{FILE_NAME}.{os.getpid()}.{os.urandom(4).hex()}"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(temporary, flags, 0o600)
        except OSError as exc:
            raise KeyStoreError(f"cannot write the key file in {folder}: {exc.strerror}") from None
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(json.dumps({"version": 1, "keys": keys}, indent=2).encode() + b"\n")
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, self.path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise KeyStoreError(f"cannot write the key file {self.path}: {exc.strerror}") from None


class KeyringStore:
    """Keys in the OS keyring, through a ``keyring`` backend."""

    kind = "keyring"

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        name = getattr(backend, "name", None) or type(backend).__name__
        self.label = f"keyring ({name})"

    def get(self, variable: str) -> str | None:
        try:
            key = self.backend.get_password(SERVICE, variable)
        except Exception as exc:  # noqa: BLE001 - any backend's failure, named, never raw
            raise KeyStoreError(f"the {self.label} could not be read: {_named(exc)}") from None
        return key if isinstance(key, str) and key else None

    def set(self, variable: str, key: str) -> None:
        try:
            self.backend.set_password(SERVICE, variable, key)
        except Exception as exc:  # noqa: BLE001 - as in get; its text may hold the key
            why = scrub(_named(exc), key)
            raise KeyStoreError(f"the {self.label} did not take the key: {why}") from None

    def remove(self, variable: str) -> bool:
        if self.get(variable) is None:
            return False
        try:
            self.backend.delete_password(SERVICE, variable)
        except Exception as exc:  # noqa: BLE001 - as in get
            raise KeyStoreError(f"the {self.label} kept the key: {_named(exc)}") from None
        return True


def _named(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


def keyring_store() -> KeyringStore | None:
    """The OS keyring, when the ``keyring`` package is installed and its backend can
    keep a key (priority above 0: not ``fail``, not ``null``); else ``None``."""
    try:
        import keyring
    except ImportError:
        return None
    try:
        backend = keyring.get_keyring()
        usable = float(backend.priority) > 0
    except Exception:  # noqa: BLE001 - a backend that cannot say it works is not used
        return None
    return KeyringStore(backend) if usable else None


def file_store() -> FileStore:
    """``keys.json`` beside ``config.toml`` (``$XDG_CONFIG_HOME/cleveragents``)."""
    from .client._config import config_path

    return FileStore(config_path().parent / FILE_NAME)


class Keys:
    """The stores in lookup order: the keyring (when usable), then the file."""

    def __init__(self, stores: list[KeyStore]) -> None:
        self.stores = stores

    @classmethod
    def default(cls) -> Keys:
        found = keyring_store()
        return cls([found, file_store()] if found is not None else [file_store()])

    @property
    def preferred(self) -> KeyStore:
        """Where ``keys set`` writes."""
        return self.stores[0]

    def find(self, variable: str) -> tuple[str, KeyStore] | None:
        """The key kept for ``variable`` and the store it is in, or ``None``. A store
        that cannot be read (a locked keyring) is passed over for the next; when none
        has the key, the first such failure is raised."""
        failures: list[KeyStoreError] = []
        for store in self.stores:
            try:
                key = store.get(variable)
            except KeyStoreError as exc:
                failures.append(exc)
                continue
            if key:
                return key, store
        if failures:
            raise failures[0]
        return None

    def set(self, variable: str, key: str) -> KeyStore:
        store = self.preferred
        store.set(variable, key)
        return store

    def remove(self, variable: str) -> list[KeyStore]:
        """Remove the key from every store; the stores that held one."""
        return [store for store in self.stores if store.remove(variable)]


class _Lookup:
    """The key source's lookup: builds the stores on its first call, so a command that
    needs no key never imports keyring nor reads the file."""

    def __init__(self) -> None:
        self.keys: Keys | None = None

    def __call__(self, variable: str) -> str | None:
        if self.keys is None:
            self.keys = Keys.default()
        try:
            found = self.keys.find(variable)
        except KeyStoreError as exc:
            raise ModelConfigError(f"no key in the environment for {variable}, and {exc}") from None
        return found[0] if found is not None else None


def key_source() -> KeySource:
    return KeySource(lookup=_Lookup(), stored=STORED, hint=HINT)


@contextlib.contextmanager
def keys_installed() -> Iterator[None]:
    """The stored keys are a model's key source while the command runs."""
    previous = set_key_source(key_source())
    try:
        yield
    finally:
        set_key_source(previous)
