"""Config options declared once. A dataclass field made by `option()` carries its YAML
key, its documentation and its constraints; `parse_options` reads a YAML mapping into
the dataclass from that metadata and the field's type alone, with one-line errors
naming the dotted key. The reference pages are generated from the same metadata
(docs/reference/config.md)."""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, field, fields, is_dataclass
from typing import Any, TypeVar

from .errors import SpecError

T = TypeVar("T")


def option(
    default: Any = MISSING,
    *,
    doc: str,
    key: str | None = None,
    shown: str | None = None,
    choices: tuple[str, ...] | None = None,
    minimum: float | None = None,
    maximum: int | None = None,
    required: bool = False,
    parse: Any = None,
) -> Any:
    """A dataclass field a YAML file sets, with its documentation.

    Args:
        default: its value when the YAML leaves it out.
        doc: what it means (the reference pages print it).
        key: its YAML key where it differs from the field's name (`output.path`).
        shown: its default as the YAML reads it where the Python value would mislead
            (`auto` for None).
        choices: the strings it may take.
        minimum: the smallest number it may take (0 when not given).
        maximum: the largest whole number it may take (none when not given).
        required: the YAML must set it.
        parse: a reader `(value, dotted key) -> field value` for a value its type alone
            does not describe (the privacy rules: a list or `{random: ...}`).

    Returns:
        A `dataclasses.field`.
    """
    meta = {"doc": doc, "key": key, "shown": shown, "choices": choices, "minimum": minimum}
    meta |= {"maximum": maximum}
    return field(default=default, metadata=meta | {"required": required, "parse": parse})


def yaml_keys(cls: type) -> tuple[str, ...]:
    """The YAML keys of a dataclass's options (`option`), in declaration order."""
    return tuple(f.metadata.get("key") or f.name for f in fields(cls) if "doc" in f.metadata)


def refuse_unknown(d: Mapping[str, Any], known: Iterable[str], what: str) -> None:
    """A SpecError when the mapping `d` (`what`, e.g. `multi_sa`) has keys not `known`,
    naming them and the known ones."""
    known = list(known)
    unknown = set(d) - set(known)
    if unknown:
        raise SpecError(
            f"{what} has unknown keys {', '.join(sorted(map(str, unknown)))}; known: {', '.join(known)}"
        )


def one_of(value: Any, choices: Iterable[str], key: str) -> None:
    """Refuse a setting that is not one of its choices, naming them."""
    choices = tuple(choices)
    if value not in choices:
        raise SpecError(f"{key} must be one of {', '.join(choices)}, not {value!r}")


