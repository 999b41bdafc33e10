"""A learner's hyperparameters, checked before it is built or changed: each value of the type
its constructor declares, numbers finite, integers within 64 bits, text Unicode.

The learners check their values' ranges (a ``ValueError`` naming the parameter). What they do not
check is the JSON types, and a wrong type did harm: ``{"weigh_trees": "no"}`` was taken as true (a
non-empty string), ``{"window": Infinity}`` raised an ``OverflowError`` (a 500), an MCTS-IS app
with ``max_nodes: Infinity`` was created and then refused every label it had accepted, and a
seed past 64 bits could not be stored. The types come from the constructor's annotations,
validated by pydantic in strict mode: an int is a float, nothing else converts (no ``"1"`` for
1, no 1 for true, no 1e5 for an integer).

>>> from online.policies.trees import TreeEnsemblePolicy
>>> check_params(TreeEnsemblePolicy, {"window": 50_000, "gamma_scale": 2})
>>> check_params(TreeEnsemblePolicy, {"weigh_trees": "no"})
Traceback (most recent call last):
ValueError: parameter 'weigh_trees': Input should be a valid boolean
>>> check_params(TreeEnsemblePolicy, {"window": float("inf")})
Traceback (most recent call last):
ValueError: parameter 'window' is inf: numbers must be finite
"""

from __future__ import annotations

import functools
import math
import typing
from typing import Any

from pydantic import TypeAdapter, ValidationError

from service.feature_checks import INT_HIGH, INT_LOW, check_text

__all__ = ["check_candidate_params", "check_params"]

#: the magnitudes a hyperparameter of a float type may take (besides 0): no setting of the
#: learners needs more, and their arithmetic stays finite within them (LinUCB's alpha of
#: 1e308 or ridge of 1e-320, a gamma_scale of 1e308 made every decision a division by zero or
#: NaN)
FLOAT_RANGE = (1e-12, 1e12)


def _check_values(where: str, value: Any) -> None:
    """Finite numbers (floats within FLOAT_RANGE in magnitude, or 0), 64-bit integers, Unicode
    text, at any depth (a candidate's params)."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} is {value}: numbers must be finite")
        low, high = FLOAT_RANGE
        if value and not low <= abs(value) <= high:
            raise ValueError(f"{where} is {value!r}: a number of a hyperparameter is 0 or "
                             f"within {low:g} and {high:g} in magnitude")
    elif isinstance(value, int) and not isinstance(value, bool):
        if not INT_LOW <= value <= INT_HIGH:
            raise ValueError(f"{where} is {value}: integers must fit in 64 bits")
    elif isinstance(value, str):
        check_text(where, value)
    elif isinstance(value, dict):
        for key, inner in value.items():
            check_text(f"{where}: a key", str(key))
            _check_values(f"{where}[{key!r}]", inner)
    elif isinstance(value, (list, tuple)):
        for i, inner in enumerate(value):
            _check_values(f"{where}[{i}]", inner)


@functools.cache
def _adapters(cls: type) -> dict[str, TypeAdapter]:
    """A strict validator per annotated constructor parameter of ``cls``."""
    hints = typing.get_type_hints(cls.__init__)
    return {name: TypeAdapter(hint) for name, hint in hints.items() if name != "return"}


def check_params(cls: type, params: dict[str, Any]) -> None:
    """``ValueError`` naming the first parameter of ``params`` whose value ``cls``'s constructor
    cannot take by its type (see the module doc). Parameters ``cls`` does not have are left to
    the caller's own check; an auto policy's candidates are checked against their kinds."""
    adapters = _adapters(cls)
    for name, value in params.items():
        where = f"parameter {name!r}"
        _check_values(where, value)
        adapter = adapters.get(name)
        if adapter is None:
            continue
        try:
            adapter.validate_python(value, strict=True)
        except ValidationError as exc:
            message = exc.errors(include_url=False)[0]["msg"]
            raise ValueError(f"{where}: {message}") from None
    candidates = params.get("candidates")
    if isinstance(candidates, list):
        check_candidate_params(candidates)


def check_candidate_params(candidates: list) -> None:
    """``ValueError`` naming the first candidate (of an auto policy) whose params its kind
    cannot take by their types (see :func:`check_params`)."""
    from online.policies.registry import POLICY_KINDS

    for i, spec in enumerate(candidates):
        kind = POLICY_KINDS.get(spec.get("kind")) if isinstance(spec, dict) else None
        inner = spec.get("params") if kind is not None else None
        if isinstance(inner, dict):  # (anything else: the auto policy names the problem)
            try:
                check_params(kind.cls, inner)
            except ValueError as exc:
                raise ValueError(f"candidate {i} ({kind.name}): {exc}") from None
