"""Checkpoints of runs: when a run snapshots its workspace, and what the service does
with the snapshots (diff, revert, restore, fork's files).

``RunCheckpoints`` is one run's part: the policy's gate calls :meth:`before_call` once a
call is allowed to run, and the run's sink calls :meth:`iteration_finished`. A run takes
a checkpoint just before its first mutating tool call (any tool whose kind is not
``read``, or that says it is destructive: the built-in write, edit and shell, MCP and
client tools not annotated read-only), then one after each iteration that ran one: at
most one per iteration. An after-iteration snapshot runs in a worker thread while the
next model call goes on; the next mutating call, and the run's end, wait for it.

An iteration whose mutating calls were all built-in file tools (``file-write``,
``file-edit``) that succeeded knows every path it changed (each call's output names the
real path it wrote): its snapshot reads only those, over the run's previous checkpoint
(``CheckpointStore.take(changed=...)``). Any other mutating call (the shell, an MCP or
client tool), a file tool that failed or did not finish, or an output without its path
makes the snapshot read the whole workspace, as the first one always does.

A failing snapshot never fails the run: it is logged, written to the transcript as a
``$/checkpoint`` line, and the run goes on (after a failed first snapshot the run takes
no more, since a revert would have nothing to go back to).

``CheckpointStores`` opens each workspace's store once per service and prunes it now
and then, never a live run's checkpoints. The core (``cleveragents.tool``) knows nothing
of this: it only reports its events and asks its policy.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..checkpoints import (
    Checkpoint,
    CheckpointError,
    CheckpointNotFoundError,
    CheckpointSettings,
    DiffResult,
    Note,
    RestoreResult,
)
from ..tool import Checkpointed, PermissionQuery, ToolCallRecord, ToolSpec
from ..transcripts import RunStateError, TranscriptStore
from ..workspace import SandboxViolationError

if TYPE_CHECKING:  # the store's modules load at its first use (see checkpoints/__init__)
    from ..checkpoints import CheckpointStore

logger = logging.getLogger(__name__)

RUN_STARTED = "run/started"
"""The transcript line that names a run's sandbox root."""
CHECKPOINT_NOTE = "$/checkpoint"
"""A transcript line saying a checkpoint could not be taken, and why."""
PRUNE_EVERY_S = 3600.0
"""A store is pruned when the service first opens it, then at a run's end at most this
often (pruning walks the whole store and compacts its database)."""


FILE_TOOLS = frozenset({"builtin/file-write", "builtin/file-edit"})
"""The mutating tools that change only the file their output's ``path`` names (the
``builtin/`` prefix is reserved: no client or MCP tool takes these names)."""


def mutating(spec: ToolSpec) -> bool:
    """Whether a call of this tool may change the workspace's files."""
    return spec.kind != "read" or spec.annotations.destructive


def empty_restore(checkpoint_id: str = "", *, dry_run: bool = False) -> RestoreResult:
    """The report of a revert with nothing to do."""
    return RestoreResult(checkpoint_id, (), (), (), False, dry_run)


