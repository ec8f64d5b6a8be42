"""The open provider table: registrations fail loudly, everything that knew the providers
reads them, and a third party adds a provider, with a wire format of its own, at run
time without editing cleveragents: its model then runs a tool loop through ``run/start``.

The third party here speaks "ledger", a made-up format, to a loopback fake that enforces
its own rules the way a real API does: it refuses a turn whose tool results are not
paired with the calls it issued, whose replayed calls it never made, or whose key is
wrong.
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import json
import logging
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from cleveragents.llm import (
    ModelConfigError,
    ModelProviderError,
    ModelSpec,
    Provider,
    ScriptedModel,
    _providers,
    _redact,
    create_caller,
    get_provider,
    parse_model_spec,
    providers,
    register_provider,
)
from cleveragents.llm.builtin.openai import OpenAIChatCaller
from cleveragents.llm.spec import listed_providers, resolve_model_spec
from cleveragents.tool import (
    CleverAgentsError,
    LLMRequest,
    LLMResponse,
    Message,
    ProviderMessages,
    StreamDraft,
    ToolCallRouter,
    ToolDeclaration,
    ToolSchema,
    Usage,
    _router,
    register_codec,
)
from kit.inprocess import in_process_daemon
from kit.loopback import LoopbackServer, Recorded, Reply, json_reply, make_request
from kit.rawpeer import body

from .kits import openai_text_stream

ROOT = Path(__file__).resolve().parents[2]
KEY = "ledger-key-0123456789"
FN_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


@pytest.fixture
def scratch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Copies of the codec and provider tables, so what a test registers ends with it."""
    providers()  # the built-ins are in the copy
    monkeypatch.setattr(_router, "_codecs", dict(_router._codecs))
    monkeypatch.setattr(_providers, "_table", dict(_providers._table))


# -- the "ledger" wire format: the third party's codec -------------------------------------


class LedgerCodec:
    """Tools are ``fns``; the history is a list of entries (``ask``, ``said`` with its
    ``calls``, ``answer`` to one call by ``ref``); the stream is lines of ``say``,
    ``call`` and ``end``."""

    def name_tokens(self, tokens: list[str]) -> list[str]:
        return tokens

    def tools(self, declarations: Sequence[ToolDeclaration]) -> list[dict[str, Any]]:
        return [{"fn": d.name, "about": d.description, "shape": d.parameters} for d in declarations]

    def messages(self, messages: Sequence[Message], encode: Any) -> ProviderMessages:
        preamble = [m.content for m in messages if m.role == "system"]
        entries: list[dict[str, Any]] = []
        for m in messages:
            if m.role == "user":
                entries.append({"kind": "ask", "text": m.content})
            elif m.role == "assistant":
                calls = [{"ref": c.id, "fn": encode(c.name), "args": c.arguments}
                         for c in m.tool_calls]  # fmt: skip
                entries.append({"kind": "said", "text": m.content, "calls": calls})
            elif m.role == "tool":
                entries.append({"kind": "answer", "ref": m.tool_call_id, "out": m.content,
                                "failed": m.is_error})  # fmt: skip
        return ProviderMessages("\n\n".join(preamble) if preamble else None, entries)

    def feed(self, draft: StreamDraft, chunk: Mapping[str, Any]) -> str:
        if "call" in chunk:
            call = draft.call(len(draft.calls))
            call.id, call.name, call.args_obj = (chunk["call"][k] for k in ("ref", "fn", "args"))
        if "end" in chunk:
            draft.stop = chunk["end"]["why"]
            draft.usage = Usage(*chunk["end"]["used"])
        return str(chunk.get("say") or "")

    def events(self, payload: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
        return payload["lines"]  # type: ignore[no-any-return]


# -- the third party's adapter and registration --------------------------------------------


class LedgerCaller:
    """An ``LLMCaller`` over the ledger API, with a plain HTTP client: the transport is
    the adapter's; the format is the router's, through the codec its provider names."""

    def __init__(self, spec: ModelSpec) -> None:
        if not spec.model or not spec.base_url:
            raise ModelConfigError("a ledger model spec needs 'model' and 'baseUrl'")
        codec = get_provider(spec.provider).codec
        assert codec is not None
        self.spec = spec
        self.url = urlsplit(spec.base_url)
        self.router = ToolCallRouter(codec)

    def __call__(self, request: LLMRequest) -> LLMResponse:
        history = self.router.messages(request.messages)
        turn = {"model": self.spec.model, "preamble": history.system,
                "entries": history.messages, "fns": self.router.tools(request.tools)}  # fmt: skip
        url = self.url
        connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=5)
        try:
            connection.request("POST", f"{url.path}/ledger/turn", json.dumps(turn),
                               {"Content-Type": "application/json",
                                "X-Ledger-Key": self.spec.api_key() or ""})  # fmt: skip
            response = connection.getresponse()
            if response.status != 200:
                problem = json.loads(response.read()).get("problem", "")
                raise ModelProviderError(f"{self.spec.describe()}: refused: {problem}")
            accumulator = self.router.stream(iteration=request.iteration)
            for line in response:
                text = accumulator.feed(json.loads(line)) if line.strip() else ""
                if text:
                    request.on_delta(text)
        finally:
            connection.close()
        return accumulator.result()


