"""A schema from outside cannot freeze whoever checks values against it (issue 25, item
1): patterns and formats match in linear time (RE2), a pattern RE2 cannot run is refused
naming it, a ``$ref`` bomb is refused when the spec is built, and a value that would take
too long to check is refused instead of checked for ever.

Each attack takes hours with Python's ``re`` or fastjsonschema as is; here each runs in a
thread with a generous hang bound (``kit.hostile.finishes``).
"""

from __future__ import annotations

import gc
import re
import time
import weakref
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cleveragents.tool import (
    SchemaDefinitionError,
    ToolInputError,
    ToolOutputError,
    ToolSpec,
    _schema_guard,
    _spec,
)
from cleveragents.tool._schema_patterns import FORMATS, Pattern
from kit.hostile import (
    CATASTROPHIC,
    CATASTROPHIC_VALUE,
    OWASP_EMAIL,
    OWASP_VALUE,
    finishes,
    nested,
    recursive_fan_out,
    ref_bomb,
)


def _spec_of(input_schema: Any, output_schema: Any = None, name: str = "t/x") -> ToolSpec:
    return ToolSpec(name, "X.", input_schema, lambda inputs: None, output_schema=output_schema)


def _string_field(**keywords: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"s": {"type": "string", **keywords}}}


# -- patterns and formats in linear time ---------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "value"),
    [(CATASTROPHIC, CATASTROPHIC_VALUE), (OWASP_EMAIL, OWASP_VALUE)],
    ids=["nested-quantifiers", "owasp-email"],
)
def test_a_catastrophic_pattern_refuses_a_hostile_argument_at_once(
    pattern: str, value: str
) -> None:
    spec = _spec_of(_string_field(pattern=pattern))

    def check() -> None:
        spec.validate_input({"s": value})

    with pytest.raises(ToolInputError, match=r"arguments\.s must match pattern"):
        finishes(check)
    spec.validate_input({"s": "aaaa"} if pattern == CATASTROPHIC else {"s": "ab.cd@ef.org"})


def test_a_catastrophic_pattern_in_an_output_schema_refuses_a_hostile_output_at_once() -> None:
    spec = _spec_of({"type": "object"}, _string_field(pattern=CATASTROPHIC))
    with pytest.raises(ToolOutputError, match=r"output\.s must match pattern"):
        finishes(lambda: spec.validate_output({"s": CATASTROPHIC_VALUE}))


def test_a_catastrophic_pattern_property_refuses_a_hostile_key_at_once() -> None:
    spec = _spec_of({"type": "object", "patternProperties": {CATASTROPHIC: {"type": "integer"}},
                     "additionalProperties": False})  # fmt: skip
    with pytest.raises(ToolInputError, match="must not contain"):
        finishes(lambda: spec.validate_input({CATASTROPHIC_VALUE: 1}))
    spec.validate_input({"aaa": 1})


def test_the_email_format_is_linear_too() -> None:
    """fastjsonschema's own ``email`` regex is quadratic: 100,000 dots take minutes."""
    spec = _spec_of(_string_field(format="email"))
    with pytest.raises(ToolInputError, match=r"arguments\.s must be email"):
        finishes(lambda: spec.validate_input({"s": "a" + ".." * 100_000}))
    spec.validate_input({"s": "someone@example.org"})


def test_a_required_property_is_matched_against_pattern_properties_with_re2() -> None:
    """With ``additionalProperties: false``, fastjsonschema matched each required name
    against each ``patternProperties`` regex with ``re`` while compiling: a schema alone
    froze the compiler."""
    schema = {"type": "object", "required": [CATASTROPHIC_VALUE],
              "patternProperties": {CATASTROPHIC: {}}, "additionalProperties": False}  # fmt: skip
    with pytest.raises(SchemaDefinitionError, match="required but not allowed"):
        finishes(lambda: _spec_of(schema))


@pytest.mark.parametrize(
    ("keywords", "path", "construct"),
    [
        ({"pattern": "^(?=a)b"}, "properties.s.pattern", "a lookahead"),
        ({"pattern": r"(a)\1"}, "properties.s.pattern", "a backreference"),
        ({"pattern": "(?<!x)y"}, "properties.s.pattern", "a lookbehind"),
    ],
)
def test_a_pattern_re2_cannot_run_is_refused_naming_it(
    keywords: dict[str, Any], path: str, construct: str
) -> None:
    with pytest.raises(SchemaDefinitionError) as caught:
        _spec_of(_string_field(**keywords))
    assert (caught.value.field, caught.value.path) == ("input_schema", path)
    assert repr(keywords["pattern"]) in str(caught.value)
    assert construct in str(caught.value)


def test_a_pattern_property_re2_cannot_run_is_refused_naming_it() -> None:
    with pytest.raises(SchemaDefinitionError) as caught:
        _spec_of({"type": "object"}, {"patternProperties": {"(?!x)": {}}})
    assert (caught.value.field, caught.value.path) == ("output_schema", "patternProperties")
    assert "'(?!x)'" in str(caught.value)


