"""Personalizer's learning settings (``{"name", "arguments"}``: Vowpal Wabbit command-line
arguments) <-> Grove's policy spec (``{"kind", "params"}``).

Grove writes an app's policy as arguments of its own, in the same shape::

    --kind trees --seed 1 --epsilon 0.2

and reads Personalizer's arguments by one table, :data:`VW_OPTIONS`: an option with a Grove
meaning is mapped, an option naming a parameter of the chosen Grove policy sets it, and
anything else is refused with a message listing what Grove accepts. The choices:

- ``--cb_explore_adf``, ``--ccb_explore_adf``, ``--cb_explore``, ``--cb_adf`` and ``--dsjson``
  say "a contextual bandit that explores, on Personalizer's event format": every Grove policy
  is that, so they are accepted and change nothing.
- ``--epsilon e`` is the share of uniformly explored decisions: Grove's exploration floor
  (the service configuration's ``explorationPercentage``, the same value).
- ``--kind k`` (Grove's own) chooses the policy kind; ``--<param> value`` sets a constructor
  parameter of that kind's learner (``--seed 3``); VW options that are parameters of a Grove
  policy under the same name (``--gamma_scale`` for a SquareCB policy that has one) map the
  same way.
- VW's feature engineering (``-q``/``--quadratic``, ``--interactions``, ``--ignore``...), its
  learning rates and losses (``-l``, ``--power_t``, ``--l1``...), ``--cb_type`` and the other
  exploration algorithms (``--bag``, ``--cover``, ``--softmax``, ``--first``...) have no Grove
  counterpart: 400. Grove's tree policies find interactions themselves.
"""

from __future__ import annotations

import inspect
import json
import shlex
from dataclasses import dataclass, field
from typing import Any

from service.models import model_kind

#: VW options that say what every Grove policy is: accepted, no effect
_IMPLIED = ("--cb_explore_adf", "--ccb_explore_adf", "--cb_explore", "--cb_adf", "--dsjson")
#: what each Grove-meaningful option does
VW_OPTIONS = {
    **{name: "implied" for name in _IMPLIED},
    "--epsilon": "exploration",
    "--kind": "kind",
}


class LearningSettingsError(ValueError):
    """Arguments Grove cannot take (the API answers 400 InvalidPolicyConfiguration)."""


@dataclass
class LearningSettings:
    """What arguments mean in Grove: a policy kind and params, maybe an exploration floor."""

    kind: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    exploration: float | None = None


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _is_value(token: str) -> bool:
    """A token that follows an option as its value (not an option; negative numbers are)."""
    return not token.startswith("-") or isinstance(_value(token), (int, float))


def parameters(kind: str) -> list[str]:
    """The constructor parameters of ``kind``'s learner (what ``--<param>`` may set)."""
    signature = inspect.signature(model_kind(kind).cls.__init__)
    return [
        name
        for name, p in signature.parameters.items()
        if name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]


def parse(arguments: str, current_kind: str) -> LearningSettings:
    """Read ``arguments``; the kind is ``--kind``'s or ``current_kind``.

    >>> s = parse("--cb_explore_adf --epsilon 0.1 --kind bandit-forest --seed 3", "trees")
    >>> s.kind, s.params, s.exploration
    ('bandit-forest', {'seed': 3}, 0.1)
    >>> parse("--cb_explore_adf -q GT", "bandit-forest")
    Traceback (most recent call last):
    ...
    service.personalizer.learning_settings.LearningSettingsError: '-q' has no Grove counterpart...
    """
    try:
        tokens = shlex.split(arguments or "")
    except ValueError as exc:
        raise LearningSettingsError(f"arguments cannot be read: {exc}") from None
    settings = LearningSettings()
    pairs: list[tuple[str, str | None]] = []
    i = 0
    while i < len(tokens):
        option = tokens[i]
        if not option.startswith("-"):
            raise LearningSettingsError(f"{option!r} is not an option (options start with '--')")
        value = None
        if "=" in option:
            option, value = option.split("=", 1)
        elif i + 1 < len(tokens) and _is_value(tokens[i + 1]):
            value = tokens[i + 1]
            i += 1
        pairs.append((option, value))
        i += 1
    for option, value in pairs:
        if VW_OPTIONS.get(option) == "kind":
            settings.kind = value
    kind = settings.kind or current_kind
    try:
        accepted = parameters(kind)
    except ValueError as exc:
        raise LearningSettingsError(str(exc)) from None
    if not model_kind(kind).uses_actions:  # (an app that ranks would answer every rank 400)
        raise LearningSettingsError(f"--kind {kind}: a Personalizer policy ranks actions; "
                                    f"{kind!r} predicts labels and takes none")
    for option, value in pairs:
        meaning = VW_OPTIONS.get(option)
        if meaning == "implied" or meaning == "kind":
            continue
        if meaning == "exploration":
            number = _value(value) if value is not None else None
            if isinstance(number, bool) or not isinstance(number, (int, float)) or not (
                0.0 <= number <= 1.0
            ):
                raise LearningSettingsError(f"--epsilon must be a number in [0, 1], got {value!r}")
            settings.exploration = float(number)
            continue
        name = option.lstrip("-")
        if option.startswith("--") and name in accepted:
            settings.params[name] = _value(value) if value is not None else True
            continue
        raise LearningSettingsError(
            f"{option!r} has no Grove counterpart. Grove accepts {', '.join(_IMPLIED)} (no "
            f"effect: every Grove policy is an exploring contextual bandit), --epsilon "
            f"(the exploration floor), --kind (the policy kind; --kind adf learns the "
            f"context's products with the actions' features, as -q did) and the parameters "
            f"of {kind!r}: {', '.join('--' + p for p in accepted) or 'none'}"
        )
    return settings


def render(kind: str, params: dict[str, Any], exploration: float) -> str:
    """Grove's policy as arguments (what GET /configurations/policy answers).

    >>> render("trees", {"seed": 1}, 0.2)
    '--cb_explore_adf --kind trees --epsilon 0.2 --seed 1'
    """
    from service.personalizer.configuration import floor_param

    parts = ["--cb_explore_adf", "--kind", kind, "--epsilon", f"{exploration:g}"]
    floor = floor_param(kind)  # said by --epsilon already
    for name, value in sorted(params.items()):
        if name == floor:
            continue
        text = value if isinstance(value, str) else json.dumps(value)
        parts += [f"--{name}", shlex.quote(text)]
    return " ".join(parts)


def check(kind: str, params: dict[str, Any]) -> None:
    """ValueError saying what is wrong if ``kind`` cannot be built with ``params``."""
    try:
        model_kind(kind).new(dict(params), ["a", "b"])
    except (TypeError, ValueError) as exc:
        accepted = ", ".join("--" + p for p in parameters(kind))
        raise ValueError(
            f"policy {kind!r} refuses these parameters: {exc} (it takes {accepted})"
        ) from None
