"""Importing the adapters' modules, and loading the whole provider table, must not import
a provider SDK (fast daemon start)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
import cleveragents.tool, cleveragents.tool._router
import cleveragents.llm, cleveragents.llm.spec, cleveragents.llm._retry, cleveragents.llm._clients
import cleveragents.llm.builtin.openai, cleveragents.llm.builtin.anthropic
import cleveragents.llm.builtin.gemini
assert {"openai", "anthropic", "gemini"} <= {p.name for p in cleveragents.llm.providers()}
loaded = sorted({"openai", "anthropic", "google.genai", "httpx2"} & set(sys.modules))
print(",".join(loaded))
"""


def test_adapter_modules_import_no_sdk_until_a_caller_is_built() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=30, check=True
    )
    assert done.stdout.strip() == ""
