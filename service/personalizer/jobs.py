"""Job kinds of Personalizer's evaluations and feature importances (batch jobs on the worker).

Both read the app's logged events in a time window themselves (their job source is
``{"type": "app", "app", "from", "to"}``: no table is loaded for them); what they compute is in
:mod:`service.personalizer.evaluation` and :mod:`service.personalizer.importance`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from service.jobs.dataset import Dataset, DatasetError
from service.jobs.params import JobParams
from service.personalizer.logged import read_window

MAX_EVENTS = 1_000_000


class CandidateSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    source: str
    arguments: str = ""
    kind: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)


class EvaluationParams(JobParams):
    """A Personalizer evaluation: the window (unix ms) and the candidates, parsed already."""

    start_ms: int = Field(ge=0)
    end_ms: int = Field(ge=0)
    candidates: list[CandidateSpec] = Field(min_length=1, max_length=64)
    max_events: int = Field(default=MAX_EVENTS, ge=1, le=MAX_EVENTS)


class ImportanceParams(JobParams):
    start_ms: int = Field(ge=0)
    end_ms: int = Field(ge=0)
    max_events: int = Field(default=MAX_EVENTS, ge=1, le=MAX_EVENTS)


def _events(params, dataset: Dataset) -> list:
    if dataset.app is None or dataset.store is None:
        raise DatasetError("this job runs on an app's logged events: give the app")
    events = list(
        read_window(dataset.store.redis, dataset.app, params.start_ms, params.end_ms,
                    params.max_events)
    )
    if not events:
        raise DatasetError("no logs exist in the date range (NoLogsExistInDateRange)")
    return events


def run_evaluation(params: EvaluationParams, dataset: Dataset, progress) -> dict[str, Any]:
    from service.personalizer.evaluation import Candidate, evaluate

    config = dataset.store.require_app(dataset.app) if dataset.store else None
    events = _events(params, dataset)
    candidates = [Candidate(**c.model_dump()) for c in params.candidates]
    return evaluate(events, config, candidates, progress)


def run_importance(params: ImportanceParams, dataset: Dataset, progress) -> dict[str, Any]:
    from service.personalizer.importance import importances

    events = _events(params, dataset)
    return {"events": len(events), "featureScores": importances(events, progress)}
