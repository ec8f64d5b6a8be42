"""A workspace's store on disk: one folder, one SQLite database, one lock file.

``STATE/checkpoints/<key>/`` (``key``: a digest of the workspace's real path) holds
``store.sqlite`` and ``lock``. Folders are 0700 and files 0600; each folder is opened
beneath its parent's descriptor with ``O_NOFOLLOW`` and must belong to this user, and
the database must be a regular file, so a link planted there is refused rather than
followed. SQLite then opens the database by that checked name (it takes no descriptor);
only this user can change a 0700 folder of theirs in between.

The tables: ``objects`` (file contents and link targets by SHA-256), ``trees`` (see
:mod:`~cleveragents.checkpoints._tree`), ``checkpoints`` (one row each, ``seq`` orders
them), ``stat_cache`` (path -> size, times, inode, mode and digest of the last read, so
an unchanged file is not read again) and ``meta``. A write runs in one transaction: a
crash leaves the store as before it.

This module knows nothing of the workspace's files nor of what a checkpoint means.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import sqlite3
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ._errors import CheckpointError

SCHEMA_VERSION = "1"
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE objects(digest BLOB PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE trees(digest BLOB PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE checkpoints(
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    created REAL NOT NULL,
    label TEXT NOT NULL,
    run_id TEXT,
    iteration INTEGER,
    tree BLOB NOT NULL,
    previous_id TEXT,
    changed TEXT NOT NULL,
    files INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    not_captured TEXT NOT NULL,
    skipped TEXT NOT NULL
);
CREATE INDEX checkpoints_by_run ON checkpoints(run_id, seq);
CREATE TABLE stat_cache(
    path BLOB PRIMARY KEY, size INTEGER, mtime_ns INTEGER, ctime_ns INTEGER,
    ino INTEGER, mode INTEGER, digest BLOB
) WITHOUT ROWID;
"""
CHECKPOINT_COLUMNS = (
    "seq, id, created, label, run_id, iteration, tree, previous_id, changed, files, bytes, "
    "not_captured, skipped"
)

CacheKey = tuple[int, int, int, int, int]
"""size, mtime_ns, ctime_ns, inode, mode (``st_mode``, type bits included) of a file
when it was read."""
CacheEntry = tuple[CacheKey, bytes]
"""A :data:`CacheKey` and the digest of what was read."""
_INT64 = (1 << 63) - 1


def cache_key(info: os.stat_result) -> CacheKey:
    return (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_mode)


