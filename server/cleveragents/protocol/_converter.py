"""The one cattrs converter of the wire: camelCase names, nothing dropped by default.

lsprotocol's converter omits any field equal to its default (``iteration: 0`` would
vanish); ours omits only fields marked ``OPTIONAL`` when they are ``None``. Structuring
errors become one message naming the field path (``params.tools[0].name: ...``).
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Callable
from typing import Any, TypeVar

import attrs
import cattrs
from cattrs.errors import IterableValidationError, IterableValidationNote
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from ..tool import ToolCallRecord

T = TypeVar("T")

_CAMEL = re.compile(r"_([a-z0-9])")


def camel(name: str) -> str:
    """``tool_call_history`` -> ``toolCallHistory``."""
    return _CAMEL.sub(lambda m: m.group(1).upper(), name)


def is_optional(field: attrs.Attribute[Any]) -> bool:
    return bool(field.metadata.get("optional"))


def _wire_class(cls: type) -> bool:
    return attrs.has(cls) and (
        cls.__module__.startswith("cleveragents.protocol") or cls is ToolCallRecord
    )


def _strict_str(value: Any, _: type) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {_json_type(value)}")
    return value


def _strict_int(value: Any, _: type) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an integer, got {_json_type(value)}")
    return value


def _strict_float(value: Any, _: type) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected a number, got {_json_type(value)}")
    return float(value)


def _strict_bool(value: Any, _: type) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected a boolean, got {_json_type(value)}")
    return value


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "object"}.get(type(value), type(value).__name__)  # fmt: skip


def _strict_dict(value: Any, _: type) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"expected an object, got {_json_type(value)}")
    return value


def _is_list(type_: Any) -> bool:
    origin: Any = typing.get_origin(type_)
    return origin is list


def _strict_list_hook(type_: Any, converter: cattrs.Converter) -> Any:
    """``list[T]`` from a JSON array only: cattrs would take any iterable, so a string
    became a list of its characters (``"args": "a string"``)."""
    (item,) = typing.get_args(type_) or (Any,)
    structure_item = converter.get_structure_hook(item)

    def hook(value: Any, _: type) -> list[Any]:
        if not isinstance(value, list):
            raise TypeError(f"expected an array, got {_json_type(value)}")
        out, errors = [], []
        for index, element in enumerate(value):
            try:
                out.append(structure_item(element, item))
            except Exception as exc:  # noqa: BLE001 - gathered as cattrs gathers them
                note = IterableValidationNote(f"Structuring {type_} @ index {index}", index, item)
                exc.__notes__ = [*getattr(exc, "__notes__", []), note]
                errors.append(exc)
        if errors:
            raise IterableValidationError(f"While structuring {type_!r}", errors, type_)
        return out

    return hook


def make_converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=False)
    # JSON is strict about types; cattrs would happily turn "3" into 3.
    converter.register_structure_hook(str, _strict_str)
    converter.register_structure_hook(int, _strict_int)
    converter.register_structure_hook(float, _strict_float)
    converter.register_structure_hook(bool, _strict_bool)
    converter.register_structure_hook_func(lambda t: t == dict[str, Any], _strict_dict)
    converter.register_structure_hook_factory(_is_list, lambda t: _strict_list_hook(t, converter))
    unions: list[tuple[Any, Any]] = [
        (str | dict[str, Any], _str_or_object),
        (str | int, _str_or_int),
    ]
    for union, hook in unions:
        converter.register_structure_hook_func(_is(union), hook)
        converter.register_structure_hook_func(_is(union | None), _or_none(hook))

    def unstructure_factory(cls: type) -> Any:
        overrides = {
            f.name: override(rename=camel(f.name), omit_if_default=is_optional(f))
            for f in attrs.fields(cls)
        }
        return make_dict_unstructure_fn(cls, converter, _cattrs_omit_if_default=False, **overrides)  # type: ignore[arg-type]

    def structure_factory(cls: type) -> Any:
        overrides = {f.name: override(rename=camel(f.name)) for f in attrs.fields(cls)}
        # Messages tolerate unknown fields (a newer peer may send more); configuration
        # types marked strict refuse them, so that a misspelt setting is not ignored.
        strict = bool(getattr(cls, "__wire_strict__", False))
        return make_dict_structure_fn(
            cls,
            converter,
            _cattrs_forbid_extra_keys=strict,
            **overrides,  # type: ignore[arg-type]
        )

    converter.register_unstructure_hook_factory(_wire_class, unstructure_factory)
    converter.register_structure_hook_factory(_wire_class, structure_factory)
    return converter


def _is(expected: Any) -> Any:
    return lambda candidate: candidate == expected


def _or_none(hook: Any) -> Any:
    return lambda value, type_: None if value is None else hook(value, type_)


def _str_or_object(value: Any, _: type) -> str | dict[str, Any]:
    if isinstance(value, (str, dict)):
        return value
    raise TypeError(f"expected a string or an object, got {_json_type(value)}")


def _str_or_int(value: Any, _: type) -> str | int:
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise TypeError(f"expected a string or an integer, got {_json_type(value)}")


converter = make_converter()


def _compact_encoder() -> Callable[[Any], str]:
    """``JSONEncoder(...).encode`` with the C encoder it builds on every call built once:
    a notification's text costs one C call instead of three Python frames and a new
    encoder. No cycle check (wire payloads are trees): a cycle would overflow the
    recursion limit, and the standard encoder then says what it is."""
    standard = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        from _json import encode_basestring, make_encoder
    except ImportError:  # no C accelerator (not CPython)
        return standard.encode
    fast = make_encoder(
        None, standard.default, encode_basestring, None, ":", ",", False, False, False
    )

    def encode(value: Any) -> str:
        try:
            return "".join(fast(value, 0))
        except RecursionError:
            return standard.encode(value)

    return encode


dumps = _compact_encoder()
"""Compact JSON text for the wire and the transcripts (UTF-8, framed by byte length).
``NaN`` and ``Infinity`` raise ``ValueError``: they are not JSON, and no peer can read them."""


class RawJson:
    """JSON text made already, sent as is where a value is expected: a run's result is
    encoded once, from its records' cached texts, for ``run/finished`` and the
    ``run/start`` reply alike, instead of being unstructured and encoded again. A wrapper,
    not a ``str`` subclass, so that megabytes of text are never copied to make one."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class ParamsError(ValueError):
    """Params that do not fit their type; the message names the field."""


def structure(data: Any, cls: type[T], root: str = "params") -> T:
    """Structure wire data into ``cls``; ``ParamsError`` naming the first bad field."""
    if not isinstance(data, dict):
        raise ParamsError(f"{root}: expected an object, got {_json_type(data)}")
    try:
        return converter.structure(data, cls)
    except cattrs.BaseValidationError as exc:
        messages = cattrs.transform_error(exc, path=root, format_exception=_format)
        if not messages:
            raise ParamsError(f"{root}: invalid") from None
        text, _, path = messages[0].rpartition(" @ ")
        raise ParamsError(f"{camel(path)}: {text}") from None
    except (TypeError, ValueError) as exc:
        raise ParamsError(f"{root}: {exc}") from None


def _format(exc: BaseException, type_: type | None) -> str:
    if isinstance(exc, KeyError):
        return "required field missing"
    if isinstance(exc, TypeError):
        return str(exc)
    if type_ is not None and typing.get_origin(type_) is typing.Literal:
        allowed = ", ".join(repr(value) for value in typing.get_args(type_))
        return f"expected one of {allowed}"
    return cattrs.v.format_exception(exc, type_)


def unstructure(obj: Any) -> Any:
    return converter.unstructure(obj)
