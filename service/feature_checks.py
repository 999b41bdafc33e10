"""What every route checks of a feature (a context's, an action's, a slot's) and of an id.

A request is checked before anything of it is stored, so that nothing accepted can fail later:
in the store's msgpack records, or in the trainer, after the client was told it was accepted.

- A number is finite and within +-:data:`~online.policies.features.MAX_MAGNITUDE` (1e38): the
  trees' window keeps float32, the regression policies sum squares of values over their
  events, and one 1e308 made every statistic of a LinUCB app NaN after it.
- An integer fits the records' 64 bits (-2^63 .. 2^64 - 1); a larger one can be sent as a float
  or a string.
- Text is Unicode: JSON's ``\\ud800`` escape gives a lone surrogate, which no record can hold.

>>> check_feature("age", 30)
>>> check_feature("price", 1e308)
Traceback (most recent call last):
ValueError: feature 'price' is 1e+308: numbers must be within +-1e+38
>>> check_text("action id", "\\ud800")
Traceback (most recent call last):
ValueError: action id '\\ud800' is not valid Unicode text (a lone surrogate)
"""

from __future__ import annotations

import math
from typing import Any

from online.policies.features import MAX_MAGNITUDE

__all__ = ["INT_HIGH", "INT_LOW", "check_feature", "check_features", "check_json_text",
           "check_text"]

#: the integers the records' msgpack holds
INT_LOW, INT_HIGH = -(2**63), 2**64 - 1


def _unicode(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_text(what: str, text: str) -> None:
    """``ValueError`` if ``text`` holds a lone surrogate."""
    if not _unicode(text):
        raise ValueError(f"{what} {text!r} is not valid Unicode text (a lone surrogate)")


def check_feature(name: str, value: Any) -> None:
    """``ValueError`` saying what is wrong with one flat feature ``name = value``."""
    check_text("feature name", name)
    if isinstance(value, str):
        check_text(f"feature {name!r} has a value", value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"feature {name!r} is {value}: features must be finite")
        if abs(value) > MAX_MAGNITUDE:
            raise ValueError(f"feature {name!r} is {value!r}: numbers must be within "
                             f"+-{MAX_MAGNITUDE:g}")
    elif isinstance(value, int) and not INT_LOW <= value <= INT_HIGH:
        raise ValueError(f"feature {name!r} is {value}: integers must fit in 64 bits "
                         "(send a larger one as a float or a string)")


def check_features(features: dict[str, Any] | None) -> dict[str, Any] | None:
    """Every feature of a flat mapping (see :func:`check_feature`); returns it unchanged.

    On the decide path: the common values pass one comparison each (a context of 77 numbers,
    ~5 us), and only a value that fails one is looked at by :func:`check_feature`."""
    if not features:
        return features
    if not "".join(features).isascii():
        for name in features:
            check_text("feature name", name)
    for name, value in features.items():
        kind = type(value)
        if kind is float:
            ok = -MAX_MAGNITUDE <= value <= MAX_MAGNITUDE  # (False for NaN)
        elif kind is str:
            ok = value.isascii() or _unicode(value)
        elif kind is int:
            ok = INT_LOW <= value <= INT_HIGH
        else:  # bool, None (the schemas' other feature values), or what check_feature names
            ok = kind is bool or value is None
        if not ok:
            check_feature(name, value)
    return features


def check_json_text(value: Any, where: str = "the body") -> None:
    """``ValueError`` naming the first string of a parsed JSON value (a key or a value, at any
    depth) that holds a lone surrogate: for bodies read without a schema (Personalizer's
    evaluations, feature importances and policies, a job's params), whose names are stored and
    written back later (one such name made every later read of the job list a 500).

    >>> check_json_text({"name": "ok", "policies": [{"name": "\\ud800"}]})
    Traceback (most recent call last):
    ValueError: the body: 'policies'[0]['name'] '\\ud800' is not valid Unicode text ...
    """
    if isinstance(value, str):
        check_text(where, value)
    elif isinstance(value, dict):
        for key, inner in value.items():
            check_text(f"{where}: a key", str(key))
            check_json_text(inner, f"{where}: {key!r}" if where == "the body" else
                            f"{where}[{key!r}]")
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            check_json_text(inner, f"{where}[{i}]")

