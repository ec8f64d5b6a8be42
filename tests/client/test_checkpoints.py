"""Checkpoints through the real daemon and the Python client: what each built-in tool and
the shell change shows in run/diff and is undone by run/revert, on real files; a
workspace inside a git repository keeps its status, index, log and refs byte for byte;
run/checkpoint reaches the client; checkpoints off; a conflict refused, forced, undone."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cleveragents.client import Client, RpcError
from kit.models import call, scripted, shell

OVER_CAP = 10 * 1024 * 1024 + 1


def write(path: str, content: str) -> dict[str, Any]:
    return call("builtin/file-write", path=path, content=content)


def seed(root: Path) -> None:
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("x = 1\nprint(x)\n")
    (root / "notes.md").write_text("# notes\n")
    (root / "old.txt").write_text("old\n")
    (root / "doomed").mkdir()
    (root / "doomed" / "a.txt").write_text("a\n")
    (root / "binary.bin").write_bytes(b"\x00\x01\x02")


def snapshot(root: Path) -> dict[str, Any]:
    """Every entry under ``root`` (but ``.git``): kind, mode bits, content or target."""
    found: dict[str, Any] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in [*dirnames, *filenames]:
            path = Path(dirpath, name)
            rel = str(path.relative_to(root))
            if path.is_symlink():
                found[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                found[rel] = ("dir",)
            else:
                data = path.read_bytes()
                found[rel] = ("file", path.stat().st_mode & 0o777, hashlib.sha256(data).hexdigest())
    return found


EDITS = [
    {"content": "write and edit", "toolCalls": [
        write("new.txt", "brand new\n"),
        call("builtin/file-edit", path="notes.md", old_text="# notes", new_text="# Notes"),
    ]},
    {"content": "shell", "toolCalls": [shell(
        "sed -i 's/x = 1/x = 2/' src/app.py && rm binary.bin && mv old.txt moved.txt"
        " && mkdir -p fresh/dir && printf 'in a new dir\\n' > fresh/dir/f.txt"
        " && rm -r doomed && printf 'bin\\000\\001' > fresh/blob.bin && ln -s src/app.py link"
        f" && head -c {OVER_CAP} /dev/zero > big.dat"
    )]},
    {"content": "done"},
]  # fmt: skip


async def test_each_tool_s_and_the_shell_s_changes_show_in_the_diff_and_are_reverted(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    seed(root)
    before = snapshot(root)
    checkpoints: list[dict[str, Any]] = []

    def heard(method: str, params: dict[str, Any]) -> None:
        if method == "run/checkpoint":
            checkpoints.append(params)

    async with await Client.spawn(root, state_dir=tmp_path / "state") as client:
        client.on_event(heard)
        result = await client.run("go", model=scripted(*EDITS), run_id="r1",
                                  automation_profile="full-auto")  # fmt: skip
        assert result["status"] == "completed"
        assert all(r["success"] for r in result["toolCallHistory"]), result
        assert [(c["iteration"], c["filesChanged"]) for c in checkpoints][:2] == [(0, 0), (1, 2)]
        assert len(checkpoints) == 3
        assert all(len(c["checkpointId"]) == 16 for c in checkpoints)

        diff = await client.diff("r1")
        files = {f["path"]: f for f in diff["files"]}
        assert {p: f["status"] for p, f in files.items()} == {
            "big.dat": "added", "binary.bin": "deleted", "doomed/a.txt": "deleted",
            "fresh/blob.bin": "added", "fresh/dir/f.txt": "added", "link": "added",
            "moved.txt": "added", "new.txt": "added", "notes.md": "modified",
            "old.txt": "deleted", "src/app.py": "modified",
        }  # fmt: skip
        assert files["src/app.py"]["additions"] == files["src/app.py"]["deletions"] == 1
        assert files["fresh/blob.bin"]["binary"]
        assert files["big.dat"]["binary"]  # over the cap: not captured, shown without lines
        assert "+x = 2" in diff["patch"]
        assert "new file mode 120000" in diff["patch"]  # the link, as a link
        first = await client.diff("r1", iteration=1)
        assert sorted(f["path"] for f in first["files"]) == ["new.txt", "notes.md"]

        dry = await client.revert("r1", dry_run=True)
        assert dry["applied"] is False
        assert snapshot(root) != before
        # The file over the cap was never captured: a revert cannot put back what it would
        # remove, so it stops there unless forced, and then leaves it and says so.
        refused = await client.revert("r1")
        assert refused["applied"] is False
        assert [c["path"] for c in refused["conflicts"]] == ["big.dat"]
        reverted = await client.revert("r1", force=True)
        assert reverted["applied"] is True
        assert reverted["conflicts"] == []
        assert [s["path"] for s in reverted["skipped"]] == ["big.dat"]
        (root / "big.dat").unlink()
        assert snapshot(root) == before


def git(root: Path, *args: str) -> bytes:
    env = {**os.environ, "GIT_AUTHOR_DATE": "2026-01-01T00:00:00", "GIT_COMMITTER_DATE":
           "2026-01-01T00:00:00", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    return subprocess.run(["git", *args], cwd=root, env=env, check=True,
                          capture_output=True).stdout  # fmt: skip


def repository_state(root: Path) -> dict[str, Any]:
    """The user's git state: status, the index file's bytes, the log, every ref and the
    bytes of every file under .git."""
    under_git = {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted((root / ".git").rglob("*")) if p.is_file()
    }  # fmt: skip
    return {
        "status": git(root, "status", "--porcelain=v2", "--untracked-files=all"),
        "log": git(root, "log", "--all", "--format=%H %s"),
        "refs": git(root, "for-each-ref"),
        "files": under_git,
    }


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to build a repository")
async def test_a_git_repository_is_byte_identical_after_a_run_its_checkpoints_and_revert(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    seed(repo)
    (repo / ".gitignore").write_text("*.log\n")
    (repo / "ignored.log").write_text("not captured\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "first")
    (repo / "notes.md").write_text("# staged change\n")
    git(repo, "add", "notes.md")
    (repo / "src" / "app.py").write_text("x = 1  # unstaged\nprint(x)\n")
    workspace = repo / "src"  # a workspace inside the repository
    before = repository_state(repo)
    files_before = snapshot(workspace)
    model = scripted(
        {"content": "", "toolCalls": [write("app.py", "changed\n"), shell("mkdir pkg && "
                                                                           "touch pkg/__init__.py")]},
        {"content": "done"},
    )  # fmt: skip
    async with await Client.spawn(workspace, state_dir=tmp_path / "state") as client:
        result = await client.run("go", model=model, run_id="r1", automation_profile="full-auto")
        assert result["status"] == "completed"
        assert repository_state(repo) != before  # the run did change the work tree...
        assert (await client.diff("r1"))["files"]
        reverted = await client.revert("r1")
        assert reverted["applied"] is True
    after = repository_state(repo)
    assert snapshot(workspace) == files_before
    assert after["status"] == before["status"]
    assert after["log"] == before["log"]
    assert after["refs"] == before["refs"]
    assert after["files"] == before["files"]  # the index, refs, logs, config: every byte


async def test_a_conflict_is_refused_then_forced_and_the_revert_undone_by_its_checkpoint(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("original\n")
    model = scripted({"content": "", "toolCalls": [write("a.txt", "the run's\n")]},
                     {"content": "done"})  # fmt: skip
    async with await Client.spawn(root, state_dir=tmp_path / "state") as client:
        await client.run("go", model=model, run_id="r1", automation_profile="full-auto")
        (root / "a.txt").write_text("the user's\n")
        refused = await client.revert("r1")
        assert refused["applied"] is False
        assert [c["path"] for c in refused["conflicts"]] == ["a.txt"]
        assert "changed after checkpoint" in refused["conflicts"][0]["reason"]
        assert (root / "a.txt").read_text() == "the user's\n"
        forced = await client.revert("r1", force=True)
        assert forced["applied"] is True
        assert (root / "a.txt").read_text() == "original\n"
        undo = await client.restore_checkpoint(forced["restoreCheckpointId"])
        assert undo["applied"] is True
        assert (root / "a.txt").read_text() == "the user's\n"
        with pytest.raises(RpcError) as unknown:
            await client.restore_checkpoint("0123456789abcdef")
        assert unknown.value.code == -32032
        with pytest.raises(RpcError) as malformed:
            await client.restore_checkpoint("../../etc")
        assert malformed.value.code == -32032
        with pytest.raises(RpcError) as no_run:
            await client.diff("no-such-run")
        assert no_run.value.code == -32022


async def test_checkpoints_off_for_a_run_or_for_the_daemon_take_none(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    model = scripted({"content": "", "toolCalls": [write("a.txt", "a\n")]}, {"content": "done"})
    for daemon_wide in (False, True):
        heard: list[str] = []
        async with await Client.spawn(
            root, state_dir=tmp_path / f"state-{daemon_wide}", checkpoints=not daemon_wide
        ) as client:
            client.on_event(lambda method, params, heard=heard: heard.append(method))
            await client.run("go", model=model, run_id="r1", automation_profile="full-auto",
                             checkpoints=daemon_wide)  # fmt: skip
            assert "run/checkpoint" not in heard
            assert heard[-1] == "run/finished"
            assert await client.diff("r1") == {"files": [], "patch": ""}
        (root / "a.txt").unlink()


async def test_a_fork_starts_from_an_iteration_s_conversation_and_files(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    model = scripted(
        {"content": "one", "toolCalls": [write("a.txt", "1\n")]},
        {"content": "two", "toolCalls": [write("a.txt", "2\n")]},
        {"content": "done"},
    )
    async with await Client.spawn(root, state_dir=tmp_path / "state") as client:
        await client.run("go", model=model, run_id="r1", automation_profile="full-auto")
        fork = await client.run("again", model=scripted({"content": "forked"}), run_id="f1",
                                fork_from={"run_id": "r1", "iteration": 1})  # fmt: skip
        assert fork["status"] == "completed"
        assert (root / "a.txt").read_text() == "2\n"
        await client.run("again", model=scripted({"content": "forked"}), run_id="f2",
                         fork_from={"runId": "r1", "iteration": 1, "restoreFiles": True})  # fmt: skip
        assert (root / "a.txt").read_text() == "1\n"
        with pytest.raises(RpcError) as both:
            await client.run("x", model=scripted({"content": "x"}), continue_from="r1",
                             fork_from={"run_id": "r1", "iteration": 1})  # fmt: skip
        assert both.value.code == -32602