class CheckpointStores:
    """The service's checkpoint stores, one per workspace root, opened on first use."""

    def __init__(
        self,
        state_dir: Path,
        settings: CheckpointSettings,
        transcripts: TranscriptStore,
        live_runs: Callable[[], Collection[str]],
    ) -> None:
        self.state_dir = state_dir
        self.settings = settings
        self._transcripts = transcripts
        self._live_runs = live_runs
        self._stores: dict[str, CheckpointStore] = {}
        self._pruned: dict[str, float] = {}
        self._lock = threading.Lock()
        self._tasks: set[asyncio.Future[Any]] = set()

    def open(self, root: str) -> CheckpointStore:
        """The store of the workspace ``root`` (blocking: call from a worker thread)."""
        real = os.path.realpath(root)
        with self._lock:
            store = self._stores.get(real)
            if store is None:
                from ..checkpoints import CheckpointStore  # its modules load on first use

                store = CheckpointStore.open(self.state_dir, real, self.settings)
                self._stores[real] = store
            return store

    async def get(self, root: str) -> CheckpointStore:
        return await asyncio.to_thread(self.open, root)

    def maybe_prune(self, root: str) -> None:
        """Prune ``root``'s store in the background when it is due (see
        ``PRUNE_EVERY_S``); live runs' checkpoints are kept, whatever their age."""
        real = os.path.realpath(root)
        now = time.monotonic()
        last = self._pruned.get(real)
        if last is not None and now - last < PRUNE_EVERY_S:
            return
        self._pruned[real] = now
        task = asyncio.ensure_future(asyncio.to_thread(self._prune, real))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _prune(self, root: str) -> None:
        try:
            store = self.open(root)
            runs = {c.run_id for c in store.checkpoints() if c.run_id is not None}
            live = set(self._live_runs()) | {r for r in runs if self._transcripts.is_live(r)}
            result = store.prune(protected_runs=live)
            if result.removed:
                logger.info(
                    "pruned %d checkpoints of %s (%d -> %d bytes)",
                    len(result.removed), root, result.bytes_before, result.bytes_after,
                )  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - pruning is housekeeping: log, go on
            logger.warning("cannot prune the checkpoints of %s: %s", root, exc)

    async def pruned(self) -> None:
        """Wait for the pruning under way (a test, a face closing)."""
        if self._tasks:
            await asyncio.wait(list(self._tasks))

    async def aclose(self) -> None:
        """Wait for pruning under way, then close every store."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=30)
        with self._lock:
            stores, self._stores = list(self._stores.values()), {}
        for store in stores:
            store.close()


class RunCheckpoints:
    """One run's checkpoints (see the module docstring)."""

    def __init__(
        self,
        stores: CheckpointStores,
        run_id: str,
        root: str,
        emit: Callable[[Checkpointed], None],
        note: Callable[[dict[str, object]], None],
    ) -> None:
        self._stores = stores
        self._run_id = run_id
        self._root = root
        self._emit = emit
        self._note = note
        self._first: asyncio.Future[bool] | None = None
        self._pending: asyncio.Future[bool] | None = None
        self._dirty: set[int] = set()
        """Iterations that ran (or began) a mutating call."""
        self._written: dict[int, set[str]] = {}
        """Per iteration, the paths its finished file-tool calls wrote."""
        self._open: dict[int, set[str]] = {}
        """Per iteration, the file-tool calls begun and not yet finished."""
        self._unknown: set[int] = set()
        """Iterations that changed what the run cannot name: their snapshot reads all."""
        self._taken: set[int] = set()
        self._disabled = False

    @property
    def used(self) -> bool:
        """Whether the run took (or tried to take) any checkpoint."""
        return self._first is not None

    async def before_call(self, query: PermissionQuery) -> None:
        """A call is allowed to run: before the run's first mutating call, snapshot the
        workspace; before any mutating call, wait for the last iteration's snapshot."""
        if self._disabled or not mutating(query.spec):
            return
        self._dirty.add(query.iteration)
        if query.spec.name in FILE_TOOLS:
            self._open.setdefault(query.iteration, set()).add(query.call_id)
        else:
            self._unknown.add(query.iteration)
        pending = self._pending
        if pending is not None:
            await asyncio.shield(pending)
        if self._first is None:
            self._first = asyncio.ensure_future(
                self._take(query.iteration - 1, "before the run's first change", first=True)
            )
        await asyncio.shield(self._first)

    def call_finished(self, record: ToolCallRecord) -> None:
        """A call ended: a file tool's written path is kept for its iteration's snapshot
        (one that failed may have changed anything it reached: the snapshot reads all)."""
        calls = self._open.get(record.iteration)
        if calls is None or record.call_id not in calls:
            return
        calls.discard(record.call_id)
        output = record.output
        path = output.get("path") if isinstance(output, dict) else None
        if record.success and isinstance(path, str) and os.path.isabs(path):
            self._written.setdefault(record.iteration, set()).add(path)
        else:
            self._unknown.add(record.iteration)

    def _changed(self, iteration: int) -> set[str] | None:
        """The paths iteration ``iteration`` changed, or ``None`` when it cannot say."""
        if iteration in self._unknown or self._open.get(iteration):
            return None
        return self._written.get(iteration, set())

    def iteration_finished(self, iteration: int) -> None:
        """After an iteration that ran a mutating call: snapshot it in the background."""
        if self._disabled or iteration not in self._dirty or iteration in self._taken:
            return
        self._taken.add(iteration)
        previous = self._pending
        self._pending = asyncio.ensure_future(self._after(previous, iteration))

    async def _after(self, previous: asyncio.Future[bool] | None, iteration: int) -> bool:
        if previous is not None:
            await asyncio.shield(previous)
        if self._first is not None:
            await asyncio.shield(self._first)
        if self._disabled:
            return False
        changed = self._changed(iteration)
        self._written.pop(iteration, None)
        self._open.pop(iteration, None)
        return await self._take(iteration, f"after iteration {iteration}", changed=changed)

    async def settle(self) -> None:
        """At the run's end: wait for the snapshot under way, and take the one of an
        iteration that ran a mutating call but did not end (a cancel, a limit)."""
        for iteration in sorted(self._dirty - self._taken):
            self.iteration_finished(iteration)
        if self._pending is not None:
            await asyncio.shield(self._pending)
        if self._first is not None:
            await asyncio.shield(self._first)

    async def _take(
        self,
        iteration: int,
        label: str,
        *,
        first: bool = False,
        changed: Collection[str] | None = None,
    ) -> bool:
        try:
            checkpoint: Checkpoint = await asyncio.to_thread(
                self._take_now, label, max(0, iteration), changed
            )
        except Exception as exc:  # a snapshot never fails its run
            reason = exc.message if isinstance(exc, CheckpointError) else type(exc).__name__
            if not isinstance(exc, CheckpointError):
                logger.exception("run %s: checkpoint failed", self._run_id)
            else:
                logger.warning("run %s: no checkpoint: %s", self._run_id, reason)
            self._note({"iteration": max(0, iteration), "error": reason})
            if first:
                self._disabled = True
            return False
        self._emit(Checkpointed(max(0, iteration), checkpoint.id, checkpoint.files_changed))
        return True

    def _take_now(self, label: str, iteration: int, changed: Collection[str] | None) -> Checkpoint:
        """In a worker thread: open the store (once per service) and snapshot."""
        store = self._stores.open(self._root)
        return store.take(label=label, run_id=self._run_id, iteration=iteration, changed=changed)


