"""JSON encoding and decoding with their machinery built once, byte-for-byte what the stdlib call gives.

`JSONEncoder.encode` builds a new C encoder (and a dict for its circular-reference check) on every call, and
`json.loads` with any option builds a new decoder and scanner: a few microseconds each time, on every first sight
of a request (its key) and of a cassette (its body). Keys must stay stdlib-exact (a cassette's name is a hash of
this output), so these reuse the stdlib's own C encoder and decoder with the same settings: only the per-call
construction goes, not a byte of output (tests/unit/test_fast_json.py compares them on generated values).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json import encoder as _encoder
from typing import Any


def encoder(**options: Any) -> Callable[[Any], str]:
    """`json.JSONEncoder(**options).encode`, its C encoder built once.

    Without the circular-reference check, which changes no output: the values encoded here come from parsing
    JSON or are built by this package, and a cycle would still fail (RecursionError, not ValueError).
    """
    reference = json.JSONEncoder(**options)
    make = _encoder.c_make_encoder
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
