"""The open table of model providers: one :class:`Provider` registration per provider.

Owns the registration record, the table, and finding the built-in registrations: every
module of :mod:`cleveragents.llm.builtin` defines one ``PROVIDER``, and the table loads
them all on its first use. So a built-in provider is one module there (two with a wire
format of its own: its codec is a module of ``cleveragents.tool``), and anyone else adds
one at run time with :func:`register_provider`, without editing this package.

Everything that knew a closed list of providers reads this table instead: spec parsing
and its messages (``spec``), the adapters' shared base (``_base``: the SDK to import,
the codec to speak, the key variables), the log scrubbing (``_redact``: the SDKs'
logger names), the provider table of docs/models.md and the layers test (both checked
against the table by tests).

Deliberately knows no provider: nothing here branches on a name. Loading the table
imports the built-in modules, never an SDK (an adapter imports its SDK when it is
built).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Literal, TypeAlias, get_args

import attrs

from cleveragents.tool import LLMCaller, ToolCallRouter

from .errors import ModelConfigError

if TYPE_CHECKING:
    from .spec import ModelSpec

__all__ = [
    "Adapter",
    "Provider",
    "Takes",
    "find_provider",
    "get_provider",
    "providers",
    "register_provider",
]

Takes = Literal["model", "script", "nothing"]
"""What a string spec holds after ``NAME:``: ``"model"`` (``openai:gpt-4o-mini``; the
object form needs ``model``), ``"script"`` (``scripted:PATH``; the object form needs
``script`` or ``path``), or ``"nothing"`` (the bare ``client``)."""

Adapter: TypeAlias = Callable[["ModelSpec"], LLMCaller]
"""Builds the caller for a spec of its provider (raising ``ModelConfigError``)."""

PROVIDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
"""A provider's name: what comes before the ``:`` of a string spec, so never a ``:``."""

_TAKES: tuple[Takes, ...] = get_args(Takes)
_FORM_ARGUMENT = {"model": ":MODEL", "script": ":PATH", "nothing": ""}
_BUILTIN_PACKAGE = "cleveragents.llm.builtin"


def _check_name(_instance: object, _attribute: object, value: str) -> None:
    if not isinstance(value, str) or not PROVIDER_NAME.fullmatch(value):
        raise ValueError(f"invalid provider name {value!r}: names match {PROVIDER_NAME.pattern}")


def _check_takes(instance: Provider, _attribute: object, value: str) -> None:
    if value not in _TAKES:
        raise ValueError(f"provider {instance.name!r}: takes must be one of {_TAKES}")


def _names(values: Iterable[str]) -> tuple[str, ...]:
    """Names as a tuple; a lone string is refused, since it would be read letter by
    letter."""
    items = () if isinstance(values, str) else tuple(values)
    if isinstance(values, str) or not all(isinstance(v, str) and v for v in items):
        raise TypeError(f"expected a tuple of names, got {values!r}")
    return items