def private_folder(parent_fd: int, name: str, where: Path) -> int:
    """Open (creating it 0700) the folder ``name`` beneath ``parent_fd``: never through
    a link, and only when it is this user's (tightened to 0700 if wider)."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o700, dir_fd=parent_fd)
    try:
        fd = os.open(name, _DIRECTORY, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise CheckpointError(f"{where} is a symbolic link or not a folder") from None
        raise CheckpointError(f"cannot open {where}: {exc.strerror}") from None
    info = os.fstat(fd)
    if info.st_uid != os.geteuid():
        os.close(fd)
        raise CheckpointError(f"{where} belongs to another user")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.fchmod(fd, 0o700)
    return fd


def _private_file(dir_fd: int, name: str, where: Path) -> int:
    """Open (creating it 0600) the regular file ``name`` beneath ``dir_fd``, never a link."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
    except OSError as exc:
        raise CheckpointError(f"cannot open {where}: {exc.strerror}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
        os.close(fd)
        raise CheckpointError(f"{where} is not a regular file of this user")
    if stat.S_IMODE(info.st_mode) != 0o600:
        os.fchmod(fd, 0o600)
    return fd


class Database:
    """The SQLite database of one store folder (opened by :meth:`open`)."""

    def __init__(self, connection: sqlite3.Connection, folder_fd: int) -> None:
        self.connection = connection
        self._folder_fd = folder_fd

    @classmethod
    def open(cls, state_dir: Path, key: str) -> Database:
        """Open (creating it) ``state_dir/checkpoints/key``'s database."""
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            top = os.open(state_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise CheckpointError(
                f"cannot open the state dir {state_dir}: {exc.strerror}"
            ) from None
        try:
            outer = private_folder(top, "checkpoints", state_dir / "checkpoints")
        finally:
            os.close(top)
        try:
            folder = private_folder(outer, key, state_dir / "checkpoints" / key)
        finally:
            os.close(outer)
        where = state_dir / "checkpoints" / key
        try:
            os.close(_private_file(folder, "lock", where / "lock"))
            os.close(_private_file(folder, "store.sqlite", where / "store.sqlite"))
            connection = sqlite3.connect(
                where / "store.sqlite", isolation_level=None, check_same_thread=False, timeout=60
            )
        except BaseException:
            os.close(folder)
            raise
        database = cls(connection, folder)
        try:
            database._prepare()
        except sqlite3.DatabaseError as exc:
            database.close()
            raise CheckpointError(f"the checkpoint store {where} is unreadable: {exc}") from None
        return database

    def _prepare(self) -> None:
        run = self.connection.execute
        # Write-ahead log, synced at its checkpoints, not at every commit: a crash keeps
        # the store whole (it may lose the last commits, never corrupt), and a checkpoint
        # costs no fsync of its own.
        run("PRAGMA journal_mode=WAL")
        run("PRAGMA synchronous=NORMAL")
        tables = run("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
        if not tables:
            with self.exclusive():
                # Both take effect only before the first table: 16 KiB pages hold
                # typical source files with little slack; freed pages can be returned.
                run("PRAGMA page_size=16384")
                run("PRAGMA auto_vacuum=INCREMENTAL")
                run("BEGIN IMMEDIATE")
                if not run("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            run(statement)
                    run("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
                    run("INSERT INTO meta VALUES ('cache_generation', '0')")
                run("COMMIT")
        version = self.meta("schema")
        if version != SCHEMA_VERSION:
            raise CheckpointError(
                f"the checkpoint store has schema {version!r}, not {SCHEMA_VERSION}"
            )

    def close(self) -> None:
        self.connection.close()
        if self._folder_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._folder_fd)
            self._folder_fd = -1

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the store's lock file: one writer at a time, across processes."""
        # A new open file description each time: flock excludes descriptions, so two
        # threads of one process holding copies of one descriptor would not exclude.
        flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open("lock", flags, dir_fd=self._folder_fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One write transaction: committed when the block ends, rolled back if it raises."""
        self.connection.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.connection.execute("ROLLBACK")
            raise
        self.connection.execute("COMMIT")

    def meta(self, key: str) -> str | None:
        row = self.connection.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self.connection.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    # Objects and trees.

    def put_object(self, digest: bytes, data: bytes) -> None:
        self.connection.execute("INSERT OR IGNORE INTO objects VALUES (?, ?)", (digest, data))

    def has_object(self, digest: bytes) -> bool:
        found = self.connection.execute("SELECT 1 FROM objects WHERE digest=?", (digest,))
        return found.fetchone() is not None

    def object(self, digest: bytes) -> bytes | None:
        row = self.connection.execute("SELECT data FROM objects WHERE digest=?", (digest,))
        found = row.fetchone()
        return None if found is None else bytes(found[0])

    def put_trees(self, trees: dict[bytes, bytes]) -> None:
        self.connection.executemany("INSERT OR IGNORE INTO trees VALUES (?, ?)", trees.items())

    def tree_data(self, digest: bytes) -> bytes | None:
        row = self.connection.execute("SELECT data FROM trees WHERE digest=?", (digest,))
        found = row.fetchone()
        return None if found is None else bytes(found[0])

    # Checkpoints.

    def insert_checkpoint(self, values: dict[str, Any]) -> int:
        names = [c.strip() for c in CHECKPOINT_COLUMNS.split(",")][1:]
        cursor = self.connection.execute(
            f"INSERT INTO checkpoints ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
            [values[name] for name in names],
        )
        return int(cursor.lastrowid or 0)

    def checkpoint_row(self, checkpoint_id: str) -> tuple[Any, ...] | None:
        row = self.connection.execute(
            f"SELECT {CHECKPOINT_COLUMNS} FROM checkpoints WHERE id=?", (checkpoint_id,)
        ).fetchone()
        return None if row is None else tuple(row)

    def checkpoint_rows(self, run_id: str | None = None) -> list[tuple[Any, ...]]:
        if run_id is None:
            query = f"SELECT {CHECKPOINT_COLUMNS} FROM checkpoints ORDER BY seq"
            return [tuple(r) for r in self.connection.execute(query)]
        query = f"SELECT {CHECKPOINT_COLUMNS} FROM checkpoints WHERE run_id=? ORDER BY seq"
        return [tuple(r) for r in self.connection.execute(query, (run_id,))]

    def latest_row(self, run_id: str | None = None) -> tuple[Any, ...] | None:
        where, args = ("WHERE run_id=? ", (run_id,)) if run_id is not None else ("", ())
        query = f"SELECT {CHECKPOINT_COLUMNS} FROM checkpoints {where}ORDER BY seq DESC LIMIT 1"
        row = self.connection.execute(query, args).fetchone()
        return None if row is None else tuple(row)

    def delete_checkpoints(self, ids: Iterable[str]) -> None:
        self.connection.executemany("DELETE FROM checkpoints WHERE id=?", [(i,) for i in ids])

    # The stat cache.

    def cache_generation(self) -> int:
        return int(self.meta("cache_generation") or 0)

    def load_cache(self) -> dict[str, CacheEntry]:
        rows = self.connection.execute("SELECT * FROM stat_cache")
        decode = os.fsdecode
        return {decode(bytes(p)): ((s, m, c, i, o), bytes(d)) for p, s, m, c, i, o, d in rows}

    def save_cache(
        self, old: dict[str, CacheEntry], new: dict[str, CacheEntry], added: Iterable[str]
    ) -> int:
        """Write the cache ``new`` over ``old`` (``added``: the paths whose entry is new or
        changed; any other entry of ``new`` is ``old``'s); the new generation."""
        encode = os.fsencode
        gone = [(encode(path),) for path in old.keys() - new.keys()]
        changed = []
        for path in added:
            (size, mtime, ctime, inode, mode), digest = new[path]
            # SQLite integers are signed 64-bit: a larger inode is stored changed, so
            # that file is read again next time rather than trusted.
            changed.append((encode(path), size, mtime, ctime, inode & _INT64, mode, digest))
        run = self.connection
        run.executemany("DELETE FROM stat_cache WHERE path=?", gone)
        run.executemany("INSERT OR REPLACE INTO stat_cache VALUES (?, ?, ?, ?, ?, ?, ?)", changed)
        generation = self.cache_generation() + 1
        self.set_meta("cache_generation", str(generation))
        return generation

    # Sizes and garbage collection.

    def object_sizes(self) -> dict[bytes, int]:
        rows = self.connection.execute("SELECT digest, length(data) FROM objects")
        return {bytes(d): int(n) for d, n in rows}

    def tree_rows(self) -> Iterator[tuple[bytes, bytes]]:
        for digest, data in self.connection.execute("SELECT digest, data FROM trees"):
            yield bytes(digest), bytes(data)

    def delete_objects(self, digests: Iterable[bytes]) -> None:
        self.connection.executemany("DELETE FROM objects WHERE digest=?", [(d,) for d in digests])

    def delete_trees(self, digests: Iterable[bytes]) -> None:
        self.connection.executemany("DELETE FROM trees WHERE digest=?", [(d,) for d in digests])

    def drop_cache_digests(self, digests: set[bytes]) -> None:
        """Forget cached reads whose content was deleted (they must be read again)."""
        rows = self.connection.execute("SELECT path, digest FROM stat_cache").fetchall()
        gone = [(p,) for p, d in rows if bytes(d) in digests]
        self.connection.executemany("DELETE FROM stat_cache WHERE path=?", gone)
        self.set_meta("cache_generation", str(self.cache_generation() + 1))

    def vacuum(self) -> None:
        """Give freed pages back to the file system."""
        self.connection.execute("PRAGMA incremental_vacuum")
