"""Tool outputs the wire can carry: finite JSON, and at most ``maxToolOutputBytes``.

:class:`OutputCap` is the ``ToolRunner`` output filter of every daemon run. An output
holding ``NaN`` or ``Infinity`` fails its record (JSON has no such numbers, and the daemon
never writes them). An output whose JSON text is larger than the cap is cut for the
record, the notifications and the model: the record's ``output`` becomes a string that
starts with the first bytes of the JSON text and ends by saying the full size and the
absolute path of the file under the state dir that holds the whole output:
``STATE_DIR/outputs/RUN_ID/N-CALL_ID.json`` (the output as JSON), or ``.txt`` for a
string output (its text as is), where ``N`` numbers the run's cut outputs from 1.

The file is created beneath the state dir's pinned descriptor, ``O_EXCL`` and 0600, in
0700 folders reached without following a link (:mod:`cleveragents.statedir`): a link
planted at ``outputs`` or at the run's folder is refused, never written through.

What a run keeps on disk is bounded too: at most :data:`MAX_KEPT_BYTES_PER_RUN` bytes
of outputs (cut ones and pruned ones alike). Past it an output is still cut for the
record and the model, but not kept; its note says why. A tool (an MCP server, a client
tool) answering its largest allowed output in a loop fills no disk.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import re
import threading
from pathlib import Path

from ..statedir import StateDir, write_all
from ..tool import JSONValue, ToolError

logger = logging.getLogger(__name__)

DEFAULT_MAX_TOOL_OUTPUT_BYTES = 1024 * 1024
MAX_TOOL_OUTPUT_BYTES = 16 * 1024 * 1024
"""The highest cap a client may set: a record quotes its output's JSON text, which at most
doubles it when escaped again, and must still fit one 64 MiB frame with room to spare."""
MAX_KEPT_BYTES_PER_RUN = 256 * 1024 * 1024
"""The most a run keeps under ``STATE_DIR/outputs/RUN_ID/`` (see the module docstring)."""

_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_KEPT = re.compile(r"; the full output is in (/[^\n]+)\]\Z")
"""The end of an output the cap cut, naming the file that keeps it."""


class NonFiniteOutputError(ToolError):
    """The tool returned NaN or Infinity, which JSON cannot carry."""


class OutputCap:
    """The output filter of one run (see the module docstring)."""

    def __init__(
        self,
        state: StateDir,
        run_id: str,
        max_bytes: int,
        max_kept_bytes: int = MAX_KEPT_BYTES_PER_RUN,
    ) -> None:
        self.state = state
        self.run_id = run_id
        self.outputs_dir = state.path / "outputs" / run_id
        self.max_bytes = max_bytes
        self.max_kept_bytes = max_kept_bytes
        self._kept = itertools.count(1)
        self._kept_bytes = 0
        self._lock = threading.Lock()  # the filter may run in a tool's thread

    def __call__(self, tool_name: str, call_id: str, output: JSONValue) -> JSONValue:
        if output is None or isinstance(output, bool | int):
            return output
        if isinstance(output, str) and len(output) <= self.max_bytes // 4:
            return output  # at most 4 UTF-8 bytes a character: certainly under the cap
        try:
            text = output if isinstance(output, str) else _encode(output)
        except ValueError:
            raise NonFiniteOutputError(
                f"tool {tool_name} returned a non-finite number (NaN or Infinity), "
                "which JSON cannot carry"
            ) from None
        data = text.encode("utf-8", "surrogatepass")
        if len(data) <= self.max_bytes:
            return output
        return self._cut(call_id, data, ".txt" if isinstance(output, str) else ".json")

    def keep(self, call_id: str, tool_name: str, text: str) -> str | None:
        """The context budget's keeper: where a pruned output is kept whole (a file of
        this run's outputs folder), or ``None`` when it cannot be kept. An output the cap
        already cut names its file, which is reused rather than written twice."""
        already = _KEPT.search(text[-600:])
        if already is not None:
            return already.group(1)
        path, error = self._write(call_id, text.encode("utf-8", "surrogatepass"), ".txt")
        if error is not None:
            logger.warning("cannot keep a pruned output of %s in %s: %s", tool_name, path, error)
            return None
        return str(path)

    def _write(self, call_id: str, data: bytes, suffix: str) -> tuple[Path, str | None]:
        """Write ``data`` as the run's next kept output: its path, and why it was not
        written (the run's budget spent, the OS error's text) when it was not."""
        # Numbered: call ids may repeat in a run (a model may reuse them), or differ only
        # in characters a file name cannot hold; no kept output may overwrite another's.
        with self._lock:
            if self._kept_bytes + len(data) > self.max_kept_bytes:
                why = (
                    f"this run already keeps {self._kept_bytes} bytes of outputs, "
                    f"at most {self.max_kept_bytes}"
                )
                return self.outputs_dir, why
            self._kept_bytes += len(data)
            name = f"{next(self._kept):05d}-{_UNSAFE.sub('_', call_id)[:100] or 'call'}{suffix}"
        path = self.outputs_dir / name
        try:
            folder = self.state.folder("outputs", self.run_id, create=True)
            assert folder is not None
            with folder:
                fd = folder.create(name)
            try:
                write_all(fd, data)
            finally:
                os.close(fd)
        except OSError as exc:
            with self._lock:
                self._kept_bytes -= len(data)
            return path, str(exc.strerror or exc)
        return path, None

    def _cut(self, call_id: str, data: bytes, suffix: str) -> str:
        path, error = self._write(call_id, data, suffix)
        if error is None:
            where = f"the full output is in {path}"
        else:
            logger.warning("cannot keep a cut tool output in %s: %s", path, error)
            where = f"the full output could not be kept ({error})"
        head = data[: self.max_bytes].decode("utf-8", "ignore")
        return f"{head}\n[output cut at {self.max_bytes} of {len(data)} bytes; {where}]"
