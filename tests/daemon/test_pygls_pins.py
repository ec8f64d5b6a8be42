"""Pins of what the daemon uses of pygls (listed in ``daemon/_server.py``'s docstring).

One test per use, asserting exactly the behaviour the daemon relies on, so that a
pygls (or lsprotocol/cattrs) upgrade that changes it fails here rather than in the
daemon: the LSP converter for ``InitializeParams``/``InitializeResult``, ``Workspace``
for the folders, and ``to_fs_path``/``from_fs_path``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cattrs
import pytest
from lsprotocol import types as lsp
from pygls.protocol import default_converter
from pygls.uris import from_fs_path, to_fs_path
from pygls.workspace import Workspace

from cleveragents.daemon import create_server

_lsp = default_converter()  # type: ignore[no-untyped-call]


def _folder(path: Path) -> dict[str, str]:
    return {"uri": path.as_uri(), "name": path.name}


def _initialized(tmp_path: Path, params: dict[str, Any]) -> Any:
    server = create_server(tmp_path / "state")
    server.initialize({"processId": None, "capabilities": {}, **params}, peer=object())  # type: ignore[arg-type]
    return server


# -- pygls.protocol.default_converter ------------------------------------------------


def test_the_converter_reads_initialize_params_from_camel_case_and_leaves_options_raw() -> None:
    raw = {
        "processId": None,
        "rootUri": "file:///tmp/a%20b",
        "rootPath": "/tmp/a b",
        "workspaceFolders": [{"uri": "file:///w", "name": "w"}],
        "capabilities": {"experimental": {"cleveragents": {"llm": True, "x": [1]}}},
        "initializationOptions": {"stateDir": 5, "maxToolOutputBytes": "many"},
        "someFutureField": {"ignored": True},
    }
    params = _lsp.structure(raw, lsp.InitializeParams)
    assert params.root_uri == "file:///tmp/a%20b"  # as sent: not decoded, not normalised
    assert params.root_path == "/tmp/a b"
    assert [(f.uri, f.name) for f in params.workspace_folders] == [("file:///w", "w")]
    # The daemon structures these two itself, strictly, naming camelCase fields in its
    # errors: the converter must hand them over as the plain JSON the client sent.
    assert params.initialization_options == {"stateDir": 5, "maxToolOutputBytes": "many"}
    assert params.capabilities.experimental == {"cleveragents": {"llm": True, "x": [1]}}


def test_the_converter_reads_absent_optional_fields_as_none() -> None:
    params = _lsp.structure({"processId": None, "capabilities": {}}, lsp.InitializeParams)
    assert params.root_uri is None
    assert params.root_path is None
    assert params.workspace_folders is None
    assert params.initialization_options is None
    assert params.capabilities.experimental is None


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ({"processId": None, "capabilities": {}, "workspaceFolders": 5}, "workspace_folders"),
        ({"processId": None, "capabilities": 3}, "capabilities"),
    ],
)
def test_the_converter_fails_a_wrong_field_with_a_validation_error_naming_its_path(
    raw: dict[str, Any], path: str
) -> None:
    # The daemon catches cattrs.BaseValidationError and turns transform_error's
    # "... @ params.PATH" into -32602 "params.camelPath: ...".
    with pytest.raises(cattrs.BaseValidationError) as info:
        _lsp.structure(raw, lsp.InitializeParams)
    (message,) = cattrs.transform_error(info.value, path="params")
    assert message.endswith(f" @ params.{path}")


def test_the_converter_writes_initialize_result_in_camel_case_without_nones() -> None:
    result = lsp.InitializeResult(
        capabilities=lsp.ServerCapabilities(
            workspace=lsp.WorkspaceOptions(
                workspace_folders=lsp.WorkspaceFoldersServerCapabilities(
                    supported=True, change_notifications=True
                )
            ),
            experimental={"cleveragents": {"protocolVersion": 1, "keep": None}},
        ),
        server_info=lsp.ServerInfo("cleveragents", "1.2.3"),
    )
    assert _lsp.unstructure(result) == {
        "capabilities": {
            "workspace": {"workspaceFolders": {"supported": True, "changeNotifications": True}},
            "experimental": {"cleveragents": {"protocolVersion": 1, "keep": None}},
        },
        "serverInfo": {"name": "cleveragents", "version": "1.2.3"},
    }


def test_the_converter_reads_did_change_workspace_folders_params() -> None:
    params = _lsp.structure(
        {"event": {"added": [{"uri": "file:///a", "name": "a"}],
                   "removed": [{"uri": "file:///b", "name": "b"}]}},
        lsp.DidChangeWorkspaceFoldersParams,
    )  # fmt: skip
    assert [f.uri for f in params.event.added] == ["file:///a"]
    assert [f.uri for f in params.event.removed] == ["file:///b"]


# -- pygls.workspace.Workspace -------------------------------------------------------


def test_the_workspace_keeps_folders_in_the_order_given_and_adds_at_the_end() -> None:
    first, second, third = (lsp.WorkspaceFolder(f"file:///{n}", n) for n in ("z", "a", "m"))
    workspace = Workspace(None, workspace_folders=[first, second])
    assert list(workspace.folders.values()) == [first, second]  # the first is the default root
    workspace.add_folder(third)
    assert list(workspace.folders.values()) == [first, second, third]


def test_the_workspace_removes_a_folder_by_the_uri_it_was_added_with() -> None:
    spaced = lsp.WorkspaceFolder("file:///tmp/a%20b", "a b")
    plain = lsp.WorkspaceFolder("file:///tmp/c", "c")
    workspace = Workspace(None, workspace_folders=[spaced, plain])
    workspace.remove_folder("file:///tmp/a%20b")  # percent-encoded, as the client sent it
    assert list(workspace.folders.values()) == [plain]
    workspace.remove_folder("file:///never/added")  # a client may name anything: no error
    assert list(workspace.folders.values()) == [plain]


def test_the_workspace_without_folders_keeps_its_root_uri() -> None:
    workspace = Workspace("file:///tmp/root", workspace_folders=[])
    assert workspace.folders == {}
    assert workspace.root_uri == "file:///tmp/root"


def test_the_daemon_takes_its_sandbox_roots_from_the_folders_first(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    server = _initialized(tmp_path, {"rootUri": (tmp_path / "elsewhere").as_uri(),
                                     "workspaceFolders": [_folder(one), _folder(two)]})  # fmt: skip
    assert server.sandbox_roots() == [str(one), str(two)]


@pytest.mark.parametrize("field", ["rootUri", "rootPath"])
def test_the_daemon_falls_back_to_the_root_without_folders(tmp_path: Path, field: str) -> None:
    root = tmp_path / "a b ü"
    value = root.as_uri() if field == "rootUri" else str(root)
    assert _initialized(tmp_path, {field: value}).sandbox_roots() == [str(root)]


def test_did_change_workspace_folders_adds_and_removes_sandbox_roots(tmp_path: Path) -> None:
    one, two, three = tmp_path / "one", tmp_path / "t w o", tmp_path / "three"
    server = _initialized(tmp_path, {"workspaceFolders": [_folder(one), _folder(two)]})
    changed = server.notifications[lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS]
    changed({"event": {"added": [_folder(three)], "removed": [_folder(two)]}})
    assert server.sandbox_roots() == [str(one), str(three)]
    changed({"event": {"added": [], "removed": [_folder(one), _folder(three)]}})
    assert server.sandbox_roots() == []


# -- pygls.uris ----------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/tmp/plain", "/tmp/a b/ü#%?x"])
def test_from_fs_path_gives_the_file_uri_that_to_fs_path_reads_back(path: str) -> None:
    uri = from_fs_path(path)
    assert uri == Path(path).as_uri()  # percent-encoded like the clients' own URIs
    assert to_fs_path(uri) == path


@pytest.mark.parametrize("uri", ["https://example.com/x", "untitled:Untitled-1"])
def test_to_fs_path_gives_none_for_a_uri_that_is_not_a_file(uri: str) -> None:
    # The daemon drops such folders from the sandbox roots (``if root``).
    assert to_fs_path(uri) is None
