"""``cleveragents chat`` as a person uses it, on a pseudo-terminal read through a terminal
emulator: each message continues the conversation (an approval on the way), Ctrl-C
cancels a turn and the chat goes on with its words kept, the slash commands, line
editing (history, multi-line), ``--continue``; and off a terminal, a clear refusal."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pexpect
import pytest
from cli_kit import BOUND_S, Screen, openai_model, openai_text

from cleveragents.client._chat import MESSAGE_HEAD, SUMMARY_HEAD, SUMMARY_REQUEST
from cleveragents.transcripts import TranscriptStore
from kit.cli import COMMAND, clean_env, cli, meta, runs, workspace
from kit.loopback import LoopbackServer, Recorded, Reply, data, sse_reply
from kit.models import script_file

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX pseudo-terminals")

COLUMNS, LINES = 100, 60
CTRL_D, ALT_ENTER, UP = "\x04", "\x1b\r", "\x1b[A"


class ChatOnPty:
    """``cleveragents chat ARGS`` on a pseudo-terminal in the workspace, its screen read
    through ``Screen``; every wait is bounded."""

    def __init__(self, tmp_path: Path, *args: str, **env: str) -> None:
        self.screen = Screen(COLUMNS, LINES)
        command = [*COMMAND, "chat", "--state-dir", str(tmp_path / "state"), *args]
        # A real terminal answers prompt_toolkit's cursor position request; pyte does not.
        environment = clean_env(tmp_path, PROMPT_TOOLKIT_NO_CPR="1", **env)
        self.child = pexpect.spawn(
            command[0], command[1:], cwd=str(workspace(tmp_path)), env=environment,
            encoding="utf-8", dimensions=(LINES, COLUMNS), timeout=BOUND_S,
        )  # fmt: skip
        self.child.logfile_read = self.screen

    def until(self, done: Callable[[list[str]], bool], what: str) -> list[str]:
        """Read the output until the screen satisfies ``done``; its lines then."""
        deadline = time.monotonic() + BOUND_S
        while True:
            lines = self.screen.lines()
            if done(lines):
                return lines
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"no {what} within {BOUND_S} s; the screen:\n" + "\n".join(lines)
                )
            try:
                self.child.read_nonblocking(65536, timeout=0.1)
            except pexpect.TIMEOUT:
                pass
            except pexpect.EOF:
                lines = self.screen.lines()
                if done(lines):
                    return lines
                raise AssertionError(
                    f"the chat ended before {what}; the screen:\n" + "\n".join(lines)
                ) from None

    def showing(self, text: str) -> list[str]:
        """Wait until ``text`` is on the screen (it may wrap); the screen's lines then."""
        return self.until(lambda lines: text in unwrapped(lines), repr(text))

    def prompt(self) -> list[str]:
        """Wait for an empty prompt on the last line."""
        return self.until(lambda lines: bool(lines) and lines[-1] == ">", "prompt")

    def send(self, text: str) -> None:
        """Type ``text`` and Enter at the next empty prompt."""
        self.prompt()
        self.child.send(text + "\r")

    def leave(self) -> int:
        """Ctrl-D at the prompt; the exit status."""
        self.prompt()
        self.child.send(CTRL_D)
        return self.wait()

    def wait(self) -> int:
        self.child.expect(pexpect.EOF)
        self.child.close()
        assert self.child.exitstatus is not None, self.child.signalstatus
        return int(self.child.exitstatus)

    def close(self) -> None:
        self.child.close(force=True)


def unwrapped(lines: list[str]) -> str:
    """The screen's text, a line the terminal wrapped joined again."""
    return "".join(line + ("" if len(line) == COLUMNS else "\n") for line in lines)


@pytest.fixture
def chats() -> Any:
    """Starts chats; each is closed at the end of the test, whatever happened."""
    started: list[ChatOnPty] = []

    def start(tmp_path: Path, *args: str, **env: str) -> ChatOnPty:
        started.append(ChatOnPty(tmp_path, *args, **env))
        return started[-1]

    yield start
    for chat in started:
        chat.close()


