"""Serialize learner state (nested dicts/lists with numpy-array leaves) to bytes, never pickle.

Format ``grove.codec`` version 1: a msgpack map ``{"codec": "grove.codec", "version": 1,
"data": <value>}``. Arrays are a msgpack extension (code 1) holding
``[dtype.str, shape, raw little/big-endian bytes as numpy wrote them]``; object dtypes are
refused both ways, so decoding a hostile payload can only yield numbers, strings and arrays.
Tuples come back as lists; numpy scalars come back as Python scalars.
"""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np

CODEC = "grove.codec"
VERSION = 1
_NDARRAY = 1


class CodecError(ValueError):
    """The bytes are not a Grove codec payload, or hold something it refuses to build."""


def _check_dtype(dtype: np.dtype) -> np.dtype:
    if dtype.hasobject or dtype.kind == "V":
        raise CodecError(f"refusing dtype {dtype.str!r}: only numeric, bool and string arrays")
    return dtype


def _default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        dtype = _check_dtype(obj.dtype)
        data = np.ascontiguousarray(obj).tobytes()
        return msgpack.ExtType(_NDARRAY, msgpack.packb([dtype.str, list(obj.shape), data]))
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"cannot encode {type(obj).__name__}: state leaves must be arrays or scalars")


def _ext_hook(code: int, payload: bytes) -> Any:
    if code != _NDARRAY:
        raise CodecError(f"unknown extension type {code}")
    dtype_str, shape, data = msgpack.unpackb(payload)
    dtype = _check_dtype(np.dtype(dtype_str))
    array = np.frombuffer(data, dtype=dtype).reshape(shape)
    return array.copy()  # writable and independent of the payload buffer


def encode(value: Any) -> bytes:
    """Bytes of ``value`` (dicts, lists, tuples, str, int, float, bool, None, ndarrays)."""
    return msgpack.packb(
        {"codec": CODEC, "version": VERSION, "data": value}, default=_default, use_bin_type=True
    )


def decode(payload: bytes) -> Any:
    """Inverse of :func:`encode`; raises :class:`CodecError` on anything else."""
    try:
        envelope = msgpack.unpackb(payload, ext_hook=_ext_hook, raw=False, strict_map_key=False)
    except CodecError:
        raise
    except Exception as exc:  # msgpack raises several types for malformed input
        raise CodecError(f"not a {CODEC} payload: {exc}") from exc
    if not isinstance(envelope, dict) or envelope.get("codec") != CODEC:
        raise CodecError(f"not a {CODEC} payload")
    if envelope.get("version") != VERSION:
        raise CodecError(f"{CODEC} version {envelope.get('version')!r} is not supported")
    return envelope["data"]


def pack(value: Any) -> bytes:
    """Plain msgpack for small records (contexts in decision records and stream entries)."""
    return msgpack.packb(value, use_bin_type=True)


def unpack(payload: bytes) -> Any:
    return msgpack.unpackb(payload, raw=False, strict_map_key=False)
