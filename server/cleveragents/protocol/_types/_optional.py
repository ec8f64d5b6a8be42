"""The one field marker every wire module uses: ``OPTIONAL`` fields are omitted when ``None``."""

from __future__ import annotations

from typing import Any

import attrs

OPTIONAL = {"optional": True}
"""Field metadata: omitted from the wire when ``None``; not required on input."""


def opt() -> Any:
    """An ``OPTIONAL`` field, ``None`` by default."""
    return attrs.field(default=None, metadata=OPTIONAL)
