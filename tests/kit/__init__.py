"""The shared test kit: one copy of each helper the test folders use, so test modules
import this package and never each other (``pythonpath = ["tests"]`` puts it on the path).

- ``models``: scripted model specs and tool calls (``scripted``, ``call``, ``shell``,
  ``script_file``), the hanging run and its client tool.
- ``paths``: the repository's root, the MCP test servers, the TypeScript package.
- ``wait``: ``wait_for``, a bounded wait on what another process does.
- ``lsp``: the real daemon driven by pytest-lsp (``Session``, ``make_client``,
  ``initialize_params``).
- ``rawpeer``: a raw daemon subprocess for bytes pytest-lsp would not send.
- ``tcp``: ``serve --tcp`` on a port the daemon picks.
- ``inprocess``: the real dispatcher in process, and a fake peer for the run manager.
- ``acp``: a small ACP client for ``serve --protocol acp``.
- ``acp_inprocess``: the real ACP agent behind its dispatcher, in process (for fuzzing).
- ``probes``: a cheap request timed while an attack goes on (median within 100 ms).
- ``cli``: the real ``cleveragents`` command with a clean environment.
- ``mcp``: the MCP test servers, started and always stopped.

The fixtures every folder shares (``state_dir``) live in ``tests/conftest.py``; a folder's
own (its ``workspace`` contents, its daemon) in that folder's ``conftest.py``.
"""
