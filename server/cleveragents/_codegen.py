"""``python -m cleveragents._codegen schema|typescript [DIR]``: write the generated files.

The wire's generated artefacts (the JSON Schema document, the method table, PROTOCOL.md's
field tables, ``protocol.ts``) come from the attrs classes in :mod:`cleveragents.protocol`
and from the error classes of every package. Those live in their own layers, which
``protocol`` may not import, so this module sits above them all, like :mod:`cleveragents.cli`:
it imports each layer that defines errors, then reads the core's one registry.
"""

from __future__ import annotations

import sys
from pathlib import Path

from cleveragents import checkpoints, daemon, mcp, rpc, runs, workspace
from cleveragents.llm import errors as llm_errors
from cleveragents.tool import CleverAgentsError, error_classes

TYPESCRIPT_FILE = "protocol.ts"
# Imported for their error classes:
_LAYERS = (checkpoints, daemon, llm_errors, mcp, rpc, runs, workspace)


def wire_errors() -> tuple[type[CleverAgentsError], ...]:
    """Every error class with its own code, from every layer, base first."""
    assert _LAYERS  # the imports above fill the registry
    return error_classes()


def write_typescript(directory: Path) -> Path:
    """Write ``DIR/protocol.ts``."""
    from cleveragents.protocol._typescript import render_typescript

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / TYPESCRIPT_FILE
    path.write_text(render_typescript(wire_errors()), encoding="utf-8")
    return path


def main(argv: list[str]) -> int:
    usage = "usage: python -m cleveragents._codegen schema|typescript [DIR]"
    if not argv or argv[0] not in ("schema", "typescript"):
        print(usage, file=sys.stderr)
        return 2
    if argv[0] == "typescript":
        target = Path(argv[1]) if len(argv) > 1 else Path("client-protocol/typescript/src")
        print(write_typescript(target))
        return 0
    from cleveragents.protocol._schema import write

    target = Path(argv[1]) if len(argv) > 1 else Path("client-protocol/schema")
    for path in write(target, wire_errors()):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
