"""``python -m cleveragents.protocol.gen DIR``: write the JSON Schemas of protocol v1."""

from __future__ import annotations

import sys
from pathlib import Path

from ._schema import write


def main(argv: list[str]) -> int:
    target = Path(argv[0]) if argv else Path("client-protocol/schema")
    for path in write(target):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