def test_the_regex_format_means_a_regex_re2_can_run() -> None:
    spec = _spec_of(_string_field(format="regex"))
    spec.validate_input({"s": "^[a-z]+$"})
    with pytest.raises(ToolInputError, match="must be a valid regex"):
        spec.validate_input({"s": "(?=lookahead)"})


# -- $ref bombs and budgets ---------------------------------------------------------------


def test_a_ref_bomb_is_refused_when_the_spec_is_built() -> None:
    bomb = ref_bomb(30)  # about 2 KB, 2**30 subschemas expanded
    with pytest.raises(SchemaDefinitionError) as caught:
        finishes(lambda: _spec_of({"type": "object"}, bomb))
    assert caught.value.field == "output_schema"
    assert caught.value.path == "$ref"
    assert "expands to more than 100,000 subschemas" in str(caught.value)


def test_a_schema_with_many_references_that_stays_small_compiles() -> None:
    """What the bound must not catch: a shared definition used by many properties."""
    schema = {"type": "object", "definitions": {"id": {"type": "string", "pattern": "^[0-9]+$"}},
              "properties": {f"p{i}": {"$ref": "#/definitions/id"} for i in range(500)}}  # fmt: skip
    spec = _spec_of(schema)
    spec.validate_input({"p1": "12"})
    with pytest.raises(ToolInputError, match=r"arguments\.p7 must match pattern"):
        spec.validate_input({"p7": "x"})


def test_a_value_that_takes_too_long_to_check_is_refused_not_checked_for_ever() -> None:
    spec = _spec_of({"type": "object"}, recursive_fan_out())
    spec.validate_output(nested(5))  # shallow: checked as usual
    with pytest.raises(ToolOutputError) as caught:
        finishes(lambda: spec.validate_output(nested(60)))  # 2**60 steps
    assert "took longer than 50 ms" in str(caught.value)
    assert "refused" in str(caught.value)