@attrs.frozen(kw_only=True)
class Provider:
    """One model provider, as everything that needs to know it reads it.

    ``adapter`` builds the caller for a spec; ``None`` for a model that is not built
    here (``client``: the daemon asks the editor for each answer, through
    ``llm/generate``, so :func:`~cleveragents.llm.create_caller` refuses it).
    ``package`` (the SDK's import name) and ``extra`` (the ``cleveragents[...]`` extra
    that installs it) are for adapters over an SDK, which import it when they are built;
    ``loggers`` are the SDK's logger names, whose records are scrubbed of keys (a name
    with no dot covers its whole tree once it exists; dotted ones are guarded before
    they are created). ``codec`` names the wire format (``cleveragents.tool``'s
    ``register_codec``) its adapter speaks; ``base_url`` is the API's root when a spec
    gives none (``None``: the SDK's default).
    """

    name: str = attrs.field(validator=_check_name)
    summary: str
    """One line for docs/models.md's provider table: what the provider is."""
    takes: Takes = attrs.field(default="model", validator=_check_takes)
    example: str | None = None
    """A model (or script path) for messages, e.g. ``gpt-4o-mini``."""
    key_envs: tuple[str, ...] = attrs.field(default=(), converter=_names)
    """The variables its key is read from, in order, when a spec names none."""
    package: str | None = None
    extra: str | None = None
    loggers: tuple[str, ...] = attrs.field(default=(), converter=_names)
    codec: str | None = None
    adapter: Adapter | None = attrs.field(default=None, eq=False)
    base_url: str | None = None
    apis: tuple[tuple[str, str], ...] = ()
    """The APIs of the provider's family, each to the registration that serves it:
    ``(("chat", "openai"), ("responses", "openai-responses"))``. A spec's ``api``
    picks one; empty when there is only one API."""
    shared: bool = True
    """Whether one caller serves every run of a spec (an HTTP client and its connection
    pool); ``False``: a caller is built per run (the scripted model rereads its file)."""

    @property
    def form(self) -> str:
        """Its string spec's shape: ``openai:MODEL``, ``scripted:PATH``, ``client``."""
        return self.name + _FORM_ARGUMENT[self.takes]

    @property
    def example_spec(self) -> str:
        """A string spec for messages: ``openai:gpt-4o-mini``, or :attr:`form`."""
        if self.takes == "nothing" or not self.example:
            return self.form
        return f"{self.name}:{self.example}"


_table: dict[str, Provider] = {}
_lock = threading.RLock()
_loaded = False
_loading = False


def register_provider(provider: Provider, *, replace: bool = False) -> None:
    """Add a provider to the table, so that specs naming it parse and build.

    Refused, naming it: a provider whose name is taken (a built-in included) unless
    ``replace`` is true, and one whose ``codec`` is not registered yet (register the
    codec first, with ``cleveragents.tool.register_codec``).
    """
    if not isinstance(provider, Provider):
        raise TypeError(f"register_provider takes a Provider, not {type(provider).__name__}")
    with _lock:
        _load_builtins()
        _add(provider, replace=replace)


def get_provider(name: str) -> Provider:
    """The provider registered as ``name``; ``ModelConfigError`` naming the known ones."""
    found = find_provider(name)
    if found is None:
        known = ", ".join(repr(p.name) for p in providers())
        raise ModelConfigError(f"unknown model provider {name!r}: the known providers are {known}")
    return found


def find_provider(name: object) -> Provider | None:
    """The provider registered as ``name``, or ``None``."""
    _load_builtins()
    return _table.get(name) if isinstance(name, str) else None


def providers() -> tuple[Provider, ...]:
    """Every registered provider: the built-ins (by module name), then the others in the
    order they were registered."""
    _load_builtins()
    return tuple(_table.values())


def _add(provider: Provider, *, replace: bool) -> None:
    if provider.name in _table and not replace:
        raise ValueError(
            f"a model provider named {provider.name!r} is registered already "
            "(replace=True replaces it)"
        )
    if provider.codec is not None:
        try:
            ToolCallRouter(provider.codec)
        except ValueError:
            raise ValueError(
                f"model provider {provider.name!r} speaks codec {provider.codec!r}, which is "
                "not registered: register it first (cleveragents.tool.register_codec)"
            ) from None
    _table[provider.name] = provider


def _load_builtins() -> None:
    """Register the ``PROVIDER`` of every module of :mod:`cleveragents.llm.builtin`, once.

    Other threads wait for the load; the loading thread, should a built-in module look
    the table up as it is imported, sees it empty instead of recursing. A module that
    fails to import registers nothing, and the next look-up tries again.
    """
    global _loaded, _loading
    if _loaded:
        return
    with _lock:
        if _loaded or _loading:
            return
        _loading = True
        try:
            package = importlib.import_module(_BUILTIN_PACKAGE)
            found = []
            for name in sorted(m.name for m in pkgutil.iter_modules(package.__path__)):
                module = importlib.import_module(f"{_BUILTIN_PACKAGE}.{name}")
                provider = getattr(module, "PROVIDER", None)
                if not isinstance(provider, Provider):
                    raise TypeError(f"{module.__name__} defines no PROVIDER")
                found.append(provider)
        finally:
            _loading = False
        for provider in found:
            _add(provider, replace=False)
        _loaded = True
