"""Personalizer's learning settings (``{"name", "arguments"}``: Vowpal Wabbit command-line
arguments) <-> Grove's policy spec (``{"kind", "params"}``).

Grove writes an app's policy as arguments of its own, in the same shape::

    --kind trees --seed 1 --epsilon 0.2

and reads Personalizer's arguments by one table, :data:`VW_OPTIONS`: an option with a Grove
meaning is mapped, an option naming a parameter of the chosen Grove policy sets it, and
anything else is refused with a message listing what Grove accepts. The choices:

- ``--cb_explore_adf``, ``--ccb_explore_adf``, ``--cb_explore``, ``--cb_adf`` and ``--dsjson``
  say "a contextual bandit that explores, on Personalizer's event format": every Grove policy
  is that, so they are accepted and change nothing; so are ``--save_resume`` and
  ``--preserve_performance_counters`` (a Grove state always resumes learning exactly) and
  ``--quiet``.
- ``--epsilon e`` is the share of uniformly explored decisions: Grove's exploration floor
  (the service configuration's ``explorationPercentage``, the same value).
- ``--kind k`` (Grove's own) chooses the policy kind; ``--<param> value`` sets a constructor
  parameter of that kind's learner (``--seed 3``); VW options that are parameters of a Grove
  policy under the same name (``--gamma_scale`` for a SquareCB policy that has one) map the
  same way.
- VW's learner options (:data:`VW_LEARNER`: ``-l``, ``--power_t``, ``-q``/``--quadratic``/
  ``--interactions``, ``--cb_type``, ``--ignore``, ``-b``) set Grove's ``adf`` kind, the same model
  (one linear model of the context, the actions' features and their products, learned by VW's
  normalized adaptive update), under VW's meaning: Personalizer's default policy, ``--cb_explore_adf
  --epsilon 0.2 --power_t 0 -l 0.001 --cb_type mtr -q ::``, is ``--kind adf`` with those settings
  (its docstring says where the two differ). Without ``--kind`` they choose ``adf`` whatever the
  app's kind was; with another ``--kind`` they are a 400 (the tree policies find interactions
  themselves and have no such rates). ``--learning_rate``, VW's long ``-l``, is a parameter by name
  of whichever kind is chosen. ``--cb_type`` takes ``dm``, ``mtr``, ``ips`` and ``dr`` (the last two
  learn every offered action; ``dr`` with a reward regressor of its own, as VW's), and
  ``--ignore`` drops the namespaces it names, as the SDKs' own sample policy has them
  (``--quadratic GT ... --ignore A --cb_type ips --epsilon 0.2``); ``--l1`` is VW's truncated
  gradient (the SDKs' sample evaluation policy: ``--cb_type ips -l 0.5 --l1 1E-07 --power_t 0.5``),
  ``--clip_p`` VW's floor on a logged probability in the importance weights.
- VW's other options (``--ignore_linear``, ``--l2``, ``--bag``, ``--cover``, ``--softmax``,
  ``--first``...) have no Grove counterpart: 400.
"""

from __future__ import annotations

import inspect
import json
import shlex
from dataclasses import dataclass, field
from typing import Any

from service.models import model_kind

#: VW options that say what every Grove policy is or does: accepted, no effect (Grove's state
#: always resumes learning exactly, VW's --save_resume and --preserve_performance_counters;
#: --quiet is VW's console output)
_IMPLIED = ("--cb_explore_adf", "--ccb_explore_adf", "--cb_explore", "--cb_adf", "--dsjson",
            "--save_resume", "--preserve_performance_counters", "--quiet")
#: what each Grove-meaningful option does
VW_OPTIONS = {
    **{name: "implied" for name in _IMPLIED},
    "--epsilon": "exploration",
    "--kind": "kind",
}
#: VW's options for its learner -> the ``adf`` parameter each sets (``-q`` may repeat)
VW_LEARNER = {
    "-l": "learning_rate", "--power_t": "power_t", "-q": "interactions",
    "--quadratic": "interactions", "--interactions": "interactions", "--cb_type": "cb_type",
    "-b": "bits", "--bit_precision": "bits", "--ignore": "ignore", "--l1": "l1",
    "--clip_p": "clip_p",
}
#: the ``adf`` parameters an option may give several times (VW's spelling: one per option)
REPEATED = {"interactions": "-q", "ignore": "--ignore"}
LEARNER_KIND = "adf"


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
    >>> s = parse("--cb_explore_adf --epsilon 0.2 --power_t 0 -l 0.001 --cb_type mtr -q ::",
    ...           "auto")
    >>> s.kind, s.params, s.exploration
    ('adf', {'power_t': 0, 'learning_rate': 0.001, 'cb_type': 'mtr', 'interactions': ['::']}, 0.2)
    >>> parse("--cb_explore_adf --bag 5", "trees")
    Traceback (most recent call last):
    ...
    service.personalizer.learning_settings.LearningSettingsError: '--bag' has no Grove...
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
    learner = next((option for option, _ in pairs if option in VW_LEARNER), None)
    if learner is not None:
        if settings.kind not in (None, LEARNER_KIND):
            raise LearningSettingsError(
                f"{learner!r} sets VW's learner, which is Grove's --kind {LEARNER_KIND}; "
                f"--kind {settings.kind} has no such setting (leave --kind out, or make it "
                f"{LEARNER_KIND})")
        settings.kind = LEARNER_KIND
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
        if option in VW_LEARNER:
            name = VW_LEARNER[option]
            if value is None:
                raise LearningSettingsError(f"{option} needs a value")
            if name in REPEATED:
                settings.params.setdefault(name, []).append(value)
            else:
                settings.params[name] = _value(value)
            continue
        name = option.lstrip("-")
        if option.startswith("--") and name in accepted:
            settings.params[name] = _value(value) if value is not None else True
            continue
        raise LearningSettingsError(
            f"{option!r} has no Grove counterpart. Grove accepts {', '.join(_IMPLIED)} (no "
            f"effect: every Grove policy is an exploring contextual bandit), --epsilon "
            f"(the exploration floor), --kind (the policy kind), VW's learner options "
            f"{', '.join(VW_LEARNER)} (they set --kind {LEARNER_KIND}, VW's model) and the "
            f"parameters of {kind!r}: {', '.join('--' + p for p in accepted) or 'none'}"
        )
    return settings


def render(kind: str, params: dict[str, Any], exploration: float) -> str:
    """Grove's policy as arguments (what GET /configurations/policy answers).

    >>> render("trees", {"seed": 1}, 0.2)
    '--cb_explore_adf --kind trees --epsilon 0.2 --seed 1'
    >>> render("adf", {"interactions": ["::", "ut"], "power_t": 0}, 0.2)
    '--cb_explore_adf --kind adf --epsilon 0.2 -q :: -q ut --power_t 0'
    """
    from service.personalizer.configuration import floor_param

    parts = ["--cb_explore_adf", "--kind", kind, "--epsilon", f"{exploration:g}"]
    floor = floor_param(kind)  # said by --epsilon already
    for name, value in sorted(params.items()):
        if name == floor:
            continue
        if name in REPEATED and isinstance(value, list):  # (VW's spelling: -q per pair)
            for item in value:
                parts += [REPEATED[name], shlex.quote(item)]
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