# -- what the service does with a run's checkpoints ------------------------------------


def run_diff(
    store: CheckpointStore, run_id: str, iteration: int | None, *, live: bool
) -> DiffResult:
    """What run ``run_id`` changed: from its first checkpoint to its last (a live run:
    to the files now), or what its iteration ``iteration`` changed."""
    checkpoints = store.checkpoints(run_id)
    if not checkpoints:
        return DiffResult((), "")
    if iteration is None:
        return store.diff(checkpoints[0].id, None if live else checkpoints[-1].id)
    for before, after in itertools.pairwise(checkpoints):
        if after.iteration == iteration:
            return store.diff(before.id, after.id)
    return DiffResult((), "")


def run_revert(
    store: CheckpointStore,
    run_id: str,
    to_iteration: int | None,
    *,
    dry_run: bool,
    force: bool,
) -> RestoreResult:
    """Put back the paths run ``run_id`` changed after its checkpoint at (or last
    before) ``to_iteration`` (``None``: its first, before any change). A path that
    differs from the run's last checkpoint is a conflict."""
    checkpoints = store.checkpoints(run_id)
    if not checkpoints:
        return empty_restore(dry_run=dry_run)
    target = checkpoints[0]
    if to_iteration is not None:
        for checkpoint in checkpoints:
            if checkpoint.iteration is not None and checkpoint.iteration <= to_iteration:
                target = checkpoint
    later = checkpoints[checkpoints.index(target) :]
    paths = store.changed_paths([c.id for c in later]) if len(later) > 1 else ()
    if not paths:
        return empty_restore(target.id, dry_run=dry_run)
    return store.restore(
        target.id, expected_id=checkpoints[-1].id, paths=paths, dry_run=dry_run, force=force
    )


