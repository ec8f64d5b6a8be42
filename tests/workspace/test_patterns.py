"""Linear-time patterns: RE2 search patterns, what is refused, globs and .gitignore rules.

A backtracking engine takes minutes on several of these inputs; pytest's per-test
timeout turns such a regression into a failure, so no test here measures time.
"""

from __future__ import annotations

import re

import pytest

from cleveragents.workspace import WorkspaceToolError
from cleveragents.workspace._globs import GitIgnore
from cleveragents.workspace._patterns import (
    MAX_GLOB_CHARS,
    GlobSet,
    UnsafeGlobError,
    UnsupportedPatternError,
    compile_glob,
    compile_search,
    glob_to_regex,
)

TWELVE_STARS = "*a" * 11 + "*b"  # *a*a*a*a*a*a*a*a*a*a*a*b
FORTY_AS = "a" * 40

# ----------------------------------------------------------------------------- search


def test_a_nested_quantifier_on_34_as_and_a_bang_finishes_without_a_match() -> None:
    # Python's re backtracks for about 78 s here; RE2 answers in one pass.
    matcher = compile_search("(a+)+$")
    assert matcher.search(b"a" * 34 + b"!") is False
    assert matcher.search(b"a" * 34) is True


def test_search_patterns_keep_the_common_syntax() -> None:
    assert compile_search(r"\bos\b").search(b"import os")
    assert not compile_search(r"\bos\b").search(b"import osx")
    assert compile_search(r"(?i)needle").search(b"a NEEDLE here")
    assert compile_search(r"^def \w+\(").search(b"def main():")
    assert compile_search(r"\d{3}-\d{4}$").search(b"call 555-1234")
    assert compile_search(r"(?P<word>caf\xe9)").search("café".encode())
    assert compile_search("é.").search("éa".encode())  # '.' is one character, not one byte


@pytest.mark.parametrize(
    ("pattern", "construct"),
    [
        (r"(a)\1", "backreference"),
        (r"(?P<x>a)(?P=x)", "backreference"),
        (r"(?P<x>a)\g<x>", "backreference"),
        (r"foo(?=bar)", "lookahead"),
        (r"foo(?!bar)", "lookahead"),
        (r"(?<=x)foo", "lookbehind"),
        (r"(?<!x)foo", "lookbehind"),
        (r"(?>a+)b", "atomic group"),
        (r"a++b", "possessive quantifier"),
        (r"end\Z", r"\z"),
    ],
)
def test_a_construct_re2_cannot_run_is_refused_naming_it(pattern: str, construct: str) -> None:
    with pytest.raises(UnsupportedPatternError) as caught:
        compile_search(pattern)
    assert construct in caught.value.message
    assert "RE2" in caught.value.message
    assert isinstance(caught.value, WorkspaceToolError)  # a failed record, not a fault


def test_a_construct_inside_a_character_class_is_not_mistaken_for_one() -> None:
    assert compile_search(r"[(?=]x").search(b"=x")
    assert compile_search(r"[a++]").search(b"+")


def test_an_invalid_pattern_is_refused_with_re2s_reason() -> None:
    with pytest.raises(UnsupportedPatternError, match=r"pattern 'a\(' is not a valid regex: "):
        compile_search("a(")


# ----------------------------------------------------------------------------- globs

GLOB_CASES = [
    ("*.py", "a.py", True),
    ("*.py", "src/a.py", False),
    ("**/*.py", "a.py", True),
    ("**/*.py", "src/deep/a.py", True),
    ("src/**", "src/x/y", True),
    ("src/**", "srcx/y", False),
    ("a?c", "abc", True),
    ("a?c", "a/c", False),
    ("[!x]*", "y1", True),
    ("[!x]*", "x1", False),
    ("file[0-9].txt", "file7.txt", True),
    ("a[", "a[", True),
    ("a/**/b", "a/b", True),
    ("a/**/b", "a/x/y/b", True),
    ("[]x]", "]", True),
    ("[[:x]", "[", True),  # '[' is a literal in a glob class, not a POSIX class opener
    ("a\\b", "a\\b", True),
    ("*", "new\nline", True),
    ("(x)+$", "(x)+$", True),  # regex characters in a glob are literals
    ("*", "caf\udce9", True),  # a name that is not UTF-8 (a surrogate escape)
]


