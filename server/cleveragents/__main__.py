"""``python -m cleveragents`` is the ``cleveragents`` command."""

from .cli import main

raise SystemExit(main())