# -- a model on loopback that follows a plan --------------------------------------------------


def _chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    return data({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})  # fmt: skip


class Plan:
    """Answers each chat-completions request with the next step: ``"text"`` streams a
    text, ``("call", TOOL, ARGUMENTS)`` calls the tool whose wire name holds TOOL,
    ``("hang", TEXT)`` streams TEXT and holds the connection (a model still thinking)."""

    def __init__(self, *steps: Any) -> None:
        self.steps = list(steps)

    def __call__(self, recorded: Recorded) -> Reply:
        step = self.steps.pop(0)
        if isinstance(step, str):
            return openai_text(step)
        if step[0] == "hang":
            return openai_text(step[1], hang=True)
        _, tool, arguments = step
        name = next(t["function"]["name"] for t in recorded.body["tools"]
                    if tool in t["function"]["name"])  # fmt: skip
        call = {"index": 0, "id": "call_1", "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)}}  # fmt: skip
        return sse_reply(_chunk({"role": "assistant", "content": None, "tool_calls": [call]}),
                         _chunk({}, "tool_calls"), "data: [DONE]\n\n")  # fmt: skip


def said(request: Recorded, role: str) -> list[str]:
    """The texts of ``role``'s messages in a chat-completions request."""
    return [m.get("content") or "" for m in request.body["messages"] if m["role"] == role]


def chain(state: Path) -> list[tuple[str, str | None, str]]:
    """``(run id, the run it continued, status)`` of each run, oldest first."""
    return [(s["runId"], meta(state, s["runId"]).get("continueFrom"), s["status"])
            for s in reversed(runs(state))]  # fmt: skip


# -- the conversation ---------------------------------------------------------------------------


def test_three_messages_make_one_conversation_with_an_approval_on_the_way(
    tmp_path: Path, chats: Any
) -> None:
    notes = "- fixed the parser\n"
    plan = Plan("Hello, ready when you are.", ("call", "file-write", {"path": "notes.md", "content": notes}),
                "Written.", "You asked me to write notes.md.")  # fmt: skip
    with LoopbackServer(respond=plan) as server:
        chat = chats(tmp_path, "-m", openai_model(server), OPENAI_API_KEY="unused")
        chat.send("hi")
        chat.showing("Hello, ready when you are.")
        chat.send("write the notes")
        asking = chat.showing("allow? [y]es / [n]o / [a]lways")
        chat.child.send("y\r")
        chat.showing("Written.")
        chat.send("what did I ask?")
        final = chat.showing("You asked me to write notes.md.")
        assert chat.leave() == 0
    assert (workspace(tmp_path) / "notes.md").read_text() == notes
    assert asking.index("? builtin/file-write wants to run") > asking.index("> write the notes")
    assert "> hi" in final
    assert "> what did I ask?" in final
    # Each message went with the whole conversation before it, tool call and result included.
    last = server.requests[-1]
    assert said(last, "user") == ["hi", "write the notes", "what did I ask?"]
    assert said(last, "assistant")[0] == "Hello, ready when you are."
    [result] = said(last, "tool")
    assert "notes.md" in result
    # ... as runs, each continuing the one before.
    [(first, none, s1), (second, after_first, s2), (_, after_second, s3)] = chain(
        tmp_path / "state"
    )
    assert (none, after_first, after_second) == (None, first, second)
    assert (s1, s2, s3) == ("completed", "completed", "completed")


def test_ctrl_c_cancels_the_turn_keeps_its_words_and_the_chat_goes_on(
    tmp_path: Path, chats: Any
) -> None:
    partial = "The parser, as far as I can see so far,"
    plan = Plan(("hang", partial), "Second answer.")
    with LoopbackServer(respond=plan) as server:
        chat = chats(tmp_path, "-m", openai_model(server), OPENAI_API_KEY="unused")
        chat.send("explain")
        chat.showing("so far,")  # streamed; the model hangs
        chat.child.sendintr()
        chat.showing("■ cancelled")
        chat.send("go on")
        final = chat.showing("Second answer.")
        assert chat.leave() == 0  # the chat went on: the cancel did not end it
    assert partial in final  # kept on the screen above the cancelled turn's summary
    # The next message continued the conversation, the interrupted message in it.
    assert said(server.requests[-1], "user") == ["explain", "go on"]
    state = tmp_path / "state"
    [(first, _, status), (_, continued, _)] = chain(state)
    assert (status, continued) == ("cancelled", first)
    assert TranscriptStore(state).result(first)["content"] == partial


def test_at_the_prompt_ctrl_c_clears_the_line_then_a_second_one_on_an_empty_line_leaves(
    tmp_path: Path, chats: Any
) -> None:
    chat = chats(tmp_path, "-m", script_file(tmp_path, {"content": "unused"}))
    chat.prompt()
    chat.child.send("a draft")
    chat.showing("> a draft")
    chat.child.sendintr()  # at the prompt, Ctrl-C is a key: it clears the line
    chat.until(lambda lines: lines[-1] == ">" and "> a draft" not in lines, "a cleared line")
    chat.child.sendintr()
    chat.showing("Ctrl-C again, Ctrl-D or /exit to leave the chat")
    chat.prompt()
    chat.child.sendintr()
    assert chat.wait() == 0
    assert runs(tmp_path / "state") == []  # nothing was sent


# -- slash commands ---------------------------------------------------------------------------


def test_slash_commands_switch_the_model_and_profile_list_runs_and_help(
    tmp_path: Path, chats: Any
) -> None:
    first = script_file(tmp_path, {"content": "Answer from the first model."}, name="a.json")
    other = script_file(tmp_path, {"content": "Answer from the other model."}, name="b.json")
    chat = chats(tmp_path, "-m", first)
    chat.send("/help")
    lines = chat.showing("/exit")
    for command in ("/model [SPEC]", "/profile [NAME]", "/runs", "/compact", "/diff", "/undo"):
        assert any(line.strip().startswith(command) for line in lines), command
    chat.send("one")
    chat.showing("Answer from the first model.")
    chat.send("/model")
    chat.showing(f"model: {first}")
    chat.send("/model nosuch:model")
    chat.showing("/model: unknown model provider 'nosuch'")
    chat.send(f"/model {other}")
    chat.showing("(from the next message on)")
    chat.send("/profile nosuch")
    chat.showing("/profile: unknown profile 'nosuch'; choose one of")
    chat.send("/profile trusted")
    chat.showing("profile: trusted (from the next message on)")
    chat.send("two")
    chat.showing("Answer from the other model.")
    chat.send("/runs")
    listed = chat.showing("calls two")
    chat.send("/exit")
    assert chat.wait() == 0
    state = tmp_path / "state"
    [(one, _, _), (two, continued, _)] = chain(state)
    assert continued == one  # the conversation went on across the switch
    assert (meta(state, one)["model"], meta(state, two)["model"]) == (first, other)
    assert (meta(state, one)["profile"], meta(state, two)["profile"]) == ("supervised", "trusted")
    rows = listed[listed.index("> /runs") + 1 :][:2]
    assert rows[0].split() == ["1", one, "completed", "0", "tool", "calls", "one"]
    assert rows[1].split() == ["2", two, "completed", "0", "tool", "calls", "two"]


# -- /diff, /undo and /restore (issue 24, item 10) ------------------------------------


def test_undo_puts_back_the_last_turn_refusing_a_later_edit_and_restore_undoes_it(
    tmp_path: Path, chats: Any
) -> None:
    ws = workspace(tmp_path)
    notes, draft = "- fixed the parser\n", "a draft\n"
    plan = Plan(("call", "file-write", {"path": "notes.md", "content": notes}), "Written.",
                ("hang", "Let me think about"),
                ("call", "file-write", {"path": "b.md", "content": draft}), "Drafted.",
                "Going on.")  # fmt: skip
    with LoopbackServer(respond=plan) as server:
        chat = chats(tmp_path, "-m", openai_model(server), OPENAI_API_KEY="unused")
        chat.send("write the notes")
        chat.showing("allow? [y]es / [n]o / [a]lways")
        chat.child.send("a\r")  # always: not asked again in this chat
        chat.showing("Written.")
        chat.showing(" notes.md | 1 + (new)")  # each turn ends with its diffstat, as run does
        chat.send("explain")
        chat.showing("think about")
        chat.child.sendintr()
        chat.showing("■ cancelled")
        chat.send("draft b")
        chat.showing("Drafted.")
        assert (ws / "b.md").read_text() == draft

        chat.send("/diff")
        shown = chat.showing("2 files changed, 2 insertions(+)")
        assert " b.md     | 1 + (new)" in shown
        assert " notes.md | 1 + (new)" in shown
        assert "+- fixed the parser" in shown

        (ws / "b.md").write_text("the user's edit\n")
        chat.send("/undo")
        chat.showing("refused, nothing was changed")
        chat.showing("b.md: changed after checkpoint")
        assert (ws / "b.md").read_text() == "the user's edit\n"

        chat.send("/undo force")
        undone = chat.showing("the next message goes on from before that turn")
        assert not (ws / "b.md").exists()
        assert (ws / "notes.md").read_text() == notes  # the first turn's file stays
        [checkpoint] = re.findall(r"undo it: /restore ([0-9a-f]{16})", "\n".join(undone))

        chat.send(f"/restore {checkpoint}")
        chat.showing(f"/restore of checkpoint {checkpoint}: 1 file put back")
        assert (ws / "b.md").read_text() == "the user's edit\n"

        chat.send("and now?")
        chat.showing("Going on.")
        assert chat.leave() == 0
    # The undone turn is out of the conversation; the cancelled one's words are in it.
    assert said(server.requests[-1], "user") == ["write the notes", "explain", "and now?"]
    [(first, _, s1), (second, c2, s2), (_, c3, _), (_, c4, _)] = chain(tmp_path / "state")
    assert (s1, s2) == ("completed", "cancelled")
    assert (c2, c3, c4) == (first, second, second)  # the last went on from before the third


def test_compact_summarises_and_the_next_message_starts_from_the_summary_alone(
    tmp_path: Path, chats: Any
) -> None:
    summary = "The user greeted me; nothing else happened."
    plan = Plan("First answer.", summary, "Fresh answer.")
    with LoopbackServer(respond=plan) as server:
        chat = chats(tmp_path, "-m", openai_model(server), OPENAI_API_KEY="unused")
        chat.send("hi")
        chat.showing("First answer.")
        chat.send("/compact")
        chat.showing("compacted: the next message starts a new conversation")
        chat.send("and now?")
        chat.showing("Fresh answer.")
        assert chat.leave() == 0
    asked, after = server.requests[1], server.requests[2]
    assert said(asked, "user") == ["hi", SUMMARY_REQUEST]
    assert not asked.body.get("tools")  # the summary turn may call no tool
    assert said(after, "user") == [f"{SUMMARY_HEAD}\n\n{summary}\n\n{MESSAGE_HEAD}\n\nand now?"]
    assert said(after, "assistant") == []  # nothing of the old conversation but the summary
    [(first, _, _), (_, summarised_from, _), (_, continued, _)] = chain(tmp_path / "state")
    assert summarised_from == first  # the summary turn read the conversation
    assert continued is None  # the message after it started a new one


# -- line editing -----------------------------------------------------------------------------


def test_a_message_spans_lines_with_alt_enter_or_a_trailing_backslash(
    tmp_path: Path, chats: Any
) -> None:
    chat = chats(tmp_path, "-m", script_file(tmp_path, {"content": "Got it."}))
    chat.send(f"line one{ALT_ENTER}line two\\\rline three")
    chat.showing("Got it.")
    assert chat.leave() == 0
    [summary] = runs(tmp_path / "state")
    assert meta(tmp_path / "state", summary["runId"])["prompt"] == "line one\nline two\nline three"


def test_up_recalls_a_message_of_an_earlier_chat_from_a_private_history_file(
    tmp_path: Path, chats: Any
) -> None:
    model = script_file(tmp_path, {"content": "Noted."})
    chat = chats(tmp_path, "-m", model)
    chat.send("remember this message")
    chat.showing("Noted.")
    assert chat.leave() == 0
    history = tmp_path / "state" / "chat-history"
    assert history.stat().st_mode & 0o777 == 0o600
    again = chats(tmp_path, "-m", model)
    again.prompt()
    again.child.send(UP)
    again.showing("> remember this message")
    again.child.send("\r")
    again.showing("Noted.")
    assert again.leave() == 0
    state = tmp_path / "state"
    assert [meta(state, s["runId"])["prompt"] for s in runs(state)] == ["remember this message"] * 2


# -- resuming, and off a terminal --------------------------------------------------------------


def test_chat_continue_resumes_the_latest_conversation_with_its_model(
    tmp_path: Path, chats: Any
) -> None:
    model = script_file(tmp_path, {"content": "Same model answering."})
    state = tmp_path / "state"
    out = cli(tmp_path, "run", "-m", model, "--state-dir", str(state), "the first question",
              cwd=workspace(tmp_path))  # fmt: skip
    assert out.returncode == 0, out.stderr
    [earlier] = runs(state)
    chat = chats(tmp_path, "--continue")  # no model given: the continued run's
    chat.showing(f"continuing run {earlier['runId']}: the first question")
    chat.send("and the second")
    chat.showing("Same model answering.")
    assert chat.leave() == 0
    latest = runs(state)[0]["runId"]
    assert meta(state, latest)["continueFrom"] == earlier["runId"]
    assert meta(state, latest)["model"] == model


def test_off_a_terminal_chat_refuses_and_names_what_to_use_instead(tmp_path: Path) -> None:
    model = script_file(tmp_path, {"content": "unused"})
    out = cli(tmp_path, "chat", "-m", model, "--state-dir", str(tmp_path / "state"),
              input="hello\n", cwd=workspace(tmp_path))  # fmt: skip
    assert out.returncode == 2
    assert out.stderr.startswith("cleveragents chat: needs a terminal, and stdin is not one")
    assert "cleveragents run" in out.stderr
    assert runs(tmp_path / "state") == []


def test_chat_continue_with_an_unknown_run_is_a_usage_error(tmp_path: Path) -> None:
    model = script_file(tmp_path, {"content": "unused"})
    env = {"TERM": "dumb"}
    # stdin and stdout must be terminals to get that far: run it on a pseudo-terminal.
    child = pexpect.spawn(
        COMMAND[0], [*COMMAND[1:], "chat", "-m", model, "--continue", "zzzz",
                     "--state-dir", str(tmp_path / "state")],
        cwd=str(workspace(tmp_path)), env=clean_env(tmp_path, **env), encoding="utf-8",
        timeout=BOUND_S,
    )  # fmt: skip
    try:
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 2
    assert "cleveragents chat: --continue: unknown run 'zzzz'" in (child.before or "")
    assert runs(tmp_path / "state") == []


def test_an_mcp_servers_question_is_asked_in_the_turn_that_called_it(
    tmp_path: Path, chats: Any
) -> None:
    server = Path(__file__).resolve().parents[1] / "mcp" / "servers" / "asking_server.py"
    call = {"name": "mcp:ask/ask_name", "arguments": {}}
    model = script_file(tmp_path, {"toolCalls": [call]}, {"content": "Nice to meet you."})
    chat = chats(tmp_path, "-m", model, "--profile", "full-auto",
                 "--mcp", f"ask={sys.executable} {server}")  # fmt: skip
    chat.send("ask me")
    chat.showing("answer? [y]es, [n]o, [c]ancel:")
    chat.child.send("y\r")
    chat.showing("name (Your name):")
    chat.child.send("Ada\r")
    chat.showing("age (Your age) (integer), optional:")
    chat.child.send("\r")
    chat.showing("Nice to meet you.")
    assert chat.leave() == 0
    [summary] = runs(tmp_path / "state")
    lines = (tmp_path / "state" / "runs" / f"{summary['runId']}.jsonl").read_text()
    assert '"output":"accept:Ada:None"' in lines.replace(" ", "")
