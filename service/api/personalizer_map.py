"""Azure Personalizer's feature shape -> Grove's flat context.

Personalizer sends ``contextFeatures`` (and each action's ``features``) as a *list of
dictionaries*; a dictionary's keys are either features (``{"timeOfDay": "Morning"}``) or
namespaces holding features (``{"user": {"profileType": "AnonymousUser"}}``). Grove's context is
one flat mapping name -> number, string, bool or null, so:

- a top-level scalar keeps its name: ``{"timeOfDay": "Morning"}`` -> ``timeOfDay = "Morning"``;
- a namespace's features are joined with a dot, at any depth up to :data:`MAX_DEPTH`:
  ``{"user": {"profileType": "A"}}`` -> ``user.profileType = "A"`` (the names Personalizer's own
  inference explanations use);
- a list of scalars becomes one feature per position: ``{"emb": [0.1, 0.2]}`` ->
  ``emb.0 = 0.1, emb.1 = 0.2``;
- the dictionaries of the list are merged; one name given twice with different values is an
  error (Grove would otherwise keep an arbitrary one).
"""

from __future__ import annotations

from typing import Any

from service.feature_checks import check_features

MAX_DEPTH = 4


class FeatureShapeError(ValueError):
    """The features cannot be flattened (too deep, conflicting names) or are not features Grove
    takes (see :mod:`service.feature_checks`)."""


#: the values a feature holds as it is (JSON's scalars)
_SCALARS = (str, int, float, bool, type(None))


def _put(out: dict[str, Any], name: str, value: Any) -> None:
    if name in out and out[name] != value:
        raise FeatureShapeError(f"feature {name!r} is given twice with different values")
    out[name] = value


def _walk(out: dict[str, Any], prefix: str, value: Any, depth: int) -> None:
    if isinstance(value, dict):
        if depth >= MAX_DEPTH:
            raise FeatureShapeError(f"features nest deeper than {MAX_DEPTH} levels at {prefix!r}")
        for key, inner in value.items():
            _walk(out, f"{prefix}.{key}" if prefix else str(key), inner, depth + 1)
    elif isinstance(value, list):
        if depth >= MAX_DEPTH:
            raise FeatureShapeError(f"features nest deeper than {MAX_DEPTH} levels at {prefix!r}")
        for i, inner in enumerate(value):
            _walk(out, f"{prefix}.{i}", inner, depth + 1)
    elif value is None or isinstance(value, (bool, int, float, str)):
        _put(out, prefix, value)
    else:  # JSON has nothing else; guard anyway
        raise FeatureShapeError(f"feature {prefix!r} has an unsupported value {value!r}")


def flatten(groups: list[dict[str, Any]] | None) -> dict[str, Any]:
    """Personalizer's list of feature dictionaries -> one flat Grove context.

    >>> flatten([{"timeOfDay": "Morning"}, {"user": {"profileType": "A", "tags": [1, 2]}}])
    {'timeOfDay': 'Morning', 'user.profileType': 'A', 'user.tags.0': 1, 'user.tags.1': 2}
    """
    out: dict[str, Any] = {}
    for group in groups or ():
        if not isinstance(group, dict):
            raise FeatureShapeError("each element of the features list must be an object")
        for key, value in group.items():  # (a feature at the top: most of them)
            if type(value) in _SCALARS:
                _put(out, str(key), value)
            else:
                _walk(out, str(key), value, 1)
    try:
        check_features(out)  # finite, within bounds, Unicode (one comparison per common value)
    except ValueError as exc:
        raise FeatureShapeError(str(exc)) from None
    return out