@pytest.mark.parametrize(("pattern", "path", "matches"), GLOB_CASES)
def test_globs_match_the_same_in_re2_and_in_pythons_re(
    pattern: str, path: str, matches: bool
) -> None:
    assert compile_glob(pattern).fullmatch(path) is matches
    assert (re.fullmatch(glob_to_regex(pattern), path) is not None) is matches


def test_a_twelve_star_glob_against_a_forty_character_name_answers() -> None:
    # Translated for Python's re, this takes about 135 s.
    glob = compile_glob(TWELVE_STARS)
    assert glob.fullmatch(FORTY_AS) is False
    assert glob.fullmatch("a" * 39 + "b") is True


def test_a_glob_longer_than_the_cap_is_refused() -> None:
    with pytest.raises(UnsafeGlobError, match=f"longer than {MAX_GLOB_CHARS}"):
        compile_glob("*a" * MAX_GLOB_CHARS)


def test_a_glob_set_reports_every_matching_rule_in_order() -> None:
    rules = GlobSet()
    for glob in ["*.py", "src/*", "**"]:
        rules.add(glob_to_regex(glob), glob)
    assert sorted(rules.matches("src/a.py")) == [1, 2]
    assert sorted(rules.matches("a.py")) == [0, 2]
    rules.add(glob_to_regex("a.*"), "a.*")  # added after a match: the set is rebuilt
    assert sorted(rules.matches("a.py")) == [0, 2, 3]


# ----------------------------------------------------------------------------- .gitignore


def test_a_gitignore_line_too_long_to_match_safely_is_skipped_and_noted() -> None:
    ignore = GitIgnore()
    ignore.add_text(f"*.log\n{'*a' * 600}b\n{TWELVE_STARS}\n", "")
    assert ignore.skipped == ["'.gitignore' line 2"]
    note = ignore.note()
    assert note is not None
    assert "'.gitignore' line 2" in note
    assert ignore.ignored("x.log", False)
    assert ignore.ignored("a" * 39 + "b", False)
    assert not ignore.ignored(FORTY_AS, False)


def test_a_gitignore_without_unsafe_lines_adds_no_note() -> None:
    ignore = GitIgnore()
    ignore.add_text("*.log\n", "")
    assert ignore.note() is None


def test_a_deeper_gitignore_wins_over_a_shallower_one() -> None:
    ignore = GitIgnore()
    ignore.add_text("*.log\n", "")
    ignore.add_text("!keep.log\n", "src")
    assert ignore.ignored("a.log", False)
    assert ignore.ignored("docs/keep.log", False)
    assert not ignore.ignored("src/keep.log", False)
    assert not ignore.ignored("src/deep/keep.log", False)
    assert ignore.ignored("src/other.log", False)


def test_gitignore_rules_are_relative_to_their_own_directory() -> None:
    ignore = GitIgnore()
    ignore.add_text("/top.txt\nbuild/\ndocs/*.tmp\n", "sub")
    assert ignore.ignored("sub/top.txt", False)
    assert not ignore.ignored("top.txt", False)
    assert not ignore.ignored("sub/x/top.txt", False)
    assert ignore.ignored("sub/x/build", True)
    assert not ignore.ignored("sub/x/build", False)
    assert ignore.ignored("sub/docs/a.tmp", False)
    assert not ignore.ignored("docs/a.tmp", False)


def test_gitignore_rules_past_the_per_file_budget_are_skipped_and_noted() -> None:
    ignore = GitIgnore()
    hostile = "\n".join("*a" * 499 + f"*{index}" for index in range(200))
    ignore.add_text(f"*.log\n{hostile}\n", "")
    [skipped] = ignore.skipped
    assert skipped.startswith("'.gitignore' lines ")
    assert ignore.ignored("x.log", False)  # the rules before the budget still hold
    assert ignore.ignored("a" * 500 + "3", False)


def test_many_long_rules_still_match_each_one() -> None:
    # Rules are split over several RE2 sets; indices stay those of add order.
    rules = GlobSet()
    globs = ["*a" * 400 + f"*x{index}" for index in range(40)]
    for glob in globs:
        rules.add(glob_to_regex(glob), glob)
    assert list(rules.matches("a" * 400 + "x17")) == [17]