def restore_to(
    store: CheckpointStore, checkpoint_id: str, *, dry_run: bool, force: bool
) -> RestoreResult:
    """Put the whole workspace back as it was at ``checkpoint_id``; a path that differs
    from the store's newest checkpoint is a conflict."""
    store.get(checkpoint_id)  # an unknown id: CheckpointNotFoundError before any read
    latest = store.latest()
    expected = latest.id if latest is not None else None
    return store.restore(checkpoint_id, expected_id=expected, dry_run=dry_run, force=force)


def conflict_words(conflicts: Collection[Note], limit: int = 5) -> str:
    """The first conflicts as one line: ``a.py (changed after ...), ...``."""
    shown = [f"{note.path} ({note.reason})" for note in list(conflicts)[:limit]]
    more = len(conflicts) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


class CheckpointOps:
    """The run service's checkpoint requests (``RunService`` inherits them): what a run
    changed, putting it back, and putting a workspace back to any checkpoint. The store's
    work runs in a worker thread."""

    active: dict[str, Any]
    store: TranscriptStore
    checkpoint_stores: CheckpointStores

    def _run_root(self, run_id: str) -> tuple[str | None, bool]:
        """The sandbox root of run ``run_id`` (``None``: it never started) and whether
        it is live (here or in another process). Blocking; ``RunNotFoundError``."""
        run = self.active.get(run_id)
        if run is not None:
            return str(run.sandbox_root), True
        for event in self.store.events(run_id):  # RunNotFoundError for an unknown run
            if event.get("method") == RUN_STARTED:
                root = event["params"].get("sandboxRoot")
                return (root if isinstance(root, str) else None), self.store.is_live(run_id)
        return None, self.store.is_live(run_id)

    def _allowed(self, run_id: str, root: str, roots: Collection[str] | None) -> None:
        """A face serving only some folders (the daemon's workspace folders) gives them
        as ``roots``: a run that worked elsewhere (another daemon's, on the same state
        dir) is neither shown nor reverted through it."""
        if roots is None:
            return
        real = os.path.realpath(root)
        if not any(_within(real, os.path.realpath(r)) for r in roots):
            raise SandboxViolationError(
                f"run {run_id!r} worked in {root}, outside this daemon's workspace folders"
            )

    async def diff(
        self, run_id: str, iteration: int | None = None, *, roots: Collection[str] | None = None
    ) -> DiffResult:
        """What run ``run_id`` changed in its workspace's files: the whole run (a live
        run: so far), or iteration ``iteration`` alone. Empty for a run that took no
        checkpoint. ``RunNotFoundError`` for an unknown run; ``SandboxViolationError``
        for a run outside ``roots``, when given."""
        from ._prepare import RunRequestError  # _prepare stands on this module

        if iteration is not None and iteration < 1:
            raise RunRequestError("iteration", f"must be at least 1, got {iteration}")

        def work() -> DiffResult:
            root, live = self._run_root(run_id)
            if root is None:
                return DiffResult((), "")
            self._allowed(run_id, root, roots)
            store = self.checkpoint_stores.open(root)
            return run_diff(store, run_id, iteration, live=live)

        return await asyncio.to_thread(work)

    async def diff_runs(self, root: str, run_ids: Sequence[str]) -> DiffResult:
        """What runs ``run_ids`` (a conversation's turns, oldest first) changed together
        in the workspace ``root``: from the first checkpoint of the first run that took
        any to the last checkpoint of the last one. Empty when none took one."""

        def work() -> DiffResult:
            store = self.checkpoint_stores.open(root)
            taken = [c for run_id in run_ids for c in store.checkpoints(run_id)]
            if not taken:
                return DiffResult((), "")
            return store.diff(taken[0].id, taken[-1].id)

        return await asyncio.to_thread(work)

    async def revert(
        self,
        run_id: str,
        *,
        to_iteration: int | None = None,
        dry_run: bool = False,
        force: bool = False,
        roots: Collection[str] | None = None,
    ) -> RestoreResult:
        """Put the files run ``run_id`` changed back as they were before it (or after its
        iteration ``to_iteration``). A file changed by someone else after the run's last
        checkpoint is a conflict: nothing is changed unless ``force``. A checkpoint is
        taken first (``restore_checkpoint_id``), so the revert can be undone.
        ``RunStateError`` for a live run, ``RunNotFoundError`` for an unknown one,
        ``SandboxViolationError`` for one outside ``roots``, when given."""
        from ._prepare import RunRequestError  # _prepare stands on this module

        if to_iteration is not None and to_iteration < 0:
            raise RunRequestError("to_iteration", f"must be at least 0, got {to_iteration}")

        def work() -> RestoreResult:
            root, live = self._run_root(run_id)
            if live:
                raise RunStateError(
                    f"run {run_id!r} is still running: its files can be reverted once it ends"
                )
            if root is None:
                return empty_restore(dry_run=dry_run)
            self._allowed(run_id, root, roots)
            self._refuse_live_in(root)
            store = self.checkpoint_stores.open(root)
            return run_revert(store, run_id, to_iteration, dry_run=dry_run, force=force)

        return await asyncio.to_thread(work)

    async def restore_checkpoint(
        self, checkpoint_id: str, *, root: Path, dry_run: bool = False, force: bool = False
    ) -> RestoreResult:
        """Put the workspace ``root`` (whose store holds the checkpoint) back as it was at
        ``checkpoint_id``; a file that differs from that store's newest checkpoint is a
        conflict unless ``force``. ``CheckpointNotFoundError`` for an unknown id,
        ``RunStateError`` while a run of this service works in that workspace."""

        def work() -> RestoreResult:
            self._refuse_live_in(str(root))
            store = self.checkpoint_stores.open(str(root))
            return restore_to(store, checkpoint_id, dry_run=dry_run, force=force)

        return await asyncio.to_thread(work)

    async def checkpoint_root(self, checkpoint_id: str, roots: Collection[str]) -> Path:
        """The workspace, at or inside one of ``roots``, whose store holds
        ``checkpoint_id``; ``CheckpointNotFoundError`` when none does."""

        def work() -> Path:
            from ..checkpoints import stored_workspaces  # its modules load on first use

            allowed = [os.path.realpath(r) for r in roots]
            for workspace in stored_workspaces(self.checkpoint_stores.state_dir):
                if not any(_within(workspace, root) for root in allowed):
                    continue
                try:
                    self.checkpoint_stores.open(workspace).get(checkpoint_id)
                except CheckpointNotFoundError:
                    continue
                except CheckpointError:
                    continue  # a moved or unreadable workspace's store
                return Path(workspace)
            raise CheckpointNotFoundError(
                f"no checkpoint {checkpoint_id} in the stores of this daemon's workspace folders"
            )

        return await asyncio.to_thread(work)

    def _refuse_live_in(self, root: str) -> None:
        """A live run of this service whose sandbox root overlaps ``root`` forbids a
        restore there: it would change files under the run's feet."""
        real = os.path.realpath(root)
        for run in list(self.active.values()):
            other = os.path.realpath(run.sandbox_root)
            if _within(real, other) or _within(other, real):
                raise RunStateError(
                    f"run {run.run_id!r} is still running in {run.sandbox_root}: its files "
                    "cannot be restored until it ends"
                )


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)
