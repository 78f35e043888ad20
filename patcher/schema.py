"""TOML tables read into typed frozen dataclasses, every problem of a file found in one pass.

A dataclass declares the schema: each field's type hint is the type its key must have
(``str``, ``bool``, ``int``, ``tuple[str, ...]``, a nested dataclass or a tuple of them;
``X | None`` for an optional key). Field metadata adjusts it: ``key`` (the TOML key, when
it is not a Python name), ``parse`` (a function from the string, or from each string of a
list, to the value, raising ValueError), ``choices`` (the values allowed) and ``empty`` (an
empty string is allowed).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class Invalid(Exception):
    """A value failed its check; the problem is already recorded."""


def read(cls: type[T], value: object, where: str, problems: list[str]) -> T | None:
    """``cls`` built from the table ``value``, or None; each problem found is appended to
    ``problems`` as one line naming its key, ``where`` being the table's own key path."""
    try:
        return _table(cls, value, where, problems)
    except Invalid:
        return None


def _table(cls: type[T], value: object, where: str, problems: list[str]) -> T:
    if not isinstance(value, dict):
        problems.append(f"{where or 'the file'}: expected a table, got {_got(value)}")
        raise Invalid
    # In the order the class takes them: a base's keyword-only fields after the class's own.
    ordered = sorted(dataclasses.fields(cls), key=lambda f: f.kw_only is True)  # type: ignore[arg-type]
    fields = {f.metadata.get("key", f.name): f for f in ordered}
    hints = typing.get_type_hints(cls)
    valid = True
    for key in value:
        if key not in fields:
            known = ", ".join(fields) or "none"
            problems.append(f"{_join(where, key)}: unknown key (known keys: {known})")
            valid = False
    found: dict[str, Any] = {}
    for key, field in fields.items():
        if key not in value:
            if (
                field.default is dataclasses.MISSING
                and field.default_factory is dataclasses.MISSING
            ):
                problems.append(f"{_join(where, key)}: missing")
                valid = False
            continue
        try:
            found[field.name] = _value(
                value[key], hints[field.name], field.metadata, _join(where, key), problems
            )
        except Invalid:
            valid = False
    if not valid:
        raise Invalid
    try:
        return cls(**found)
    except ValueError as error:  # the dataclass's own check across fields
        problems.append(f"{where or 'the file'}: {error}")
        raise Invalid from error


def _value(
    value: object, hint: Any, metadata: typing.Mapping[str, Any], where: str, problems: list[str]
) -> Any:
    hint = _without_none(hint)
    if dataclasses.is_dataclass(hint):
        return _table(typing.cast(type, hint), value, where, problems)
    if typing.get_origin(hint) is tuple:
        item = typing.get_args(hint)[0]
        if not isinstance(value, list):
            problems.append(f"{where}: expected {_expected(hint)}, got {_got(value)}")
            raise Invalid
        items, valid = [], True
        for i, element in enumerate(value):
            try:
                items.append(_value(element, item, metadata, f"{where}[{i}]", problems))
            except Invalid:
                valid = False
        if not valid:
            raise Invalid
        return tuple(items)
    parse: Callable[[str], Any] | None = metadata.get("parse")
    if parse is not None:
        text = _value(value, str, {}, where, problems)
        try:
            return parse(text)
        except ValueError as error:
            problems.append(f"{where}: {error}")
            raise Invalid from error
    if not _is(value, hint):
        problems.append(f"{where}: expected {_expected(hint)}, got {_got(value)}")
        raise Invalid
    if value == "" and not metadata.get("empty"):
        problems.append(f"{where}: expected a non-empty string")
        raise Invalid
    choices = metadata.get("choices")
    if choices is not None and value not in choices:
        problems.append(f"{where}: {value!r} is not one of {', '.join(choices)}")
        raise Invalid
    return value


def _without_none(hint: Any) -> Any:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        rest = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return hint


def _is(value: object, hint: Any) -> bool:
    if hint is int:
        return type(value) is int  # bool is an int to Python, not to a patchset's author
    return isinstance(value, hint)


def _expected(hint: Any) -> str:
    hint = _without_none(hint)
    if typing.get_origin(hint) is tuple:
        return f"a list of {_noun(typing.get_args(hint)[0])}s"
    if hint is bool:
        return "true or false"
    noun = _noun(hint)
    return f"an {noun}" if noun[0] in "aeiou" else f"a {noun}"


def _noun(hint: Any) -> str:
    if dataclasses.is_dataclass(hint):
        return "table"
    return {str: "string", bool: "boolean", int: "integer"}.get(
        hint, getattr(hint, "__name__", "?")
    )


def _got(value: object) -> str:
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    return f"a {type(value).__name__}"


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key
