"""msgspec decoders and conversions into wire types, safe to use from any thread (a leaf: imports
nothing of the bot).

msgspec builds a struct type's decoding information the first time a decoder (or a `convert`) meets
the type, and publishes it on the class before it is complete, so that recursive types work. A
thread that meets the class meanwhile decodes with half of it, and the process dies with SIGSEGV:
`/upgrade check --fleet` did, checking twenty clusters on eight threads, each building the decoder
of the same pod type. So every decoder of a wire type is built here, one at a time, and kept; and a
`convert` builds the type's information that way before it converts.
"""

from __future__ import annotations

import threading
from typing import Any, TypeVar

import msgspec

T = TypeVar("T")

_BUILDING = threading.Lock()
_DECODERS: dict[Any, msgspec.json.Decoder[Any]] = {}


def decoder(type_: Any) -> msgspec.json.Decoder[Any]:
    """The JSON decoder of `type_`, built once, and never beside another being built."""
    found = _DECODERS.get(type_)
    if found is None:
        with _BUILDING:
            found = _DECODERS.get(type_)
            if found is None:
                found = _DECODERS[type_] = msgspec.json.Decoder(type_)
    return found


def convert(obj: Any, type_: type[T]) -> T:
    """`msgspec.convert`, after `type_`'s information was built whole (`decoder`)."""
    decoder(type_)
    return msgspec.convert(obj, type_)


def decode(data: bytes | str, type_: type[T]) -> T:
    """`msgspec.json.decode(data, type=type_)` with the kept decoder."""
    result: T = decoder(type_).decode(data)
    return result
