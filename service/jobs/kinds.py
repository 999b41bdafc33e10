"""The job-kind table: one entry per kind of batch job.

A kind is a pydantic schema of its parameters (a :class:`service.jobs.params.JobParams`
subclass: checked when the job is submitted, 422 if wrong, and again by the worker) and
``run(params, dataset, progress) -> result``:

- ``params``: an instance of the schema;
- ``dataset``: a :class:`service.jobs.dataset.Dataset` (``dataset.frame`` is a DataFrame);
- ``progress(fraction, message)``: report how far the job is (fraction in [0, 1]); call it at
  least every few seconds: it is also where a cancelled job stops (it raises
  :class:`service.jobs.progress.JobCancelled`: let it propagate);
- ``preload``: modules the worker imports before it forks an attempt (heavy imports such as
  scikit-learn are then paid once per worker, not once per job);
- the result: a JSON-able dict (numbers, strings, lists, dicts; NaN becomes null), keys in
  camelCase like the rest of the API, shown by ``GET /jobs/{id}`` once the job is done.

Raise :class:`service.jobs.dataset.DatasetError` (or ``ValueError``) for input that does not
fit: the job ends ``failed`` with that message. Any other exception also fails the job, with its
type and message; the worker goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from service.jobs import feature_selection, pruning, rule_distillation, warm_start
from service.jobs.dataset import Dataset
from service.personalizer import jobs as personalizer_jobs

Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class JobKind:
    name: str
    params: type[BaseModel]
    run: Callable[[Any, Dataset, Progress], dict[str, Any]]
    summary: str
    #: modules the worker imports once at start, so that each forked attempt has them
    preload: tuple[str, ...] = ()
    #: the kind reads the app's stream itself: an ``events`` source is not loaded into a frame
    #: (its ``last`` is handed to the kind as the number of events to read)
    reads_stream: bool = False


KINDS: dict[str, JobKind] = {
    kind.name: kind
    for kind in (
        JobKind(
            "feature-selection",
            feature_selection.FeatureSelectionParams,
            feature_selection.run,
            "R-MOTiFS: which input columns predict the target column (k-NN accuracy)",
            preload=("online.selection.r_motifs",),
        ),
        JobKind(
            "pruning",
            pruning.PruningParams,
            pruning.run,
            "MEPSI ensemble pruning: a random forest from uploaded data, or an app's Bandit Forest",
            preload=("sklearn.ensemble", "online.pruning", "online.bandit.forest"),
        ),
        JobKind(
            "rule-distillation",
            rule_distillation.RuleDistillationParams,
            rule_distillation.run,
            "RuDi: weighted rules that explain a teacher's scores of event sequences, or when "
            "an app's policy chooses an action",
            preload=("online.rules", "sklearn.metrics", "online.bandit.forest"),
        ),
        JobKind(
            "personalizer-evaluation",
            personalizer_jobs.EvaluationParams,
            personalizer_jobs.run_evaluation,
            "Personalizer offline evaluation: counterfactual values (IPS with anytime-valid "
            "bands, SNIPS, DR) of candidate policies on an app's logged events in a time window",
            preload=("online.confidence",),
        ),
        JobKind(
            "warm-start",
            warm_start.WarmStartParams,
            warm_start.run,
            "Warm start: the app's current policy learns the app's logged events, and replaces "
            "the app's model (after a policy change: a model that earns from its first event)",
            reads_stream=True,
        ),
        JobKind(
            "personalizer-feature-importance",
            personalizer_jobs.ImportanceParams,
            personalizer_jobs.run_importance,
            "Personalizer feature importances: how much of the reward each context feature "
            "explains beyond the action, on an app's logged events in a time window",
        ),
    )
}


def job_kind(name: str) -> JobKind:
    try:
        return KINDS[name]
    except KeyError:
        raise KeyError(f"unknown job kind {name!r}; kinds: {sorted(KINDS)}") from None
