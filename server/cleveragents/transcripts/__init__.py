"""Run transcripts: ``STATE_DIR/runs/RUN_ID.jsonl``, one line per event, written as it
happens, and read back.

This layer owns the files under the state dir: claiming a run id, writing its lines,
reading them back (a run's result, the conversation ``continueFrom`` continues), and the
run index behind ``run/list``. It stands on the core only: the daemon writes through it,
and ``cleveragents runs list|show`` reads through it without loading the daemon, pygls or
lsprotocol. It knows the wire only as the shapes of the lines it reads back (``RunResult``
and ``RunSummary`` dicts, see ``client-protocol/PROTOCOL.md``).
"""

from ._errors import RunInterruptedError, RunNotFoundError, RunStateError
from ._files import Transcript, default_state_dir, valid_run_id
from ._index import META, PROMPT_SUMMARY_MAX
from ._recorder import RunRecorder
from ._store import INTERRUPTED_MESSAGE, TranscriptStore

__all__ = [
    "INTERRUPTED_MESSAGE",
    "META",
    "PROMPT_SUMMARY_MAX",
    "RunInterruptedError",
    "RunNotFoundError",
    "RunRecorder",
    "RunStateError",
    "Transcript",
    "TranscriptStore",
    "default_state_dir",
    "valid_run_id",
]
