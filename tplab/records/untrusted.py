"""Records read from untrusted JSON: each field's kind with its bounds, and the one check of them.

Why: what the pod writes (its events, its results.json) is untrusted: a broken job, a broken
image or someone else's pod can put anything there, and the client adds, draws and prints what
it reads. So a record that crosses from the pod declares each field's kind once, as a type that
carries its bounds (``Count``, ``Amount``, ``Label``, ... below: ``typing.Annotated`` over the
Python type), and ``fields_of(cls)`` turns those declarations into the checks that ``read``
applies to a JSON object and ``check`` to a record about to be written. Downstream code reads
typed attributes and checks nothing again.

What a kind refuses: a value of another JSON type (``true`` is no number, ``1`` no flag); a
number that is not finite or out of its range (the event decoder refuses JSON's ``NaN`` and
``Infinity``; ``1e999``, which Python reads as infinity, and a 400-digit integer are refused
here); a string or a list over its length. ``finite(v)`` is the same number check for a figure
read out of a nested record (results.json, a manifest) that has no declared kind yet.

Standard library only: it travels to the pod with the records.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Annotated, Any, Callable, NamedTuple, Union

#: the largest figure (ms, bytes, dollars, seconds, GB/s) a record may carry: far above any
#: measurement, far below what overflows a float's arithmetic
MAX_FIGURE = 1e15
#: the largest count: integers exact in a double, as every JSON reader keeps them
MAX_COUNT = 2 ** 53
#: a name, a state, a mode, a host (characters)
MAX_LABEL = 256
#: a message, a reason, a path, a decoded text (characters)
MAX_TEXT = 16_384
#: a list's items (modes, transports, pod ids, sizes)
MAX_ITEMS = 1_024

Check = Callable[[Any], Any]


class Refused(ValueError):
    """A value is not of its field's kind; the text says what it must be and what it was."""


def shown(v: Any) -> str:
    """``v`` as an error message shows it: short, whatever the pod sent."""
    if isinstance(v, str):
        return f"a string of {len(v)} characters" if len(v) > 40 else repr(v)
    if isinstance(v, (list, tuple, dict)):
        return f"a {'list' if isinstance(v, (list, tuple)) else 'object'} of {len(v)} items"
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def number(lo: float, hi: float, what: str) -> Check:
    """An int or float (never a bool) from ``lo`` to ``hi``: NaN and infinity fail the range."""
    def check(v: Any) -> Any:
        if (v.__class__ is float or v.__class__ is int) and lo <= v <= hi:
            return v
        raise Refused(f"must be {what}, got {shown(v)}")
    return check


def integer(lo: int, hi: int, what: str) -> Check:
    """An int (never a bool) from ``lo`` to ``hi``."""
    def check(v: Any) -> Any:
        if v.__class__ is int and lo <= v <= hi:
            return v
        raise Refused(f"must be {what}, got {shown(v)}")
    return check


def text(limit: int) -> Check:
    """A string of at most ``limit`` characters."""
    def check(v: Any) -> Any:
        if v.__class__ is str and len(v) <= limit:
            return v
        raise Refused(f"must be a string of at most {limit} characters, got {shown(v)}")
    return check


def one_of(*values: str) -> Check:
    """One of the given strings."""
    allowed = frozenset(values)

    def check(v: Any) -> Any:
        if v.__class__ is str and v in allowed:
            return v
        raise Refused(f"must be one of {', '.join(values)}, got {shown(v)}")
    return check


def items(item: Check, limit: int, make: Callable[[Any], Any] = list) -> Check:
    """A list (a tuple, from a writer) of at most ``limit`` items, each passing ``item``; the
    value kept is ``make`` of the checked items."""
    def check(v: Any) -> Any:
        if (v.__class__ is list or v.__class__ is tuple) and len(v) <= limit:
            try:
                return make([item(x) for x in v])
            except Refused as exc:
                raise Refused(f"has an item that {exc}") from None
        raise Refused(f"must be a list of at most {limit} items, got {shown(v)}")
    return check


def _object(v: Any) -> Any:
    if v.__class__ is dict:
        return v
    raise Refused(f"must be an object, got {shown(v)}")


def _flag(v: Any) -> Any:
    if v.__class__ is bool:
        return v
    raise Refused(f"must be true or false, got {shown(v)}")


# ---- the kinds of field (each the Python type a reader sees, with its bounds) -------------
#: a non-negative integer: an index, a position, a size in bytes, a count, a port
Count = Annotated[int, integer(0, MAX_COUNT, f"an integer from 0 to {MAX_COUNT}")]
#: an integer that may be negative (an exit code)
Int = Annotated[int, integer(-MAX_COUNT, MAX_COUNT, "an integer")]
#: a finite, non-negative number: a duration, a size, dollars, a rate, a share
Amount = Annotated[float, number(0.0, MAX_FIGURE, "a finite number from 0")]
#: a finite number that may be negative (what is left of a budget once it is overspent)
Signed = Annotated[float, number(-MAX_FIGURE, MAX_FIGURE, "a finite number")]
#: a short string: a name, a state, a mode, a host, an id
Label = Annotated[str, text(MAX_LABEL)]
#: a long string: a message, a reason, a path, a decoded text
LongText = Annotated[str, text(MAX_TEXT)]
Labels = Annotated[list[str], items(text(MAX_LABEL), MAX_ITEMS)]
Counts = Annotated[list[int], items(integer(0, MAX_COUNT, "a count"), MAX_ITEMS)]
#: a series of figures (one per round), kept as a tuple
Amounts = Annotated[tuple[float, ...],
                    items(number(0.0, MAX_FIGURE, "a finite number from 0"), MAX_ITEMS, tuple)]
