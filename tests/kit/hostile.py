"""Schemas and values an attacker sends (issue 25, items 1 and 2), shared by the tool,
MCP and daemon tests: patterns that backtrack for ever in Python's ``re``, values that
make them, a ``$ref`` bomb, and a bounded wait for work that must not hang.

Each hostile value is sized so that Python's ``re`` would need hours on it (the time
doubles with each character for ``^(a+)+$``), while a linear-time engine answers at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

CATASTROPHIC = "^(a+)+$"
"""Nested quantifiers: every split of the a's is tried before the last character fails."""
CATASTROPHIC_VALUE = "a" * 64 + "!"

OWASP_EMAIL = r"^([a-zA-Z0-9])(([\-.]|[_]+)?([a-zA-Z0-9]+))*(@){1}[a-z0-9]+[.]{1}(([a-z]{2,3})|([a-z]{2,3}[.]{1}[a-z]{2,3}))$"
"""The e-mail regex OWASP lists as a ReDoS example (its validation-regex repository)."""
OWASP_VALUE = "a" * 64 + "!"

HANG_BOUND_S = 20.0
"""How long work that must finish at once may take on a busy machine before the test
calls it a hang (the attacks it guards against take hours)."""


def ref_bomb(levels: int = 30) -> dict[str, Any]:
    """A schema of about 2 KB whose ``$ref``s expand to 2**levels subschemas: each level
    refers twice to the next, in two different shapes so no compiler can merge them."""
    definitions: dict[str, Any] = {
        f"d{i}": {
            "anyOf": [
                {"$ref": f"#/definitions/d{i + 1}"},
                {"allOf": [{"$ref": f"#/definitions/d{i + 1}"}]},
            ]
        }
        for i in range(levels)
    }
    definitions[f"d{levels}"] = {"type": "string", "minLength": 2}
    return {"definitions": definitions, "$ref": "#/definitions/d0"}


def recursive_fan_out() -> dict[str, Any]:
    """A recursive schema that checks each level of a value twice (the first branch
    fails only after checking everything below): 2**depth steps for a value ``depth``
    deep. Not a bomb by size, so only the budget per value stops it."""
    node = "#/definitions/node"
    return {
        "definitions": {
            "node": {
                "anyOf": [
                    {"properties": {"c": {"allOf": [{"$ref": node}, {"type": "string"}]}}},
                    {"properties": {"c": {"$ref": node}}},
                ]
            }
        },
        "$ref": node,
    }


def nested(depth: int) -> dict[str, Any]:
    """``{"c": {"c": ... {}}}``, ``depth`` levels."""
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"c": value}
    return value


def finishes(work: Callable[[], T], bound: float = HANG_BOUND_S) -> T:
    """``work()``'s result (or its exception), run in a thread: ``AssertionError`` if it
    has not finished within ``bound`` seconds (the thread is left to itself; it is a
    daemon thread, so it cannot keep the test process alive). A backtracking match of
    Python's ``re`` may hold the interpreter's lock throughout, and then this bound
    cannot fire either: without the fixes such a test hangs instead of failing here."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, work()))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            outcome.append((False, exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(bound)
    assert outcome, f"still running after {bound:g} s: it hangs"
    ok, value = outcome[0]
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]
