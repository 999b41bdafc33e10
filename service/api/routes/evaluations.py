"""/apps/{app}/evaluations and /apps/{app}/candidates: an auto app's candidates.

``GET /apps/{app}/evaluations`` (the app's key or the admin key) lists every candidate with its
anytime-valid estimate and band and whether it serves, and every switch of the serving
candidate. ``PATCH /apps/{app}/candidates`` (admin key) changes the candidates on the live app
(the others keep what they learned), the serving candidate, or the exploration floor: removing
the serving candidate without naming another is a 409; unknown kinds and bad params a 422.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field

from online.policies.auto import CandidateConflict
from service import candidates
from service.api.deps import AdminDep, AppName, AppVersionDep, StoreDep
from service.candidates import MAX_CANDIDATES, MAX_NAME, NAME

router = APIRouter(prefix="/apps/{app}", tags=["evaluations"])


class Band(BaseModel):
    estimate: float | None
    lower: float
    upper: float


class CandidateEvaluation(BaseModel):
    name: str
    kind: str
    params: dict[str, Any]
    estimate: float | None = Field(description="the value estimate that decides switches (IPS "
                                   "by default), in the [0, 1] reward scale")
    lower: float = Field(description="lower end of the anytime-valid band; for a candidate "
                         "that learns it bounds the best value the candidate has had since its "
                         "creation, so it may exceed the estimate (an average) and even upper")
    upper: float = Field(description="upper end of the anytime-valid band; for a candidate "
                         "that learns it bounds the worst value it has had")
    events: int = Field(description="events evaluated since the candidate was created")
    serving: bool
    level: float = Field(description="confidence level of this candidate's band")
    created_at: int = Field(description="events the app had learned when it was created")
    changes: int | None = Field(None, description="actions whose rewards the candidate found "
                                "changed, and forgot (trees) or restarted (linucb); null for a "
                                "kind that does not watch (bandit-forest)")
    ips: Band
    snips: float | None
    dr: Band


class Switch(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    at: int = Field(description="events learned when the switch happened")
    from_: str = Field(alias="from")
    to: str
    reason: str = Field(description="'evaluation' (bands) or 'operator' (a PATCH)")
    estimates: dict[str, dict[str, Any]]


class Evaluations(BaseModel):
    candidates: list[CandidateEvaluation]
    switches: list[Switch]
    serving: str
    floor: float
    held: str | None = Field(None, description="why no candidate that learns per action id "
                             "may replace the serving one now (its actions are young: the "
                             "action-feature candidate keeps the app), or null: the bands "
                             "alone decide")


class CandidateSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: str
    params: dict[str, Any] = Field(default_factory=dict)
    name: str | None = Field(None, min_length=1, max_length=MAX_NAME, pattern=NAME)


class CandidatesUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    candidates: list[CandidateSpec] | None = Field(
        None, min_length=1, max_length=MAX_CANDIDATES,
        description="the new list: a listed name with the same kind (and params, if given) "
        "keeps its candidate and what it learned; the others are new")
    serving: str | None = Field(None, description="the candidate to serve now")
    floor: float | None = Field(None, gt=0, lt=1, description="the exploration floor")


@router.get("/evaluations", response_model=Evaluations, response_model_by_alias=True)
async def get_evaluations(app_version: AppVersionDep, store: StoreDep) -> dict:
    """Each candidate's estimate with its anytime-valid band, and the switches so far."""
    config, _ = app_version
    try:
        return await run_in_threadpool(candidates.evaluations, store, config)
    except candidates.NotAuto as exc:
        raise HTTPException(422, str(exc)) from None


@router.patch("/candidates", response_model=Evaluations, response_model_by_alias=True)
async def change_candidates(app: AppName, body: CandidatesUpdate, store: StoreDep,
                            _: AdminDep) -> dict:
    """Change the candidates, the serving candidate or the floor of a live auto app."""
    # only the keys the client gave: a spec without params keeps the candidate of that name
    # and kind whatever its params (a default ``params: {}`` would make it a new one)
    if body.candidates is None and body.serving is None and body.floor is None:
        raise HTTPException(422, "nothing to change: give candidates, serving or floor")
    specs = None if body.candidates is None else [
        c.model_dump(exclude_unset=True) for c in body.candidates]
    try:
        return await run_in_threadpool(candidates.change, store.redis, app, specs, body.serving,
                                       body.floor)
    except candidates.Gone:
        raise HTTPException(404, f"app {app!r} not found") from None
    except CandidateConflict as exc:
        raise HTTPException(409, str(exc)) from None
    except KeyError as exc:  # a serving name that is not a candidate
        raise HTTPException(422, str(exc.args[0]) if exc.args else str(exc)) from None
    except ValueError as exc:  # NotAuto, unknown kinds, bad params
        raise HTTPException(422, str(exc)) from None
