"""``ToolRegistry``: the name -> ``ToolSpec`` table, optionally layered over a parent.

A layered registry is how a run sees the shared tools, filtered by an optional
allow-list, plus its own (registered with a ``runId`` in the daemon). Every mutation bumps
``version`` so the runtime rebuilds the model-facing schemas only when something changed.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator

from ._errors import DuplicateToolError, ToolNotFoundError
from ._spec import ToolSpec
from ._types import ToolSchema


class ToolRegistry:
    """Register, unregister and look up tools. Duplicates and unknown names fail loudly."""

    def __init__(
        self, *, parent: ToolRegistry | None = None, allow: Collection[str] | None = None
    ) -> None:
        self._specs: dict[str, ToolSpec] = {}
        self._parent = parent
        self._allow = frozenset(allow) if allow is not None else None
        self._own_version = 0
        self._explainers: list[Callable[[str], str | None]] = []
        self._schema_cache: tuple[tuple[int, ...], tuple[ToolSchema, ...]] | None = None
        """The schemas and the version they were built at; a root registry drops it on
        every change, so the loop's check each iteration is one attribute read."""

    @property
    def version(self) -> tuple[int, ...]:
        """Changes whenever this registry or any parent changes."""
        if self._parent is None:
            return (self._own_version,)
        return (self._own_version, *self._parent.version)

    def register(self, spec: ToolSpec, *, replace: bool = False) -> None:
        if not isinstance(spec, ToolSpec):
            raise TypeError(f"expected a ToolSpec, got {type(spec).__name__}")
        if not replace and spec.name in self._specs:
            raise DuplicateToolError(f"tool {spec.name!r} is already registered")
        self._specs[spec.name] = spec
        self._own_version += 1
        self._schema_cache = None

    def unregister(self, name: str) -> ToolSpec:
        try:
            spec = self._specs.pop(name)
        except KeyError:
            raise ToolNotFoundError(f"tool {name!r} is not registered") from None
        self._own_version += 1
        self._schema_cache = None
        return spec

    def get(self, name: str) -> ToolSpec | None:
        """The visible spec called ``name``, or ``None``. The allow-list filters what the
        parent offers; this layer's own tools are always visible."""
        spec = self._specs.get(name)
        if spec is not None or self._parent is None:
            return spec
        if self._allow is not None and name not in self._allow:
            return None
        return self._parent.get(name)

    def lookup(self, name: str) -> ToolSpec:
        """The visible spec called ``name``; ``ToolNotFoundError`` naming it otherwise."""
        spec = self.get(name)
        if spec is None:
            raise ToolNotFoundError(f"unknown tool {name!r}")
        return spec

    def explain_missing(self, explainer: Callable[[str], str | None]) -> None:
        """Add a source of words for a name that is not registered: a tool source whose
        tools are absent (an MCP server that failed or waits for a sign-in) says why, so
        a call of it is not merely an "unknown tool"."""
        self._explainers.append(explainer)

    def why_missing(self, name: str) -> str | None:
        """Why ``name`` is not here, if a source of this layer or a parent knows."""
        for explainer in self._explainers:
            why = explainer(name)
            if why is not None:
                return why
        return self._parent.why_missing(name) if self._parent is not None else None

    def owns(self, name: str) -> bool:
        """Whether ``name`` is registered in this layer (not a parent)."""
        return name in self._specs

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(self.specs())

    def __len__(self) -> int:
        return len(self.specs())

    def names(self) -> list[str]:
        return [spec.name for spec in self.specs()]

    def specs(self) -> list[ToolSpec]:
        """Visible specs, sorted by name (a stable order for schemas and listings)."""
        merged: dict[str, ToolSpec] = {}
        if self._parent is not None:
            allow = self._allow
            merged.update(
                (spec.name, spec)
                for spec in self._parent.specs()
                if allow is None or spec.name in allow
            )
        merged.update(self._specs)
        return [merged[name] for name in sorted(merged)]

    def schemas(self) -> tuple[ToolSchema, ...]:
        """The model-facing schemas, rebuilt only when the registry changed."""
        cache = self._schema_cache
        if cache is not None and self._parent is None:
            return cache[1]
        version = (self._own_version,) if self._parent is None else self.version
        if cache is None or cache[0] != version:
            cache = (version, tuple(spec.schema for spec in self.specs()))
            self._schema_cache = cache
        return cache[1]
