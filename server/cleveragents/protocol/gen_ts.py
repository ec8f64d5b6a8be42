"""``python -m cleveragents.protocol.gen_ts DIR``: write ``DIR/protocol.ts``.

The TypeScript declarations of protocol v1; ``scripts/gen-typescript`` writes them into
``client-protocol/typescript/src/``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ._typescript import render_typescript

FILE_NAME = "protocol.ts"


def write(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / FILE_NAME
    path.write_text(render_typescript(), encoding="utf-8")
    return path


def main(argv: list[str]) -> int:
    target = Path(argv[0]) if argv else Path("client-protocol/typescript/src")
    print(write(target))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
