"""The editor's file system over the real ``cleveragents serve --protocol acp``: with
``fs`` advertised, edits go out as ``fs/write_text_file`` (the disk untouched) and reads
come back from ``fs/read_text_file``; paths are confined before any request; without
``fs``, the disk as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kit.acp import AcpClient, Spawn, tool_updates
from kit.models import call, scripted

ORIGINAL = 'def greet():\n    return "hi"\n'
UNSAVED = 'def greet():\n    return "hi"  # unsaved\n\nprint(greet())\n'


class Editor:
    """The client's side: buffers by path, every fs request kept, permissions allowed."""

    def __init__(self, buffers: dict[str, str] | None = None) -> None:
        self.buffers = dict(buffers or {})
        self.requests: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, method: str, params: Any) -> Any:
        if method == "session/request_permission":
            return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
        self.requests.append((method, params))
        if method == "fs/write_text_file":
            self.buffers[params["path"]] = params["content"]
            return {}
        if method == "fs/read_text_file":
            lines = self.buffers[params["path"]].splitlines(keepends=True)
            first = params.get("line", 1) - 1
            limit = params.get("limit")
            return {"content": "".join(lines[first : None if limit is None else first + limit])}
        raise AssertionError(f"unexpected request {method}")


async def _turn(client: AcpClient, workspace: Path, editor: Editor) -> list[dict[str, Any]]:
    client.on_request = editor
    session = (await client.new_session(workspace))["sessionId"]
    assert await client.prompt(session, "go") == {"stopReason": "end_turn"}
    return list(tool_updates(client.updates(session)).values())


async def test_an_edit_goes_to_the_editor_as_the_whole_new_text_and_the_disk_is_untouched(
    spawn: Spawn, workspace: Path
) -> None:
    client = await spawn(
        scripted(
            {
                "toolCalls": [
                    call(
                        "builtin/file-edit",
                        path="src/greet.py",
                        old_text='"hi"',
                        new_text='"hello"',
                    )
                ]
            },
            {"toolCalls": [call("builtin/file-write", path="src/new/mod.py", content="x = 1\n")]},
            {"content": "Done."},
        ),
        fs={"writeTextFile": True},
    )
    editor = Editor()
    edit, write = await _turn(client, workspace, editor)
    greet = str(workspace / "src" / "greet.py")
    new = str(workspace / "src" / "new" / "mod.py")
    assert [(m, p["path"], p["content"]) for m, p in editor.requests] == [
        ("fs/write_text_file", greet, 'def greet():\n    return "hello"\n'),
        ("fs/write_text_file", new, "x = 1\n"),
    ]
    assert all(set(p) == {"sessionId", "path", "content"} for _, p in editor.requests)
    assert (workspace / "src" / "greet.py").read_text() == ORIGINAL
    assert not (workspace / "src" / "new").exists()
    assert edit[-1]["status"] == "completed"
    assert edit[-1]["content"] == [{
        "type": "diff", "path": greet, "oldText": ORIGINAL,
        "newText": 'def greet():\n    return "hello"\n',
    }]  # fmt: skip
    assert write[-1]["status"] == "completed"
    assert write[-1]["rawOutput"] == {"path": new, "bytes_written": 6, "created": True}
    assert write[-1]["content"] == [
        {"type": "diff", "path": new, "oldText": None, "newText": "x = 1\n"}
    ]


async def test_a_path_outside_the_sandbox_is_refused_before_any_request(
    spawn: Spawn, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret\n")
    (workspace / "link.txt").symlink_to(outside)
    client = await spawn(
        scripted(
            {
                "toolCalls": [
                    call("builtin/file-write", path="../outside.txt", content="pwned"),
                    call("builtin/file-edit", path=str(outside), old_text="secret", new_text="x"),
                    call("builtin/file-write", path="link.txt", content="pwned"),
                    call("builtin/file-read", path="../outside.txt"),
                ]
            },
            {"content": "Done."},
        ),
        fs={"readTextFile": True, "writeTextFile": True},
    )
    editor = Editor()
    calls = await _turn(client, workspace, editor)
    assert editor.requests == []
    assert [c[-1]["status"] for c in calls] == ["failed"] * 4
    assert outside.read_text() == "secret\n"


async def test_without_fs_the_tools_work_on_disk_as_before(spawn: Spawn, workspace: Path) -> None:
    client = await spawn(
        scripted(
            {"toolCalls": [call("builtin/file-read", path="src/greet.py")]},
            {
                "toolCalls": [
                    call(
                        "builtin/file-edit",
                        path="src/greet.py",
                        old_text='"hi"',
                        new_text='"hello"',
                    )
                ]
            },
            {"content": "Done."},
        ),
        fs={"readTextFile": False, "writeTextFile": False},
    )
    editor = Editor()
    read, edit = await _turn(client, workspace, editor)
    assert editor.requests == []
    assert read[-1]["rawOutput"]["content"] == ORIGINAL
    assert edit[-1]["content"][0]["newText"] == 'def greet():\n    return "hello"\n'
    assert (workspace / "src" / "greet.py").read_text() == 'def greet():\n    return "hello"\n'


async def test_a_read_returns_the_editors_unsaved_text_with_our_line_window(
    spawn: Spawn, workspace: Path
) -> None:
    client = await spawn(
        scripted(
            {"toolCalls": [call("builtin/file-read", path="src/greet.py")]},
            {
                "toolCalls": [
                    call("builtin/file-read", path="src/greet.py", start_line=2, end_line=3)
                ]
            },
            {"toolCalls": [call("builtin/file-read", path="src/greet.py", start_line=9)]},
            {"content": "Done."},
        ),
        fs={"readTextFile": True},
    )
    greet = str(workspace / "src" / "greet.py")
    editor = Editor({greet: UNSAVED})
    whole, window, past = await _turn(client, workspace, editor)
    session = editor.requests[0][1]["sessionId"]
    assert [p for _, p in editor.requests] == [
        {"sessionId": session, "path": greet},
        {"sessionId": session, "path": greet, "line": 2, "limit": 2},
        {"sessionId": session, "path": greet, "line": 9},
    ]
    assert whole[-1]["status"] == "completed"
    assert whole[-1]["rawOutput"] == {
        "path": greet, "content": UNSAVED, "start_line": 1, "end_line": 4,
        "total_lines": 4, "truncated": False,
    }  # fmt: skip
    assert window[-1]["rawOutput"] == {
        "path": greet, "content": '    return "hi"  # unsaved\n\n', "start_line": 2,
        "end_line": 3, "total_lines": None, "truncated": False,
    }  # fmt: skip
    assert past[-1]["status"] == "failed"
    assert "past the end" in past[-1]["rawOutput"]["error"]
    assert (workspace / "src" / "greet.py").read_text() == ORIGINAL