#: a nested record, described and read by its own module (results.json, the profiled pass);
#: its size is the line's (``tplab.wire.event_tail.MAX_LINE_BYTES``)
Nested = Annotated[dict[str, Any], _object]


def finite(v: Any) -> float | None:
    """``v`` as a float when it is a finite number (not a bool), else None: a figure read out of
    a nested record whose fields have no declared kind."""
    if (v.__class__ is float or v.__class__ is int) and -MAX_FIGURE <= v <= MAX_FIGURE:
        return float(v)
    return None


def finite_list(v: Any, n: int) -> tuple[float, ...] | None:
    """``v`` as ``n`` floats when it is a list of ``n`` finite numbers, else None."""
    if v.__class__ is not list or len(v) != n:
        return None
    out = tuple(finite(x) for x in v)
    return None if None in out else out  # type: ignore[return-value]


def count(v: Any) -> int | None:
    """``v`` when it is a count (a non-negative int, not a bool), else None."""
    return v if v.__class__ is int and 0 <= v <= MAX_COUNT else None


# ---- a record's fields, from its declarations ----------------------------------------------
_REQUIRED: Any = object()
_set = object.__setattr__


class Field(NamedTuple):
    """One declared field: its name, the check of its kind, and its default (a marker when it
    has none; a field whose default is None is optional and may be null)."""

    name: str
    check: Check
    default: Any

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED



def _check_for(hint: Any, where: str) -> tuple[Check, bool]:
    """The check of a declared kind, and whether the declaration allows None."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        args = typing.get_args(hint)
        if len(args) == 2 and type(None) in args:
            return _check_for(next(a for a in args if a is not type(None)), where)[0], True
    elif typing.get_origin(hint) is Annotated:
        for meta in hint.__metadata__:
            if callable(meta):
                return typing.cast(Check, meta), False
    elif hint is bool:
        return _flag, False
    raise TypeError(f"{where}: {hint!r} is not a kind of field with bounds "
                    "(see tplab.records.untrusted)")


def fields_of(cls: type, skip: tuple[str, ...] = ()) -> tuple[Field, ...]:
    """``cls``'s dataclass fields (those in ``skip`` left out) with the check of each one's
    declared kind. A field whose type declares no bounds, or that may be None without None as
    its default (or the other way round), is a TypeError, at import."""
    hints = typing.get_type_hints(cls, include_extras=True)
    out = []
    for f in dataclasses.fields(cls):
        if f.name in skip or not f.init:
            continue
        where = f"{cls.__name__}.{f.name}"
        if f.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{where}: a wire record's default is a constant")
        chk, nullable = _check_for(hints[f.name], where)
        default = _REQUIRED if f.default is dataclasses.MISSING else f.default
        if nullable != (default is None):
            raise TypeError(f"{where}: an optional field is `X | None = None`, and only it")
        out.append(Field(f.name, chk, default))
    return tuple(out)


Filler = Callable[[Any, dict[str, Any]], Any]


def filler(fields: tuple[Field, ...], frozen: bool = False) -> Filler:
    """The function ``fill(record, obj) -> record`` that sets every field of ``fields`` on
    ``record`` (a new, empty instance of its dataclass) from the JSON object ``obj``, checked;
    an absent field takes its default, keys of ``obj`` that are not fields are left alone, and
    ``Refused`` names the first field that fails. The record is built without its
    ``__init__`` (records read this way declare no ``__post_init__``).

    Why generated (as ``dataclasses`` makes ``__init__``): this runs once per event on the
    client's hot path (a token event per decoded token per mode, thousands a second at GPU
    speed), and straight-line code with each field's name in it costs about 60 % of a loop over
    the fields. The source is made here from the field names alone; the checks are the
    kinds' own functions."""
    ns: dict[str, Any] = {"MISSING": _REQUIRED, "Refused": Refused, "set_": _set}
    body = ["def fill(record, obj):", "    get = obj.get"]
    for i, (name, chk, default) in enumerate(fields):
        if not name.isidentifier():
            raise TypeError(f"{name!r} is no field name")
        ns[f"check{i}"], ns[f"default{i}"] = chk, default
        ns[f"missing{i}"], ns[f"field{i}"] = f"is missing field {name!r}", f"field {name!r} "
        store = (f"set_(record, {name!r}, {{}})" if frozen else f"record.{name} = {{}}").format
        body.append(f"    v = get({name!r}, MISSING)")
        if default is _REQUIRED:
            body.append(f"    if v is MISSING: raise Refused(missing{i})")
            pad = "    "
        else:
            none = "v is None or " if default is None else ""
            body += [f"    if {none}v is MISSING: {store(f'default{i}')}", "    else:"]
            pad = "        "
        body += [f"{pad}try: {store(f'check{i}(v)')}",
                 f"{pad}except Refused as exc: raise Refused(field{i} + str(exc)) from None"]
    body.append("    return record")
    exec("\n".join(body), ns)  # noqa: S102 - the source above, from identifiers only
    return typing.cast(Filler, ns["fill"])


def check(fields: tuple[Field, ...], record: Any) -> None:
    """``Refused`` unless every field of ``record`` (a record about to be written) is of its
    kind: the same checks a ``filler`` applies on the other side."""
    for name, chk, default in fields:
        v = getattr(record, name)
        if v is None and default is None:
            continue
        try:
            chk(v)
        except Refused as exc:
            raise Refused(f"field {name!r} {exc}") from None
