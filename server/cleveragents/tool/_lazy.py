"""Names a package exports but loads at their first use (PEP 562), so that a process
that only needs the package's light parts (the daemon before its ``initialize`` reply)
never imports the heavy ones."""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from typing import Any


def lazy_exports(
    package: str, modules: Mapping[str, str], namespace: MutableMapping[str, Any]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: a name of ``modules`` (name -> its
    submodule, ``"_store"``) is imported from that submodule when first asked for, and
    kept in ``namespace`` (the package's globals) so that the next lookup is plain."""

    def __getattr__(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        # __import__, not importlib.import_module: -X importtime (the start-up test's
        # and the bench's reading) sees only imports that go through it
        value = getattr(__import__(f"{package}.{module}", fromlist=[name]), name)
        namespace[name] = value
        return value

    return __getattr__
