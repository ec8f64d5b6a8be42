"""The checkpoint store of one workspace: take, list, diff, restore, prune.

Synchronous and blocking (it reads the whole workspace): call it from a worker thread.
One :class:`CheckpointStore` is safe to share between threads; several stores, in
several processes, may open the same workspace's store: writes take its lock file.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import secrets
import threading
import time
from collections.abc import Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ._db import CacheEntry, Database
from ._diff import file_change
from ._errors import CheckpointError, CheckpointNotFoundError
from ._files import Directories, read_at
from ._model import (
    Checkpoint,
    CheckpointSettings,
    DiffResult,
    FileChange,
    Note,
    PruneResult,
    RestoreResult,
)
from ._paths import Known, NeedsFullRead, read_paths, relative
from ._paths import apply as apply_paths
from ._prune import Counts, reachable
from ._restore import Plan, apply, make_plan
from ._scan import DirectoryMemo, Scan, open_root
from ._tree import DIR, FILE, LINK, UNCAPTURED, Change, Node, TreeEditor, compare, decode

_ID_CHARS = frozenset("0123456789abcdef")
_AUTO: Any = object()


def workspace_key(real_root: str) -> str:
    """The store folder's name for a workspace: a digest of its real path."""
    return hashlib.sha256(os.fsencode(real_root)).hexdigest()[:32]


class _Trees:
    """Trees from the database, or from a read (``scan``, whose trees may not be stored
    and come decoded already); decoded once each. Callers never change what they get."""

    def __init__(
        self,
        database: Database,
        scan: Scan | None = None,
        extra: dict[bytes, bytes] | None = None,
        decoded: dict[bytes, dict[str, Node]] | None = None,
    ) -> None:
        self._database = database
        self._extra = {**(scan.trees if scan else {}), **(extra or {})}
        self._decoded: dict[bytes, dict[str, Node]] = (
            {memo.digest: memo.entries for memo in scan.memo.values()} if scan else {}
        )
        if decoded:
            self._decoded.update(decoded)

    def tree(self, digest: bytes) -> dict[str, Node]:
        found = self._decoded.get(digest)
        if found is None:
            data = self._extra.get(digest)
            if data is None:
                data = self._database.tree_data(digest)
            if data is None:
                raise CheckpointError("the checkpoint store lacks a tree it refers to (damaged?)")
            found = self._decoded[digest] = decode(data)
        return found

    def maybe(self, digest: bytes) -> dict[str, Node] | None:
        try:
            return self.tree(digest)
        except CheckpointError:
            return None


def _notes(text: str) -> tuple[Note, ...]:
    return tuple(Note(path, reason) for path, reason in json.loads(text))


def _json_notes(notes: Iterable[Note]) -> str:
    return json.dumps([[note.path, note.reason] for note in notes])