LEDGER = Provider(
    name="ledger",
    summary="a ledger-format model server",
    example="ledger-1",
    key_envs=("LEDGER_KEY",),
    loggers=("ledger_sdk",),
    codec="ledger",
    adapter=LedgerCaller,
)


@pytest.fixture
def ledger(scratch: None) -> None:
    register_codec("ledger", LedgerCodec())
    register_provider(LEDGER)


# -- the ledger API's fake -----------------------------------------------------------------


def refuse(problem: str) -> Reply:
    return json_reply({"problem": problem}, 400)


def lines(*items: dict[str, Any]) -> Reply:
    payload = [(json.dumps(item) + "\n").encode() for item in items]
    return Reply(headers={"Content-Type": "application/x-ndjson"}, chunks=payload)


class LedgerApi:
    """The ledger server: asks to read ``a.txt`` once, then says what it read.

    Its rules: the key; tool names it accepts; a history that starts with an ``ask``;
    every replayed ``said`` call one it issued; and every call answered exactly once,
    right after the ``said`` that made it, before anything else.
    """

    def __init__(self) -> None:
        self.issued: set[str] = set()
        self.refs = (f"L-{n}" for n in itertools.count(1))
        self.refused: list[str] = []

    def __call__(self, request: Recorded) -> Reply:
        problem = self.check(request)
        if problem:
            self.refused.append(problem)
            return refuse(problem)
        entries = request.body["entries"]
        if entries[-1]["kind"] == "ask":
            ref = next(self.refs)
            self.issued.add(ref)
            return lines({"say": "Let me "}, {"say": "read it."},
                         {"call": {"ref": ref, "fn": "builtin__file-read",
                                   "args": {"path": "a.txt"}}},
                         {"end": {"why": "calls", "used": [11, 7]}})  # fmt: skip
        answer = entries[-1]["out"]
        with contextlib.suppress(ValueError, TypeError, KeyError):
            answer = json.loads(answer)["content"]  # the file tool's output
        answer = answer.strip()
        return lines(
            {"say": "It says: "}, {"say": answer}, {"end": {"why": "done", "used": [20, 3]}}
        )

    def check(self, request: Recorded) -> str | None:
        turn = request.body
        if request.path != "/api/ledger/turn":
            return f"no such endpoint {request.path}"
        if request.headers.get("x-ledger-key") != KEY:
            return "bad key"
        if any(not FN_NAME.fullmatch(fn["fn"]) for fn in turn["fns"]):
            return "a function name breaks the rule"
        entries = turn["entries"]
        if not entries or entries[0]["kind"] != "ask":
            return "a ledger starts with an ask"
        waiting: list[str] = []
        for entry in entries:
            if entry["kind"] == "answer":
                if entry["ref"] not in waiting:
                    return f"answer to {entry['ref']}, which is not a call awaiting one"
                waiting.remove(entry["ref"])
                continue
            if waiting:
                return f"calls {waiting} were not answered before the next entry"
            if entry["kind"] == "said":
                refs = [call["ref"] for call in entry["calls"]]
                if not set(refs) <= self.issued:
                    return f"said calls {refs} this server never made"
                waiting = refs
        if waiting:
            return f"calls {waiting} were not answered"
        return None