def test_a_check_kept_waiting_is_not_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The budget is the check's own CPU time once the clock runs out: a thread the
    machine kept waiting (the clock jumps, the CPU time does not) finishes its check."""
    spec = _spec_of({"type": "object", "properties": {"items": {"type": "array", "items": {
        "type": "integer"}}}})  # fmt: skip
    real = time.perf_counter
    jumps = iter(range(1, 1_000_000))

    def slow_clock() -> float:  # a second passes between any two readings
        return real() + next(jumps)

    monkeypatch.setattr(_schema_guard, "_perf", slow_clock)
    spec.validate_input({"items": list(range(200))})
    with pytest.raises(ToolInputError, match=r"items\.3 must be integer"):
        spec.validate_input({"items": [0, 1, 2, "x"]})


def test_a_schema_too_large_to_check_is_refused() -> None:
    """One subschema of thousands of properties: its validator would be megabytes of
    Python, which ``compile`` takes seconds over, holding the interpreter throughout."""
    schema = {"type": "object",
              "properties": {f"p{i}": {"type": "string", "maxLength": 9} for i in range(8000)}}  # fmt: skip
    with pytest.raises(SchemaDefinitionError, match="too large to check"):
        finishes(lambda: _spec_of(schema))


# -- the cache of validators ------------------------------------------------------------


def test_the_validator_cache_is_bounded_and_a_released_spec_takes_its_validators(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cache = _spec._ValidatorCache(max_count=8, max_size=10**9)
    monkeypatch.setattr(_spec, "_validators", cache)
    specs = [_spec_of(_string_field(maxLength=i), name=f"t/n{i}") for i in range(20)]
    assert len(cache) == 8
    twin = _spec_of(_string_field(maxLength=19), name="t/twin")
    assert twin._validate_input is specs[19]._validate_input  # shared while cached

    last = specs.pop()
    validator = weakref.ref(last._validate_input)
    last.release_validators()
    twin.release_validators()
    assert len(cache) == 7
    del last, twin
    gc.collect()
    assert validator() is None


def test_the_validator_cache_is_bounded_by_size() -> None:
    cache = _spec._ValidatorCache(max_count=1000, max_size=1)
    compiled = [_spec.compile_schema(_string_field(maxLength=i)) for i in range(3)]
    for validator in compiled:
        cache.put(validator)
    assert len(cache) == 1  # the newest, even alone over the size


# -- semantics kept -----------------------------------------------------------------------


_FORMAT_SEEDS = {
    "date-time": "2020-01-02T03:04:05.5+05:30", "email": "a.b@c.de", "hostname": "a-b.c",
    "ipv4": "10.0.0.255", "ipv6": "1::2:3:4.5.6.7", "uri": "http://x/y", "json-pointer": "/a~1b",
    "uri-reference": "a/b#c", "uri-template": "http://x/{+a,b:3}", "date": "2020-02-29",
    "iri": "a:b", "iri-reference": "#f", "idn-email": "a@b.c", "idn-hostname": "xn--a.-bc",
    "relative-json-pointer": "0/a", "time": "12:34:56.7Z", "uuid": "1234abcd-12ab-12ab-12ab-123456789abc",
    "duration": "P1Y2MT3H4S",
}  # fmt: skip
_ASCII = st.sampled_from(list("aZx09-._:/@%#{},+*~TtPYMDWHSz \\\"'<>^`|;=!?&[]()"))


@settings(max_examples=300)
@given(
    name=st.sampled_from(sorted(_FORMAT_SEEDS)),
    edits=st.lists(st.tuples(st.integers(0, 40), st.booleans(), _ASCII), max_size=3),
)
def test_each_format_accepts_what_fastjsonschemas_regex_accepts(
    name: str, edits: list[tuple[int, bool, str]]
) -> None:
    """The RE2 rewrites of fastjsonschema's format regexes decide as the originals on
    ASCII text without newlines (where Python's ``$`` and ``.`` differ from RE2's)."""
    from fastjsonschema.draft2019 import CodeGeneratorDraft2019

    text = list(_FORMAT_SEEDS[name])
    for where, insert, char in edits:
        at = min(where, len(text))
        if insert:
            text.insert(at, char)
        elif text:
            text[min(at, len(text) - 1)] = char
    value = "".join(text)
    original = re.match(CodeGeneratorDraft2019.FORMAT_REGEXS[name], value) is not None
    assert Pattern(FORMATS[name]).search(value) == original, (name, value)


_PIECES = ["a", "b", "ab", "[ab]", "[^a]", ".", "a*", "b+", "(a|b)", "(ab)?", "a{2}", r"\d", "x"]


@settings(max_examples=300)
@given(
    pieces=st.lists(st.sampled_from(_PIECES), min_size=1, max_size=5),
    anchors=st.tuples(st.booleans(), st.booleans()),
    values=st.lists(st.text(alphabet="abx1", max_size=8), min_size=1, max_size=4),
)
def test_a_pattern_decides_as_javascript_would_on_plain_text(
    pieces: list[str], anchors: tuple[bool, bool], values: list[str]
) -> None:
    """The in-process fuzz of schemas, extended to patterns: where Python's ``re`` and
    ECMA-262 agree (no newline, no lookaround), the RE2 validator accepts the same
    values, both for ``pattern`` and for ``patternProperties``."""
    pattern = ("^" if anchors[0] else "") + "".join(pieces) + ("$" if anchors[1] else "")
    values_spec = _spec_of(_string_field(pattern=pattern))
    keys_spec = _spec_of({"type": "object", "patternProperties": {pattern: {"type": "integer"}}})
    for value in values:
        expected = re.search(pattern, value) is not None
        assert _accepts(values_spec, {"s": value}) == expected, (pattern, value)
        # A key the pattern matches must hold an integer: a string there is refused.
        assert _accepts(keys_spec, {value: "text"}) != expected, (pattern, value)


def _accepts(spec: ToolSpec, arguments: dict[str, Any]) -> bool:
    try:
        spec.validate_input(arguments)
    except ToolInputError:
        return False
    return True


_HOSTILE_PATTERNS = [CATASTROPHIC, OWASP_EMAIL, "(a|a)*$", "(x+x+)+y", "(?=a)", r"(a)\1", "("]


@settings(max_examples=200)
@given(
    schema=st.recursive(
        st.fixed_dictionaries({"type": st.just("string")}, optional={
            "pattern": st.sampled_from([*_HOSTILE_PATTERNS, "^[a-z]*$", "b"]),
            "format": st.sampled_from(["email", "hostname", "uri", "regex"]),
        }),
        lambda inner: st.fixed_dictionaries({"type": st.just("object")}, optional={
            "properties": st.dictionaries(st.sampled_from("abc"), inner, max_size=2),
            "patternProperties": st.dictionaries(st.sampled_from(_HOSTILE_PATTERNS), inner, max_size=2),
            "anyOf": st.lists(inner, min_size=1, max_size=2),
        }),
        max_leaves=6,
    ),
    value=st.recursive(
        st.text(alphabet="a!x@.", max_size=70),
        lambda inner: st.dictionaries(st.sampled_from(["a", "b", "c", "a" * 40 + "!"]), inner, max_size=3),
        max_leaves=6,
    ),
)  # fmt: skip
def test_any_schema_with_patterns_is_refused_or_checks_any_value_at_once(
    schema: dict[str, Any], value: Any
) -> None:
    """Schemas built from hostile patterns either fail to build (naming the pattern) or
    check any value at once (the fuzz runs every example under a hang bound)."""

    def build_and_check() -> str:
        try:
            spec = _spec_of({"type": "object", "properties": {"v": schema}})
        except SchemaDefinitionError as exc:
            return f"refused: {exc}"
        try:
            spec.validate_input({"v": value})
        except ToolInputError as exc:
            return f"invalid: {exc}"
        return "valid"

    outcome = finishes(build_and_check)
    if outcome.startswith("refused"):
        assert "pattern" in outcome  # its path or its words name the pattern
    assert "took longer" not in outcome