class CheckpointStore:
    """Snapshots of one workspace, kept under ``STATE/checkpoints/<key>/``.

    Open with :meth:`open`; close with :meth:`close` (or use it as a context manager).
    """

    def __init__(
        self,
        database: Database,
        root: str,
        identity: tuple[int, int],
        settings: CheckpointSettings,
        skip_dirs: frozenset[tuple[int, int]],
    ) -> None:
        self._database = database
        self.root = root
        self.settings = settings
        self._identity = identity
        self._skip_dirs = skip_dirs
        self._lock = threading.RLock()
        self._cache: tuple[int, dict[str, CacheEntry]] | None = None
        self._memo: dict[str, DirectoryMemo] = {}
        self._known: Known | None = None
        """What this object recorded at its last checkpoint, for the next to build on."""
        self.full_reads = 0
        """How many times this object read the whole workspace for a checkpoint (a
        test's, a benchmark's figure)."""

    @classmethod
    def open(
        cls,
        state_dir: str | Path,
        root: str | Path,
        settings: CheckpointSettings | None = None,
    ) -> CheckpointStore:
        """The store of the workspace ``root`` under ``state_dir`` (both created if
        missing). :class:`CheckpointError` when ``root`` is not a directory or the store
        cannot be opened."""
        real = os.path.realpath(root)
        try:
            info = os.stat(real)
        except OSError as exc:
            raise CheckpointError(f"cannot open the workspace {root}: {exc.strerror}") from None
        if not os.path.isdir(real):
            raise CheckpointError(f"the workspace {root} is not a directory")
        key = workspace_key(real)
        database = Database.open(Path(state_dir), key)
        try:
            with database.exclusive():
                recorded = database.meta("root")
                if recorded is None:
                    database.set_meta("root", real)
            checkpoints = Path(state_dir) / "checkpoints"
            skip = frozenset(
                (s.st_dev, s.st_ino) for s in (os.stat(checkpoints), os.stat(checkpoints / key))
            )
        except BaseException:
            database.close()
            raise
        return cls(
            database, real, (info.st_dev, info.st_ino), settings or CheckpointSettings(), skip
        )

    def close(self) -> None:
        with self._lock:
            self._database.close()

    def __enter__(self) -> CheckpointStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # Reading the workspace.

    def _load_cache(self) -> dict[str, CacheEntry]:
        generation = self._database.cache_generation()
        if self._cache is None or self._cache[0] != generation:
            self._cache = (generation, self._database.load_cache())
        return self._cache[1]

    def _scan(self, *, store: bool) -> Scan:
        """Read the workspace; with ``store``, its new contents and trees go into the
        database (inside the caller's transaction)."""
        database = self._database
        scan = Scan(
            self.settings,
            self._load_cache(),
            database.put_object if store else None,
            self._skip_dirs,
            self._memo,
        )
        fd = open_root(self.root, self._identity)
        try:
            scan.run(fd)
        finally:
            os.close(fd)
        self._memo = scan.memo
        if store:
            database.put_trees(scan.trees)
        return scan

    # Checkpoints.

    def _row(self, checkpoint_id: str) -> tuple[Any, ...]:
        if (
            not isinstance(checkpoint_id, str)
            or len(checkpoint_id) != 16
            or not set(checkpoint_id) <= _ID_CHARS
        ):
            raise CheckpointNotFoundError(f"{checkpoint_id!r} is not a checkpoint id")
        row = self._database.checkpoint_row(checkpoint_id)
        if row is None:
            raise CheckpointNotFoundError(f"no checkpoint {checkpoint_id} in this workspace")
        return row

    @staticmethod
    def _checkpoint(row: tuple[Any, ...]) -> Checkpoint:
        seq, cid, created, label, run_id, iteration, _, previous, changed, files, size, nc, sk = row
        return Checkpoint(
            id=cid,
            seq=seq,
            created=created,
            label=label,
            run_id=run_id,
            iteration=iteration,
            previous_id=previous,
            changed_paths=tuple(json.loads(changed)),
            files=files,
            bytes=size,
            not_captured=_notes(nc),
            skipped=_notes(sk),
        )

    def get(self, checkpoint_id: str) -> Checkpoint:
        """The checkpoint ``checkpoint_id``; :class:`CheckpointNotFoundError` if none."""
        with self._lock:
            return self._checkpoint(self._row(checkpoint_id))

    def checkpoints(self, run_id: str | None = None) -> tuple[Checkpoint, ...]:
        """Every checkpoint (of ``run_id`` only, when given), oldest first."""
        with self._lock:
            return tuple(self._checkpoint(r) for r in self._database.checkpoint_rows(run_id))

    def latest(self, run_id: str | None = None) -> Checkpoint | None:
        """The newest checkpoint (of ``run_id`` only, when given)."""
        with self._lock:
            row = self._database.latest_row(run_id)
            return None if row is None else self._checkpoint(row)

    def _record(
        self,
        trees: _Trees,
        root: bytes,
        *,
        label: str,
        run_id: str | None,
        iteration: int | None,
        previous: tuple[Any, ...] | None,
        changed: Sequence[str] | None,
        files: int,
        size: int,
        not_captured: Sequence[Note],
        skipped: Sequence[Note],
    ) -> Checkpoint:
        if changed is None:
            changed = [c[0] for c in compare(trees, previous[6], root)] if previous else []
        checkpoint_id = secrets.token_hex(8)
        values: dict[str, object] = {
            "id": checkpoint_id,
            "created": time.time(),
            "label": label,
            "run_id": run_id,
            "iteration": iteration,
            "tree": root,
            "previous_id": previous[1] if previous else None,
            "changed": json.dumps(list(changed)),
            "files": files,
            "bytes": size,
            "not_captured": _json_notes(not_captured),
            "skipped": _json_notes(skipped),
        }
        self._database.insert_checkpoint(values)
        return self._checkpoint(self._database.checkpoint_row(checkpoint_id) or ())

    def take(
        self,
        *,
        label: str = "",
        run_id: str | None = None,
        iteration: int | None = None,
        previous_id: str | None = _AUTO,
        changed: Collection[str] | None = None,
    ) -> Checkpoint:
        """Snapshot the workspace now.

        ``changed_paths`` compares it with ``previous_id``: by default the newest
        checkpoint of ``run_id`` (none for a run's first), or without ``run_id`` the
        store's newest. :class:`CheckpointError` when the workspace cannot be read or
        holds more than ``settings.max_entries`` entries (then nothing is recorded).

        ``changed`` (paths, absolute or relative to the root) is the caller's word that
        nothing else changed since that previous checkpoint (a run's file tools wrote
        them): then only they are read, over the previous checkpoint's tree, when this
        object took that checkpoint and it is still the store's newest; otherwise, or
        when a read of those paths cannot settle it (a directory, a ``.gitignore``, ...),
        the whole workspace is read as without ``changed``."""
        with self._lock, self._database.exclusive():
            if previous_id is _AUTO:
                previous = self._database.latest_row(run_id)
            else:
                previous = self._row(previous_id) if previous_id is not None else None
            scan = None
            with self._database.transaction():
                taken = None
                if changed is not None:
                    taken = self._take_paths(changed, label, run_id, iteration, previous)
                if taken is None:
                    self.full_reads += 1
                    scan = self._scan(store=True)
                    checkpoint = self._take_recorded(scan, label, run_id, iteration, previous)
                    taken = checkpoint, Known.of_scan(checkpoint.id, scan)
                    generation = self._database.save_cache(
                        self._load_cache(), scan.cache, scan.cache_added
                    )
            if scan is not None:
                self._cache = (generation, scan.cache)
            self._known = taken[1]
            return taken[0]

    def _take_paths(
        self,
        changed: Collection[str],
        label: str,
        run_id: str | None,
        iteration: int | None,
        previous: tuple[Any, ...] | None,
    ) -> tuple[Checkpoint, Known] | None:
        """The checkpoint of the paths ``changed`` over the previous one, or ``None``
        when only a full read can take it (see :meth:`take`)."""
        known, database = self._known, self._database
        if known is None or previous is None or previous[1] != known.checkpoint_id:
            return None
        latest = database.latest_row()
        if latest is None or latest[1] != known.checkpoint_id:
            return None  # another store (a process, a restore) recorded one since
        try:
            rels = [relative(self.root, path) for path in changed]
            with self._workspace() as dirs:
                found = read_paths(
                    known, rels, dirs, self.settings, self._skip_dirs, database.put_object
                )
            applied = apply_paths(known, found, self.settings)
        except NeedsFullRead:
            return None
        database.put_trees(applied.trees)
        new = applied.known
        checkpoint = self._record(
            _Trees(database, extra=applied.trees, decoded=applied.decoded),
            new.root,
            label=label,
            run_id=run_id,
            iteration=iteration,
            previous=previous,
            changed=None,
            files=new.files,
            size=new.bytes,
            not_captured=new.not_captured,
            skipped=new.skipped,
        )
        return checkpoint, new._replace(checkpoint_id=checkpoint.id)

    def _take_recorded(
        self,
        scan: Scan,
        label: str,
        run_id: str | None,
        iteration: int | None,
        previous: tuple[Any, ...] | None,
    ) -> Checkpoint:
        return self._record(
            _Trees(self._database, scan),
            scan.root,
            label=label,
            run_id=run_id,
            iteration=iteration,
            previous=previous,
            changed=None,
            files=scan.files,
            size=scan.bytes,
            not_captured=scan.not_captured,
            skipped=scan.skipped,
        )

    # Diffs.

    def _content_reader(self, scan: Scan | None, dirs: Directories | None) -> Any:
        database = self._database

        def content(node: Node) -> bytes | None:
            if node.kind in (DIR, UNCAPTURED):
                return None
            data = database.object(node.digest)
            if data is None and scan is not None and dirs is not None:
                path = scan.pending.get(node.digest)
                if path is not None:
                    data = read_at(dirs, path, self.settings.max_file_bytes)
            return data

        return content

    def _file_changes(
        self, changes: list[Change], content: Any, *, patch: bool
    ) -> tuple[tuple[FileChange, ...], str]:
        files: list[FileChange] = []
        patches: list[str] = []
        for path, old, new in changes:
            old = None if old is None or old.kind == DIR else old
            new = None if new is None or new.kind == DIR else new
            if old is None and new is None:
                continue
            change, text = file_change(
                path,
                None if old is None else (old, content(old)),
                None if new is None else (new, content(new)),
                self.settings.diff_max_bytes,
                patch=patch,
            )
            files.append(change)
            patches.append(text)
        return tuple(files), "".join(patches)

    def diff(
        self,
        from_id: str,
        to_id: str | None = None,
        *,
        paths: Collection[str] | None = None,
        patch: bool = True,
    ) -> DiffResult:
        """What changed from checkpoint ``from_id`` to ``to_id`` (``None``: the
        workspace now), limited to ``paths`` (and what lies beneath them) when given."""
        with self._lock, self._database.exclusive():  # no prune removes what it reads
            old = self._row(from_id)[6]
            if to_id is not None:
                new = self._row(to_id)[6]
                trees = _Trees(self._database)
                changes = compare(trees, old, new)
                files, text = self._file_changes(
                    _within(changes, paths), self._content_reader(None, None), patch=patch
                )
                return DiffResult(files, text)
            scan = self._scan(store=False)
            trees = _Trees(self._database, scan)
            changes = compare(trees, old, scan.root)
            fd = open_root(self.root, self._identity)
            dirs = Directories(fd)
            try:
                files, text = self._file_changes(
                    _within(changes, paths), self._content_reader(scan, dirs), patch=patch
                )
            finally:
                dirs.close()
                os.close(fd)
            return DiffResult(files, text)

    def changed_paths(self, checkpoint_ids: Sequence[str]) -> tuple[str, ...]:
        """Every path changed between consecutive checkpoints of ``checkpoint_ids`` (a
        run's, oldest first): what that range touched, even where a later step put the
        file back as it was. Directories are included."""
        with self._lock, self._database.exclusive():
            roots = [self._row(cid)[6] for cid in checkpoint_ids]
            trees = _Trees(self._database)
            touched: set[str] = set()
            for old, new in itertools.pairwise(roots):
                touched.update(change[0] for change in compare(trees, old, new))
            return tuple(sorted(touched))

    # Restore.

    @contextlib.contextmanager
    def _workspace(self) -> Iterator[Directories]:
        fd = open_root(self.root, self._identity)
        dirs = Directories(fd)
        try:
            yield dirs
        finally:
            dirs.close()
            os.close(fd)

    def restore(
        self,
        checkpoint_id: str,
        *,
        expected_id: str | None = None,
        paths: Collection[str] | None = None,
        dry_run: bool = False,
        force: bool = False,
    ) -> RestoreResult:
        """Put the workspace's files back as they were at ``checkpoint_id`` (only
        ``paths`` and what lies beneath them, when given).

        With ``expected_id``, a path the restore would touch that differs from that
        checkpoint (changed by someone since) is a conflict: the restore then changes
        nothing, unless ``force``. ``dry_run`` reports and changes nothing. Otherwise a
        checkpoint is taken first (``restore_checkpoint_id``: restore it to undo) and
        another after (``result_checkpoint_id``: the ``expected_id`` for that undo)."""
        with self._lock, self._database.exclusive():
            target = self._row(checkpoint_id)
            expected = self._row(expected_id) if expected_id is not None else None
            if dry_run:
                scan = self._scan(store=False)
                with self._workspace() as dirs:
                    plan = self._plan(scan, target, expected, paths, dirs)
                    return self._unapplied(plan, scan, dirs, force, dry_run=True)
            database = self._database
            with self._workspace() as dirs:
                try:
                    with database.transaction():
                        scan = self._scan(store=True)
                        plan = self._plan(scan, target, expected, paths, dirs)
                        doable = _doable(plan)
                        if (plan.conflicts and not force) or not doable.actions:
                            raise _Refused(self._unapplied(plan, scan, dirs, force, dry_run=False))
                        label = f"before restoring {checkpoint_id}"
                        before = self._take_recorded(scan, label, None, None, None)
                        generation = database.save_cache(
                            self._load_cache(), scan.cache, scan.cache_added
                        )
                except _Refused as refused:
                    return refused.result
                self._cache = (generation, scan.cache)
                try:
                    done, skipped = apply(
                        doable, dirs, scan.key_of, self._content_reader(None, None)
                    )
                except LookupError as exc:
                    raise CheckpointError(str(exc)) from None
            files, _ = self._file_changes(done, self._content_reader(None, None), patch=False)
            after = self._record_result(scan, before, done, checkpoint_id)
            return RestoreResult(
                checkpoint_id=checkpoint_id,
                files=files,
                conflicts=(),
                skipped=(*plan.blocked, *skipped),
                applied=True,
                dry_run=False,
                restore_checkpoint_id=before.id,
                result_checkpoint_id=after.id,
            )

    def _plan(
        self,
        scan: Scan,
        target: tuple[Any, ...],
        expected: tuple[Any, ...] | None,
        paths: Collection[str] | None,
        dirs: Directories,
    ) -> Plan:
        return make_plan(
            _Trees(self._database, scan),
            scan.root,
            target[6],
            checkpoint_id=target[1],
            expected=(expected[1], expected[6]) if expected is not None else None,
            paths=paths,
            dirs=dirs,
            uncaptured_reasons={n.path: n.reason for n in scan.not_captured},
        )

    def _unapplied(
        self, plan: Plan, scan: Scan, dirs: Directories, force: bool, *, dry_run: bool
    ) -> RestoreResult:
        """The report of a restore that changed nothing: a dry run, a refusal, or one
        with nothing to do."""
        files, _ = self._file_changes(
            _doable(plan).actions, self._content_reader(scan, dirs), patch=False
        )
        refused = bool(plan.conflicts) and not force
        return RestoreResult(
            checkpoint_id=plan.checkpoint_id,
            files=files,
            conflicts=() if force else tuple(plan.conflicts),
            skipped=tuple(plan.blocked) if force else (),
            applied=not dry_run and not refused,
            dry_run=dry_run,
        )

    def _record_result(
        self, scan: Scan, before: Checkpoint, done: list[Change], checkpoint_id: str
    ) -> Checkpoint:
        """Record the workspace as the restore left it, from what it wrote (no new read)."""
        database = self._database
        trees = _Trees(database, scan)
        editor = TreeEditor(trees, scan.root)
        for path, _, new in done:
            editor.set(path, new)
        root, written = editor.write()
        trees = _Trees(database, scan, written)
        leaves = (FILE, LINK)
        files = before.files + sum(
            (new is not None and new.kind in leaves) - (old is not None and old.kind in leaves)
            for _, old, new in done
        )
        with database.transaction():
            database.put_trees(written)
            return self._record(
                trees,
                root,
                label=f"restored {checkpoint_id}",
                run_id=None,
                iteration=None,
                previous=database.checkpoint_row(before.id),
                changed=[change[0] for change in done],
                files=files,
                size=before.bytes,
                not_captured=scan.not_captured,
                skipped=scan.skipped,
            )

    # Pruning.

    def stored_bytes(self) -> int:
        """The bytes of every content and tree the store holds."""
        with self._lock:
            row = self._database.connection.execute(
                "SELECT (SELECT coalesce(sum(length(data)), 0) FROM objects)"
                " + (SELECT coalesce(sum(length(data)), 0) FROM trees)"
            ).fetchone()
            return int(row[0])

    def prune(
        self,
        *,
        protected_ids: Collection[str] = (),
        protected_runs: Collection[str] = (),
        now: float | None = None,
    ) -> PruneResult:
        """Remove checkpoints older than ``settings.retention_seconds``, then the oldest
        while the store holds more than ``settings.max_store_bytes``; never those in
        ``protected_ids`` nor those of ``protected_runs`` (live runs). Contents and
        trees no remaining checkpoint reaches go with them."""
        now = time.time() if now is None else now
        with self._lock, self._database.exclusive():
            before = self.stored_bytes()
            database = self._database
            rows = database.checkpoint_rows()
            trees = _Trees(database)
            roots = [row[6] for row in rows]
            graph, _ = reachable(roots, trees.maybe)
            sizes = database.object_sizes()
            sizes.update({d: len(data) for d, data in database.tree_rows()})
            counts = Counts(roots, graph, sizes)
            removable = [
                row for row in rows
                if row[1] not in protected_ids and (row[4] is None or row[4] not in protected_runs)
            ]  # fmt: skip
            removed: list[str] = []
            cutoff = now - self.settings.retention_seconds
            for row in removable:
                if row[2] < cutoff or counts.bytes > self.settings.max_store_bytes:
                    counts.drop(row[6])
                    removed.append(row[1])
            alive = counts.alive()
            dead_objects = {d for d in database.object_sizes() if d not in alive}
            dead_trees = {d for d, _ in database.tree_rows() if d not in alive}
            with database.transaction():
                database.delete_checkpoints(removed)
                database.delete_objects(dead_objects)
                database.delete_trees(dead_trees)
                if dead_objects:
                    database.drop_cache_digests(dead_objects)
            database.vacuum()
            self._cache = None
            return PruneResult(tuple(removed), before, self.stored_bytes())


def _within(changes: list[Change], paths: Collection[str] | None) -> list[Change]:
    if paths is None:
        return changes
    wanted = {p.strip("/") for p in paths}

    def inside(path: str) -> bool:
        while True:
            if path in wanted:
                return True
            if "/" not in path:
                return False
            path = path.rpartition("/")[0]

    return [c for c in changes if inside(c[0])]


def _doable(plan: Plan) -> Plan:
    """The plan without what it never touches."""
    blocked = {note.path for note in plan.blocked}
    actions = [a for a in plan.actions if a[0] not in blocked]
    return Plan(plan.checkpoint_id, actions, [], [], plan.implied)


class _Refused(Exception):
    """Ends a restore's transaction (rolled back) with the report of what stopped it."""

    def __init__(self, result: RestoreResult) -> None:
        super().__init__("refused")
        self.result = result