@pytest.fixture
def ledger_api() -> Iterator[tuple[LoopbackServer, LedgerApi]]:
    api = LedgerApi()
    with LoopbackServer(respond=api) as server:
        yield server, api


# -- the run ------------------------------------------------------------------------------


async def test_a_provider_registered_at_run_time_runs_a_tool_loop_through_run_start(
    ledger: None,
    ledger_api: tuple[LoopbackServer, LedgerApi],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, api = ledger_api
    monkeypatch.setenv("LEDGER_KEY", KEY)
    dispatcher, sink = await in_process_daemon(tmp_path)
    (tmp_path / "ws" / "a.txt").write_text("alpha\n")
    model = {"provider": "ledger", "model": "ledger-1", "baseUrl": f"{server.base_url}/api"}
    dispatcher.receive(body({"jsonrpc": "2.0", "id": "start", "method": "run/start", "params": {
        "prompt": "read a.txt", "runId": "r1", "model": model}}))  # fmt: skip
    await dispatcher.settle(timeout=30)
    (reply,) = sink.replies("start")
    result = reply["result"]
    assert result["status"] == "completed", result
    assert result["content"] == "It says: alpha"
    assert result["usage"] == {"inputTokens": 31, "outputTokens": 10}
    (record,) = result["toolCallHistory"]
    assert (record["toolName"], record["inputs"], record["success"]) == (
        "builtin/file-read", {"path": "a.txt"}, True)  # fmt: skip
    assert api.refused == []
    first, second = (r.body for r in server.requests)
    assert {"fn": "builtin__file-read"}.items() <= next(
        fn for fn in first["fns"] if fn["fn"] == "builtin__file-read"
    ).items()
    assert second["entries"] == [
        {"kind": "ask", "text": "read a.txt"},
        {"kind": "said", "text": "Let me read it.",
         "calls": [{"ref": "L-1", "fn": "builtin__file-read", "args": {"path": "a.txt"}}]},
        {"kind": "answer", "ref": "L-1", "out": second["entries"][2]["out"], "failed": False},
    ]  # fmt: skip
    assert "alpha" in second["entries"][2]["out"]


def test_the_ledger_fake_refuses_results_not_paired_with_its_calls(
    ledger_api: tuple[LoopbackServer, LedgerApi],
) -> None:
    server, api = ledger_api
    api.issued.add("L-1")

    def post(entries: list[dict[str, Any]], key: str = KEY) -> int:
        connection = http.client.HTTPConnection("127.0.0.1", urlsplit(server.base_url).port)
        payload = json.dumps({"model": "m", "preamble": None, "entries": entries, "fns": []})
        connection.request("POST", "/api/ledger/turn", payload, {"X-Ledger-Key": key})
        status = connection.getresponse().status
        connection.close()
        return status

    ask = {"kind": "ask", "text": "go"}
    said = {"kind": "said", "text": "", "calls": [{"ref": "L-1", "fn": "t", "args": {}}]}
    answer = {"kind": "answer", "ref": "L-1", "out": "x", "failed": False}
    assert post([ask, said, {**answer, "ref": "L-9"}]) == 400  # not a call it made
    assert post([ask, said]) == 400  # a call left unanswered
    assert post([ask, said, answer, answer]) == 400  # answered twice
    assert post([ask, said, ask, answer]) == 400  # not right after its call
    assert post([ask, {**said, "calls": [{"ref": "L-7", "fn": "t", "args": {}}]}]) == 400
    assert post([ask, said, answer], key="wrong") == 400
    assert len(api.refused) == 6
    assert post([ask, said, answer]) == 200


async def test_a_provider_reusing_a_codec_and_adapter_is_one_registration(
    scratch: None, server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    register_provider(
        Provider(
            name="gateway",
            summary="a gateway that speaks the chat-completions API",
            key_envs=("GATEWAY_KEY",),
            package="openai",
            extra="openai",
            codec="openai",
            adapter=OpenAIChatCaller,
            base_url=f"{server.base_url}/v1",
        )
    )
    monkeypatch.setenv("GATEWAY_KEY", "gw-0123456789")
    server.queue(openai_text_stream("through the gateway"))
    caller = create_caller(parse_model_spec({"provider": "gateway", "model": "m", "maxTokens": 9}))
    assert isinstance(caller, OpenAIChatCaller)
    answer = await caller(make_request([Message("user", "hi")]))
    assert answer.content == "through the gateway"
    [sent] = server.requests
    assert sent.path == "/v1/chat/completions"  # the registration's baseUrl
    assert sent.headers["authorization"] == "Bearer gw-0123456789"  # its key variable
    assert sent.body["max_tokens"] == 9  # not OpenAI itself: its own baseUrl
    assert repr(caller) == "OpenAIChatCaller('gateway:m')"


# -- registrations -------------------------------------------------------------------------


def test_a_duplicate_provider_is_refused_naming_it(scratch: None) -> None:
    with pytest.raises(ValueError, match="'openai' is registered already"):
        register_provider(Provider(name="openai", summary="another"))
    register_provider(Provider(name="openai", summary="mine", codec="openai"), replace=True)
    assert get_provider("openai").summary == "mine"


def test_an_unknown_provider_is_a_config_error_naming_the_known_ones() -> None:
    with pytest.raises(ModelConfigError) as info:
        get_provider("cohere")
    assert info.value.code == ModelConfigError.code
    assert "'cohere'" in info.value.message
    for name in ("openai", "anthropic", "gemini", "scripted", "client"):
        assert repr(name) in info.value.message


def test_a_provider_naming_an_unregistered_codec_is_refused(scratch: None) -> None:
    with pytest.raises(ValueError, match="codec 'ledger', which is not registered"):
        register_provider(LEDGER)
    assert "ledger" not in [p.name for p in providers()]


@pytest.mark.parametrize("name", ["", "a:b", "with space", "-lead", "x" * 65])
def test_a_provider_name_that_a_spec_could_not_hold_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="invalid provider name"):
        Provider(name=name, summary="s")


def test_key_variables_given_as_one_string_are_refused() -> None:
    with pytest.raises(TypeError):
        Provider(name="p", summary="s", key_envs="P_KEY")


def test_register_provider_takes_only_a_provider() -> None:
    with pytest.raises(TypeError):
        register_provider("openai")  # type: ignore[arg-type]


def test_a_duplicate_codec_is_refused_naming_it(scratch: None) -> None:
    with pytest.raises(ValueError, match="'openai' is registered already"):
        register_codec("openai", LedgerCodec())
    register_codec("openai", LedgerCodec(), replace=True)
    assert ToolCallRouter("openai").tools([ToolSchema("t", "d", {})]) == [
        {"fn": "t", "about": "d", "shape": {}}
    ]


def test_a_codec_without_the_codec_methods_is_refused(scratch: None) -> None:
    with pytest.raises(TypeError, match="feed, events"):
        register_codec("half", _HalfCodec())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="invalid codec name"):
        register_codec("a b", LedgerCodec())


