"""Moved to ``kit.rawpeer``; this name stays only for tests/workspace, which imports
``daemon.rawpeer`` and is edited by its owners separately. Import ``kit.rawpeer``."""

from kit.rawpeer import RawDaemon, body

__all__ = ["RawDaemon", "body"]
