"""Importing the adapters' modules must not import a provider SDK (fast daemon start)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
import cleveragents.tool, cleveragents.tool._router
import cleveragents.llm.spec, cleveragents.llm.openai, cleveragents.llm.anthropic
import cleveragents.llm.gemini, cleveragents.llm._retry, cleveragents.llm._clients
loaded = sorted({"openai", "anthropic", "google.genai", "httpx2"} & set(sys.modules))
print(",".join(loaded))
"""


def test_adapter_modules_import_no_sdk_until_a_caller_is_built() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=30, check=True
    )
    assert done.stdout.strip() == ""