class _HalfCodec:
    def name_tokens(self, tokens: list[str]) -> list[str]:
        return tokens

    def tools(self, declarations: Sequence[ToolDeclaration]) -> list[dict[str, Any]]:
        return []

    def messages(self, messages: Sequence[Message], encode: Any) -> ProviderMessages:
        return ProviderMessages(None, [])


def test_a_registered_codec_is_spoken_by_the_router(scratch: None) -> None:
    with pytest.raises(ValueError, match="unknown provider format 'ledger'"):
        ToolCallRouter("ledger")
    register_codec("ledger", LedgerCodec())
    router = ToolCallRouter("ledger")
    stream = [
        {"say": "ok"},
        {"call": {"ref": "r", "fn": "a__b", "args": {"x": 1}}},
        {"end": {"why": "calls", "used": [1, 2]}},
    ]
    answer = router.parse_response({"lines": stream}, iteration=1)
    assert (answer.content, answer.stop_reason, answer.usage) == ("ok", "calls", Usage(1, 2))
    assert [(c.id, c.name, c.arguments) for c in answer.tool_calls] == [("r", "a/b", {"x": 1})]


# -- what reads the table ------------------------------------------------------------------


def test_a_registered_provider_parses_in_both_forms_and_reads_its_own_key(
    ledger: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert parse_model_spec("ledger:ledger-1") == ModelSpec("ledger", model="ledger-1")
    spec = parse_model_spec({"provider": "ledger", "model": "ledger-1"})
    assert spec.describe() == "ledger:ledger-1"
    monkeypatch.setenv("LEDGER_KEY", "k-123")
    assert (spec.api_key(), spec.key_env()) == ("k-123", "LEDGER_KEY")
    with pytest.raises(ModelConfigError, match="needs 'model'"):
        parse_model_spec({"provider": "ledger"})
    with pytest.raises(ModelConfigError) as info:
        parse_model_spec("nope:x")
    assert "'ledger:MODEL'" in info.value.message
    monkeypatch.delenv("CLEVERAGENTS_MODEL", raising=False)
    with pytest.raises(ModelConfigError, match="'ledger:ledger-1'"):
        resolve_model_spec(None)


def test_the_log_filter_guards_a_registered_providers_loggers(
    ledger: None, caplog: pytest.LogCaptureFixture
) -> None:
    _redact.guard_logs()
    _redact.remember([KEY])
    caplog.set_level(logging.DEBUG)
    logging.getLogger("ledger_sdk").debug("sending key %s", KEY)
    assert caplog.records
    assert KEY not in caplog.text
    assert "[redacted]" in caplog.text


@pytest.mark.parametrize("bad", ["client:x", "scripted:", "openai", "openai:"])
def test_a_spec_that_does_not_take_what_its_provider_says_is_refused(bad: str) -> None:
    with pytest.raises(ModelConfigError, match="invalid model spec"):
        parse_model_spec(bad)


def test_the_client_model_is_registered_but_not_built_here() -> None:
    assert get_provider("client").adapter is None
    with pytest.raises(ModelConfigError, match="'client' model is not built here"):
        create_caller(ModelSpec("client"))


def test_the_scripted_model_is_built_from_inline_turns() -> None:
    caller = create_caller(
        parse_model_spec({"provider": "scripted", "script": [{"content": "hi"}]})
    )
    assert isinstance(caller, ScriptedModel)
    assert len(caller) == 1


def test_model_config_errors_are_no_built_in_exception() -> None:
    assert not issubclass(ModelConfigError, ValueError)
    for error in (ModelConfigError, ModelProviderError):
        assert error.__mro__[1:] == (CleverAgentsError, Exception, BaseException, object)


def _table_row(provider: Provider) -> str:
    keys = ", ".join(f"`{k}`" for k in provider.key_envs) or "none"
    extra = f"`cleveragents[{provider.extra}]`" if provider.extra else "none"
    return f"| `{provider.form}` | {provider.summary} | {keys} | {extra} |"


def test_the_docs_provider_table_is_the_registrations() -> None:
    header = "| form | meaning | key from | SDK extra |\n|---|---|---|---|\n"
    expected = header + "".join(_table_row(p) + "\n" for p in listed_providers()) + "\n"
    text = (ROOT / "docs" / "models.md").read_text(encoding="utf-8")
    start = text.index(header)
    assert text[start : text.index("\n\n", start) + 2] == expected


def test_the_built_in_providers_are_the_modules_of_llm_builtin() -> None:
    modules = {p.stem for p in (ROOT / "server/cleveragents/llm/builtin").glob("[!_]*.py")}
    # a module's name is its provider's, with "_" for the "-" a module name cannot hold
    builtin = {name for p in providers() if (name := p.name.replace("-", "_")) in modules}
    assert builtin == modules == {
        "openai", "openai_responses", "anthropic", "gemini", "scripted", "client",
    }  # fmt: skip
