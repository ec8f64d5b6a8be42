"""``cleveragents serve`` is parsed by serve's own parser (the other commands' parsers
cost the daemon's start ~3 ms): whatever the words after ``serve``, the outcome must be
the whole parser's, byte for byte: the same arguments, or the same help, usage or error
on the same stream with the same exit code."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cleveragents import _cli_parser, cli

TOKENS = [
    "--tcp", "127.0.0.1:7000", ":7000", "nohostport", "--token-file", "tok", "--state-dir",
    "/tmp/state", "--model", "scripted:turns.json", "--profile", "trusted", "--log-level",
    "debug", "LOUD", "--no-instructions", "--no-checkpoints", "--protocol", "acp", "lsp",
    "tcp", "-h", "--help", "--version", "--st", "--mod", "--no", "--", "-x", "run", "serve",
    "--state-dir=/s", "--protocol=acp", "",
]  # fmt: skip


def _outcome(words: list[str]) -> tuple[Any, ...]:
    """What parsing ``words`` gives: the arguments (but the help callable), or the exit
    code and what was printed."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            args = cli._parse(words)
        except SystemExit as exc:
            return ("exit", exc.code, out.getvalue(), err.getvalue())
    values = {k: v for k, v in vars(args).items() if k != "print_help"}
    return ("args", values, out.getvalue(), err.getvalue())


def _whole_parser(*, serve_only: bool = False) -> Any:
    if serve_only:  # as if there were no serve-only parser: the whole one decides
        raise _cli_parser.LeanParseError
    return _cli_parser.build_parser()


def _whole_parser_outcome(words: list[str]) -> tuple[Any, ...]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cli, "build_parser", _whole_parser)
        return _outcome(words)


@settings(max_examples=150)
@given(st.lists(st.sampled_from(TOKENS), max_size=6))
def test_serve_words_parse_as_the_whole_parser_parses_them(rest: list[str]) -> None:
    words = ["serve", *rest]
    assert _outcome(words) == _whole_parser_outcome(words)


@pytest.mark.parametrize(
    "rest",
    [
        ["--state-dir", "/tmp/s", "--model", "scripted:t.json", "--protocol", "acp"],
        ["--help"],
        ["--bogus"],
        ["--tcp", "nohostport"],
        ["--log-level", "LOUD"],
    ],
)
def test_serve_help_errors_and_arguments_are_the_whole_parsers(rest: list[str]) -> None:
    words = ["serve", *rest]
    mine, whole = _outcome(words), _whole_parser_outcome(words)
    assert mine == whole
    if mine[0] == "exit":
        assert mine[2] or mine[3]  # something was said, once


def test_a_serve_namespace_shows_the_whole_help() -> None:
    args = cli._parse(["serve"])
    out = io.StringIO()
    args.print_help(out)
    assert "COMMAND" in out.getvalue()
    assert "serve" in out.getvalue()
    assert "run" in out.getvalue()
