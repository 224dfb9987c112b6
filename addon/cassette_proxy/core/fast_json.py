"""JSON encoding and decoding with their machinery built once, byte-for-byte what the stdlib call gives.

`JSONEncoder.encode` builds a new C encoder (and a dict for its circular-reference check) on every call, and
`json.loads` with any option builds a new decoder and scanner: a few microseconds each time, on every first sight
of a request (its key) and of a cassette (its body). Keys must stay stdlib-exact (a cassette's name is a hash of
this output), so these reuse the stdlib's own C encoder and decoder with the same settings: only the per-call
construction goes, not a byte of output (tests/unit/test_fast_json.py compares them on generated values).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from json import encoder as _encoder
from typing import Any


def encoder(**options: Any) -> Callable[[Any], str]:
    """`json.JSONEncoder(**options).encode`, its C encoder built once.

    Without the circular-reference check, which changes no output: the values encoded here come from parsing
    JSON or are built by this package, and a cycle would still fail (RecursionError, not ValueError).
    """
    reference = json.JSONEncoder(**options)
    # None without the C speed-up; typeshed does not declare it.
    make: Callable[..., Callable[[Any, int], Iterable[str]]] | None = getattr(_encoder, "c_make_encoder", None)
    if make is None or reference.indent is not None:  # no C speed-up, or an indented form: the stdlib's own path
        return reference.encode
    strings = _encoder.encode_basestring_ascii if reference.ensure_ascii else _encoder.encode_basestring
    encode_c = make(
        None, reference.default, strings, None, reference.key_separator, reference.item_separator,
        reference.sort_keys, reference.skipkeys, reference.allow_nan,
    )  # fmt: skip

    def encode(value: Any) -> str:
        if isinstance(value, str):  # JSONEncoder.encode special-cases a bare string
            return strings(value)
        return "".join(encode_c(value, 0))

    return encode


def decoder(**options: Any) -> Callable[[bytes | str], Any]:
    """`json.loads(text, **options)`, its decoder built once; bytes are decoded as `json.loads` decodes them."""
    built = json.JSONDecoder(**options)

    def loads(text: bytes | str) -> Any:
        if isinstance(text, str):
            if text.startswith("\ufeff"):
                raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        else:
            text = text.decode(json.detect_encoding(text), "surrogatepass")
        return built.decode(text)

    return loads


_INFINITY = float("inf")


def _float_text(value: float) -> str:
    """A float as the stdlib writes it (`allow_nan=True`)."""
    if value != value:
        return "NaN"
    if value == _INFINITY:
        return "Infinity"
    if value == -_INFINITY:
        return "-Infinity"
    return float.__repr__(value)


def _key_text(key: Any) -> str:
    """A dict key as the stdlib writes it: a string as is, the scalars it accepts as their JSON text."""
    if isinstance(key, str):
        return key
    if isinstance(key, float):
        return _float_text(key)
    if key is True or key is False or key is None:
        return {True: "true", False: "false", None: "null"}[key]
    if isinstance(key, int):
        return int.__repr__(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def indented(value: Any) -> str:
    """`json.dumps(value, indent=2, ensure_ascii=False)`, in half the time.

    The stdlib writes an indented form with its pure-Python encoder, one generator per nesting level; every
    cassette is written so (a recording, an import of hundreds). This appends to one list, dispatching on the
    exact types JSON parsing gives first, with the stdlib's own C function for strings, and writes the same
    text (tests/unit/test_fast_json.py compares them on generated values). A value the stdlib cannot write
    raises TypeError as the stdlib does.
    """
    out: list[str] = []
    append = out.append
    string = _encoder.encode_basestring

    def write(item: Any, indent: str) -> None:
        kind = type(item)
        if kind is str:
            append(string(item))
        elif kind is dict or kind is list or kind is tuple:
            is_dict = kind is dict
            if not item:
                append("{}" if is_dict else "[]")
                return
            inner = indent + "  "
            separator = ",\n" + inner
            append("{" if is_dict else "[")
            first = len(out)  # where the first member's separator stands: it loses its comma once all are written
            if is_dict:
                for key, element in item.items():
                    append(separator)
                    append(string(key if type(key) is str else _key_text(key)) + ": ")
                    write(element, inner)
            else:
                for element in item:
                    append(separator)
                    write(element, inner)
            out[first] = "\n" + inner
            append("\n" + indent + ("}" if is_dict else "]"))
        elif kind is int:
            append(int.__repr__(item))
        elif kind is float:
            append(_float_text(item))
        else:
            write_other(item, indent)

    def write_other(item: Any, indent: str) -> None:
        """Singletons and subclasses, in the order the stdlib tests them."""
        if item is None:
            append("null")
        elif item is True:
            append("true")
        elif item is False:
            append("false")
        elif isinstance(item, str):
            append(string(item))
        elif isinstance(item, int):
            append(int.__repr__(item))
        elif isinstance(item, float):
            append(_float_text(item))
        elif isinstance(item, list | tuple):
            write(list(item), indent)
        elif isinstance(item, dict):
            write(dict(item.items()), indent)
        else:
            raise TypeError(f"Object of type {type(item).__name__} is not JSON serializable")

    write(value, "")
    return "".join(out)
