"""Serialize learner state (nested dicts/lists with numpy-array leaves) to bytes, never pickle.

Format ``grove.codec`` version 1: a msgpack map ``{"codec": "grove.codec", "version": 1,
"data": <value>}``. Arrays are a msgpack extension (code 1) holding
``[dtype.str, shape, raw little/big-endian bytes as numpy wrote them]``; object dtypes are
refused both ways, so decoding a hostile payload can only yield numbers, strings and arrays.
Tuples come back as lists; numpy scalars come back as Python scalars.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgpack
import numpy as np

from online.decision import Ranking

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


def pack_ranking(ranking: Sequence[tuple[str, float]]) -> bytes:
    """A ranking's ``(action id, probability)`` pairs, in order: ``[ids, probabilities]``, the
    probabilities as little-endian float64 bytes (exact, 8 bytes each). Reads the arrays of
    an :class:`online.decision.Ranking` without making its pairs.

    >>> unpack_ranking(pack_ranking([("b", 0.7), ("a", 0.2), ("c", 0.1)]))
    [('b', 0.7), ('a', 0.2), ('c', 0.1)]
    """
    if isinstance(ranking, Ranking):  # its candidates in ranking order, its array
        ids = list(map(ranking.candidates.__getitem__, ranking.order.tolist()))
        probabilities = ranking.probabilities
    else:
        ids = [a for a, _ in ranking]
        probabilities = np.array([p for _, p in ranking], dtype=np.float64)
    return pack([ids, probabilities.astype("<f8").tobytes()])


def unpack_ranking(payload: bytes) -> list[tuple[str, float]]:
    """Inverse of :func:`pack_ranking`."""
    ids, probabilities = unpack(payload)
    return list(zip(ids, np.frombuffer(probabilities, dtype="<f8").tolist(), strict=True))