def number(
    value: Any, key: str, kind: type = float, minimum: float = 0, maximum: int | None = None
) -> Any:
    """`value` as a finite `kind` (float or int) >= `minimum` (and <= `maximum`), or None;
    anything else is a SpecError naming `key`."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (isinstance(value, float) and not math.isfinite(value))
        or (kind is int and isinstance(value, float) and not value.is_integer())
        or value < minimum
        or (maximum is not None and value > maximum)
    ):
        what = f"{'a whole' if kind is int else 'a'} number >= {minimum:g}"
        what += f" and <= {maximum}" if maximum is not None else ""
        raise SpecError(f"{key} must be {what}, not {value!r}")
    return kind(value)


def names(value: Any, what: str) -> tuple[str, ...]:
    """A non-empty list of attribute names (or one comma-separated string of them)."""
    items = [x.strip() for x in value.split(",")] if isinstance(value, str) else value
    if (
        not isinstance(items, list | tuple)
        or not items
        or not all(isinstance(x, str) and x for x in items)
    ):
        raise SpecError(f"{what} must be a non-empty list of attribute names, not {value!r}")
    return tuple(items)


def parse_options(cls: type[T], d: Any, where: str) -> T:
    """The dataclass `cls` from the YAML mapping `d`: every key an option of `cls` (a
    dotted key, `output.path`, is `path` in the section `output:`), each value read by
    its option's `parse` or by its field's type (str, int, float, bool, `X | None`, a
    list of names, a list of name lists, a mapping of names to values, a dataclass of
    options: its own section, an empty one reading as None where None is allowed) and
    its `option` constraints; the fields `d` leaves out keep their defaults.
    `cls.__post_init__` then checks what depends on several fields.

    Args:
        cls: a dataclass whose YAML fields are made by `option`.
        d: the YAML mapping (None reads as empty).
        where: its dotted key in the config, for the errors (`marginals`); empty for a
            whole file.

    Returns:
        The instance.

    Raises:
        SpecError: `d` or a section is not a mapping, has an unknown key, leaves out a
            required one, or holds a value of the wrong type or outside its constraints.
    """
    d = _mapping(d, where)
    keys = yaml_keys(cls)
    refuse_unknown(d, dict.fromkeys(k.split(".")[0] for k in keys), where or "the config")
    sections = {k.split(".")[0] for k in keys if "." in k}
    for section in sorted(sections):
        inner = [k.split(".", 1)[1] for k in keys if k.startswith(f"{section}.")]
        where_section = _dotted(where, section)
        refuse_unknown(_mapping(d.get(section), where_section), inner, where_section)
    hints = typing.get_type_hints(cls)
    values = {}
    for f in fields(cls):  # type: ignore[arg-type]
        if "doc" not in f.metadata:
            continue
        name = f.metadata.get("key") or f.name
        holder, last = d, name
        if "." in name:
            first, last = name.split(".", 1)
            holder = _mapping(d.get(first), _dotted(where, first))
        key = _dotted(where, name)
        if f.metadata.get("required") and holder.get(last) in (None, ""):
            raise SpecError(f"{key} is required")
        if last in holder:
            values[f.name] = _read(holder[last], hints[f.name], key, f.metadata)
    return cls(**values)


def parse_file(cls: type[T], d: Any, where: str = "config") -> T:
    """A whole YAML file read as the dataclass `cls` (`parse_options`), its errors
    naming the file once.

    Args:
        cls: a dataclass whose YAML fields are made by `option`.
        d: the file's mapping.
        where: what it is, for the errors (the file's path).

    Returns:
        The instance.

    Raises:
        SpecError: one line, `where: ` and the dotted key at fault.
    """
    if not isinstance(d, Mapping):
        raise SpecError(f"{where}: expected a mapping")
    try:
        return parse_options(cls, d, "")
    except SpecError as e:
        raise SpecError(f"{where}: {e}") from None


def _dotted(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _mapping(d: Any, where: str) -> Mapping[str, Any]:
    """A section as a mapping (None reads as empty)."""
    d = {} if d is None else d
    if not isinstance(d, Mapping):
        raise SpecError(f"{where or 'the config'} must be a mapping of its settings, not {d!r}")
    return d


def _read(v: Any, hint: Any, key: str, meta: Mapping[str, Any]) -> Any:
    """One option's value: by its `parse`, as a section of options, or by its type."""
    inner = [a for a in typing.get_args(hint) if a is not type(None)]
    if v is None and type(None) in typing.get_args(hint):  # `X | None`: null is none
        return None
    if meta.get("parse") is not None:
        return meta["parse"](v, key)
    section = hint if is_dataclass(hint) else inner[0] if len(inner) == 1 else None
    if isinstance(section, type) and is_dataclass(section):
        if section is not hint and not v:  # `X | None`: an empty section is none
            return None
        return parse_options(section, v, key)
    return _value(v, hint, key, meta)


def _value(v: Any, hint: Any, key: str, meta: Mapping[str, Any]) -> Any:
    """One YAML value read as the type `hint` (see `parse_options`)."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        if v is None or (v == "auto" and meta.get("shown") == "auto"):
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _value(v, inner, key, meta)
    if v is None:
        raise SpecError(f"{key} may not be empty (leave it out for its default)")
    if hint in (int, float):
        return number(v, key, hint, meta.get("minimum") or 0, meta.get("maximum"))
    if hint is bool:
        if not isinstance(v, bool):
            raise SpecError(f"{key} must be true or false, not {v!r}")
        return v
    if hint is str or typing.get_origin(hint) is typing.Literal:  # a Literal: __post_init__'s
        if isinstance(v, bool) or not isinstance(v, str | int | float):
            raise SpecError(f"{key} must be a string, not {v!r}")
        if meta.get("choices"):
            one_of(str(v), meta["choices"], key)
        return str(v)
    if args == (str, ...):
        items = names(v, key)
        for item in items if meta.get("choices") else ():
            one_of(item, meta["choices"], f"each of {key}")
        return items
    if len(args) == 2 and args[1] is ... and typing.get_args(args[0]) == (str, ...):
        if not isinstance(v, list | tuple):
            raise SpecError(f"{key} must be a list of attribute lists, e.g. [[age], [age, sex]]")
        return tuple(names(x, f"each of {key}") for x in v)
    if len(args) == 2 and args[1] is ... and len(typing.get_args(args[0])) == 2:
        if not isinstance(v, Mapping):
            raise SpecError(f"{key} must be a mapping, not {v!r}")
        of = typing.get_args(args[0])[1]
        if of is str:  # property values (Spark's): any scalar, as its text
            return tuple((str(k), str(x)) for k, x in v.items())
        return tuple((str(k), _value(x, of, f"{key}.{k}", meta)) for k, x in v.items())
    raise TypeError(f"{key}: no reading for the type {hint!r}")  # a declaration to fix
