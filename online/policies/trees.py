"""The tree-ensemble policy: SquareCB exploration over gradient-boosted regressors.

See :class:`TreeEnsemblePolicy`.
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Real
from typing import NamedTuple

import numpy as np

from online.policies.base import Policy
from online.policies.drift import ActionChanges
from online.policies.features import FeatureEncoder
from online.policies.offers import OfferTimes
from online.policies.refit import PreviousFit, RefitJob, RefitResult, booster_params
from online.policies.ridge import RidgeBase
from online.policies.ridge_loo import PENALTIES
from online.policies.squarecb import gamma as igw_gamma
from online.policies.squarecb import inverse_gap_weights
from online.policies.tree_arrays import CompiledEnsemble
from online.policies.trees_decide import candidate_distribution, weighed_scores
from online.policies.window import EventWindow

__all__ = ["TreeEnsemblePolicy", "MAX_COLUMNS"]

# The most feature columns a policy codes (see ``max_columns``): the service takes up to 1,000
# features in one context (GROVE_MAX_FEATURES), so one context's features always fit.
MAX_COLUMNS = 1024


CANDIDATE_SETS = 8  # candidate sets whose models a policy keeps at once (_candidate_models)


class _CandidateModels(NamedTuple):
    """Per candidate of a decision (``known``: their action indices), for ``ensemble``: the
    model index (-1: none fitted yet), whether the oracle has no data for it, the weight of its
    trees (0 without models: every prediction is then the linear base's, 0), and its linear
    base's model index (-1: none; an action new since the last fit has one from its first
    event). ``arrays``: the last four as :func:`candidate_distribution` reads them."""

    known: np.ndarray
    ensemble: CompiledEnsemble
    models: np.ndarray
    unseen: np.ndarray
    blend: np.ndarray
    linear: np.ndarray

    @property
    def arrays(self) -> tuple:
        return self.models, self.linear, self.blend, self.unseen


class _ScoredRows(NamedTuple):
    """The trees' sums :meth:`TreeEnsemblePolicy.distribution_rows` computed with ``ensemble``:
    row i of ``sums`` is the context whose encoded vector's bytes map to i; its column of
    action k is ``column[k]`` (-1: not a candidate then; NaN: not a candidate of that row)."""

    ensemble: CompiledEnsemble
    rows: dict
    sums: np.ndarray
    column: np.ndarray


class TreeEnsemblePolicy(Policy):
    """A contextual bandit whose exploration is driven by a regression oracle over trees.

    The oracle predicts the reward of each action for a context: per action, a ridge regression
    on the context (the linear base, :mod:`~online.policies.ridge`) plus gradient-boosted trees
    fitted to its residuals (LightGBM, squared loss, boosted from the ridge's prediction), both
    refitted on a schedule over a sliding window of the logged events. Actions are drawn by
    SquareCB's inverse-gap weighting (Foster & Rakhlin, 2020): with K candidates and scores s
    (the predictions; with ``optimism``, plus that times the linear base's LinUCB width, see
    below), every action a other than the best b gets ``1 / (K + gamma (s_b -
    s_a))``, b the rest, with ``gamma = gamma_scale * sqrt(K * min(n, window))`` after n
    learned events.

    Choices, by measurement (``bench/policies``; figures in bench/policies/README.md) on
    streams other than the three the issue's targets use (vowel, vehicle, waveform-40 and splice
    as bandit streams of the Bandit Forest paper's protocol, seed 0, 30k-100k steps):

    - *A regression oracle with inverse-gap weighting*: IGW explores where the oracle cannot
      tell actions apart and stops where it can. ``gamma_scale = 4`` earned the most of 1, 2, 4
      and 16 (vowel at 10k steps 0.675 / 0.691 / 0.701 / 0.593; vehicle 0.798 / - / 0.825 /
      0.836; waveform-40 16 ~ 4): 1-2 explore too long, 16 stops too early where early
      mistakes are not corrected.
    - *The trees weighed by how well they predicted* (``weigh_trees``, on): prediction(x) =
      ridge_a(x) + b_a trees_a(x), ``b_a`` in [0, 1] the least-squares weight of the trees in
      ``reward - ridge ~ b * trees`` over action a's events learned since the last refit, each
      predicted by the models in use when it came (out of sample: stacking, as in Breiman's
      stacked regressions, with the events of the stream as the held-out set), shrunk by a
      prior worth 50 events, hierarchically: each action's weight towards the weight of all
      actions' events pooled, and that towards 1 (the trees are trusted until enough of their
      errors say otherwise); the pooled weight for an action with fewer than 50 such events, 1
      before that (:func:`~online.policies.refit.tree_weights`). Why: on low-signal streams
      the trees fit noise that the ridge alone does not (Adult at 10k steps, seeds 0-1: ridge
      alone under IGW 0.243, ridge + trees 0.206; a MOOC enrolment's course, 31 actions, at 30k:
      0.063 against 0.052), while on memorisable ones they carry most of the reward (Letter at
      10k: 0.357 against 0.269); which one a stream is, only its own held-out errors say.
      Held-out streams, seeds 0-1, reward at 10k / 30k without -> with: vowel 0.675 / 0.841 ->
      0.702 / 0.854, vehicle 0.832 / 0.908 -> 0.835 / 0.909, waveform-40 0.815 / 0.887 -> 0.812
      / 0.886, splice 0.915 / 0.954 -> 0.913 / 0.954, german-numeric 0.872 / 0.917 -> 0.873 /
      0.918, credit-a 0.872 / 0.918 -> 0.870 / 0.918, the MOOC stream 0.050 / 0.052 -> 0.054 /
      0.057 (last 10k of 30k 0.053 -> 0.062). Without the prior the weights from a few hundred
      events cost 0.005-0.010 at 10k (vowel 0.692, german-numeric 0.867, MOOC 0.044); over all
      the window's held-out events instead of the last refit's (older, weaker models' errors
      too), 0.005-0.011 on four of the seven. Each learned event costs one prediction of its
      action's models more (~12 us with 100 trees). Each action's weight was first shrunk
      towards 1 rather than towards the pooled weight, which ignores what the other actions'
      trees showed; the hierarchical prior (tried on the issue's streams first, then checked on
      the held-out ones, with the base's updates below) is even on the held-out streams (seeds
      0-1, 10k / 30k: vowel 0.723 / 0.862 -> 0.725 / 0.864, vehicle 0.838 / 0.909 -> 0.835 /
      0.910, waveform-40 0.813 / 0.888 -> 0.811 / 0.885, splice 0.917 / 0.955 -> 0.918 / 0.955,
      german-numeric 0.872 / 0.916 -> 0.871 / 0.917, credit-a 0.873 / 0.921 -> 0.871 / 0.921,
      the MOOC stream 0.056 / 0.063 -> 0.059 / 0.066) and gains on Letter (10k, 3 seeds: 0.390
      -> 0.411) and Adult (0.241 -> 0.245), where the trees of most actions weigh less than 1.
    - *Optimism where the context explains the rewards* (``optimism_explained = 1``): IGW
      weighs ``s_a(x) = prediction_a(x) + c * w_a(x)``, ``w_a(x) = sqrt(z' A_a^-1 z)`` LinUCB's
      width of the linear base's coded row z (``A_a`` from the action's window rows at the
      refit and every row it learns since, :mod:`~online.policies.ridge`), with ``c = optimism
      + optimism_explained * R``. ``R`` is the share of the rewards' variance, beyond each
      action's mean, that the models explained out of sample at the last refit
      (:func:`~online.policies.refit.explained_share`: each event as its models predicted it
      before learning it, against the running mean of the action's rewards; in [0, 1]). The
      bonus shrinks per action and per context as events come, like LinUCB's (Li et al. 2010)
      and RegCB-opt's upper bounds (Foster et al. 2018); the probabilities stay exact (IGW of
      the optimistic scores).

      Why weighed by ``R``: a fixed bonus (``optimism`` 0.5, the largest standard deviation of
      a reward in [0, 1], the unit the width is in) gained where the context says which action
      pays (Letter at 10k, 24 seeds: 0.386 -> 0.444; vowel +0.044) and lost where the actions'
      means are all there is to learn (a MOOC enrolment's course, 31 actions, the stream most
      like ad traffic: -10 % over the last 10k of 30k, seeds 0-1; Adult -0.02 at 10k with an
      older oracle). There the width measures uncertainty about noise: exploring a context
      teaches nothing that the action's mean does not, and the bonus outweighs the small gaps
      between actions. What tells the two kinds apart is not the rewards' noise (tried: per
      action it took the bonus from the actions that looked bad, pooled it kept a quarter of
      Letter's gain and most of MOOC's loss) but how much the context explains: ``R`` is 0.16
      after 1,000 Letter events, 0.42 after 4,000, 0.50-0.53 from 8,000 on; on the MOOC stream
      it stays 0 (at most 0.002 over 30k events: the trees predict worse than the means there,
      the linear base within +-0.005 of them).
      ``optimism_explained`` 1 makes the bonus's weight ``R`` itself, at most the width (no
      value was tuned: 1 is the first tried). Against no bonus, the same seeds: Letter at 10k
      0.386 -> 0.428 (24 seeds, higher on all 24; LinUCB 0.409); the MOOC stream +1 % over
      the last 10k of 30k (seeds 0-7, 6 of 8 higher); Adult at 10k 0.2568 -> 0.2564 (seeds
      0-7); Shuttle even; the six held-out streams at 10k / 30k / last 10k, mean of seeds 0-1:
      vowel 0.725 / 0.864 / 0.944 -> 0.736 / 0.866 / 0.942, vehicle 0.834 / 0.909 / 0.953 ->
      0.836 / 0.910 / 0.952, waveform-40 0.817 / 0.886 / 0.930 -> 0.815 / 0.884 / 0.930,
      splice 0.923 / 0.956 / 0.975 -> 0.921 / 0.955 / 0.975, german-numeric 0.873 / 0.916 /
      0.942 -> 0.874 / 0.918 / 0.944, credit-a 0.883 / 0.926 / 0.955 -> 0.881 / 0.924 / 0.952
      (bench/policies/README.md, "Optimism where the context explains the rewards"). The base
      keeps ``A_a^-1`` per action for the widths (float32; only its diagonal when the actions
      times the coded columns squared pass 2^20 floats: 4 MB); the bonus reads z's non-zero
      entries (nnz^2 per candidate). ``optimism_explained=0`` and ``optimism=0``: no bonus, the
      policy before (a state written then loads with ``optimism_explained`` 1 and no bonus
      until its next refit estimates ``R``).
    - *One regressor per action* (not one model with the action as a categorical feature, the
      issue's prototype): adding or removing an action stays local, and each action's trees
      spend no split on separating actions.
    - *LightGBM, 100 trees, learning rate 0.1, 63 leaves, 5 events per leaf*: 25-30 trees
      with a larger learning rate (0.2-0.3) lost 0.02-0.04 on every stream; 63 leaves rather
      than 31 gained 0.013 on waveform-40 at 100k steps and 0.01 on vehicle, was equal on splice
      and lost 0.01 on vowel (990 rows): kept for the long streams, whose full window holds
      more events per action; 20 events per leaf learned slower
      early (vowel 0.63 vs 0.70 at 10k steps), 2 was no better than 5.
    - *A linear base under the trees* (``linear_l2``: 10, then as chosen below): prediction(x)
      = ridge_a(x) + trees_a(x), the ridge fitted on action a's window events at each refit
      (closed form, a pure function of the window like the trees: nothing to downdate as events
      leave it),
      numbers as numbers (missing = 0), categories one-hot, the bias unpenalised; LightGBM's
      ``init_score`` is the ridge's prediction, so the trees fit the residuals. Mean of seeds 0
      and 1, 30k steps, reward at 10k / 30k / last 10k, trees alone -> with the base: vowel
      0.680 / 0.829 / 0.920 -> 0.675 / 0.841 / 0.942, vehicle 0.834 / 0.906 / 0.948 -> 0.832 /
      0.908 / 0.951, waveform-40 0.805 / 0.887 / 0.940 -> 0.815 / 0.887 / 0.934, splice
      0.904 / 0.947 / 0.972 -> 0.915 / 0.954 / 0.976: small gains on average (+0.004 / +0.005
      / +0.006), not everywhere. The penalty is on the raw columns (as LinUCB's; a rare 0/1
      variable is shrunk more): on standardised columns the base lost 0.02-0.07 at 1k steps on
      every stream (seed 0). ``linear_l2`` 1 / 10 / 100 (mean over the four streams at 10k):
      0.808 / 0.809 / 0.816, at 1k steps 0.517 / 0.560 / 0.563, over the last 10k 0.951 /
      0.951 / 0.945: 10 keeps the late reward of 1 and most of the early reward of 100.
      ``linear_l2=None`` is the trees alone (what a version-1 state was). On the issue's
      streams (measured after the choice): Letter gains (10k: 0.325 -> 0.357, 3 seeds), Adult
      loses (10k 0.215 -> 0.206, 200k 0.298 -> 0.293): see bench/policies/README.md. The base
      does not buy fewer trees (seed 0, vowel / waveform-40, 10k / last 10k: 100 trees 0.661 /
      0.942, 0.817 / 0.935; 50 trees with learning rate 0.2 0.670 / 0.940, 0.813 / 0.920; 30
      with 0.3 0.660 / 0.928, vowel only), nor a larger leaf penalty (``l2`` 10: vowel 0.700
      / 0.948, waveform-40 0.815 / 0.922). Refit cost: the ridge adds ~0.3 CPU s to a ~4 s
      refit of a full Letter window; the decision ~3 us (26 actions, 77 coded columns).
    - *The linear base learns every event between refits*, on what the action's weighed trees
      leave of the reward (``reward - b_a trees_a(x)``: backfitting, so the base and the trees
      do not both count the same signal), by recursive least squares from the refit's ridge
      (exact: the ridge on the refit's rows plus those since, :meth:`RidgeBase.update`; ~5 us
      an event; a row with a number past twice 2^20 times its column's scale waits for the
      next refit, which scales the column for it). The events a refit running off the
      caller's path did not see are added to its base when it is swapped in, so the service's
      bases are what inline refits give. An
      action new since the last refit (a campaign added, a request's article of the day) gets
      its base at its first event (:meth:`RidgeBase.learn_first`) and is no longer unseen from
      then on: before, it stayed unseen, played as if tied with the best, until the next
      refit, which with a full window is 25,000 events away, so requests that offer only the
      day's new articles were played uniformly all day (``bench/policies/offered.py``). An
      action that was in the inventory at the last refit without events keeps that grace until
      the next one, as before: at the stream's start, when refits come every 25 % more events,
      it lasts a few events, and ending it at the first event cost Letter 0.017 at 10k (11
      seeds, 7 down, not significant). Why: the
      trees wait for a refit, the part of the reward a linear model can carry need not; early,
      when a refit comes every 25 % more events, that is most of what is learned. Held-out
      streams, seeds 0-1, reward at 1k / 10k / 30k / last 10k of 30k, before -> after: vowel
      0.237 / 0.702 / 0.854 / 0.942 -> 0.283 / 0.723 / 0.862 / 0.944, vehicle 0.559 / 0.835 /
      0.908 / 0.951 -> 0.580 / 0.838 / 0.909 / 0.951, waveform-40 0.685 / 0.812 / 0.886 / 0.935
      -> 0.687 / 0.813 / 0.888 / 0.936, splice 0.748 / 0.913 / 0.954 / 0.977 -> 0.771 / 0.917
      / 0.955 / 0.977, german-numeric 0.708 / 0.873 / 0.918 / 0.944 -> 0.706 / 0.872 / 0.916 /
      0.943, credit-a 0.795 / 0.870 / 0.918 / 0.952 -> 0.794 / 0.873 / 0.921 / 0.953, the MOOC
      stream 0.043 / 0.054 / 0.057 / 0.061 -> 0.053 / 0.056 / 0.063 / 0.070. Refitting the
      base on the raw rewards instead (no backfitting) counted the signal twice: Letter at 10k,
      seed 0, 0.301 (0.356 without updates, 0.400 with them).
    - *Categories and keys that come and go* (twentieth session): a campaign sent as a value
      (``{"campaign": "summer-sale"}``) or as a key (``{"camp.summer-sale": 1}``) runs for a
      while and ends. A fit codes each category column's 64 values seen last in the window
      (its first 64 before), and a number column or a value that the fit does not code gets
      its coded column in the base at its first event (:meth:`RidgeBase.extend`, exact), so a
      campaign that starts after a refit is learned at once rather than at the next refit.
      A value newer than the trees gets no correction from them until the next refit
      (:meth:`_new_values`). ``bench/policies/late_keys.py`` (20 campaigns live, a new one
      every 200 events, 10 actions, 60k events, seeds 0-2), mean reward over events 30k-60k:
      the campaign as a value 0.25 -> 0.84-0.85 (LinUCB 0.81, VW squarecb 0.72-0.81); as a
      key 0.34-0.36 -> 0.80-0.81. At ``max_columns``, a refit frees the columns of keys absent
      from its whole window for new keys (:meth:`_free_columns`). Dense inputs and streams
      whose values do not change decide as before (Letter, usps and the MOOC stream: the
      same rewards).
    - *The base's penalty chosen by the stream's own errors* (``linear_l2 = PENALTIES``): at
      each refit, every penalty of a grid (0.1 to 1,000 in steps of sqrt(10)) is scored by the
      leave-one-out errors of the actions' ridges on their window events, in closed form from
      one eigendecomposition per action (:mod:`~online.policies.ridge_loo`; on a 100k-event
      window of 76 columns the ridge takes 0.20 CPU s, 0.32 when every action scores). Only
      the actions whose trees weigh under one half score: there
      the base is most of the prediction, and its own held-out error is the prediction's;
      where the trees carry the prediction the base is their starting point, and a penalty
      that fits the base alone better can leave them more to do. The penalty in use (10 at
      first, the value the held-out streams chose above) is kept unless another's errors are
      lower by more than two standard errors of the paired differences
      (:func:`~online.policies.ridge_loo.choose_penalty`). Why: how much to shrink depends on
      how noisy the rewards are, which differs by stream and only its events say (Adult at
      10k, 3 seeds, a fixed penalty of 10 / 30 / 100: 0.245 / 0.253 / 0.260; Letter 0.411 /
      0.377 / 0.372). Tried first: every action scoring, the plain argmin: vowel at 1k steps
      0.240 against 0.283 with 10 (the first fits, on a few events per action, followed their
      noise); with the test, Adult at 10k gained most (8 seeds: 0.259 against 0.239) but Letter
      lost (8 seeds: 0.385 against 0.405; 1M, 3 seeds: 0.836 against 0.841), where the trees
      carry the signal and a larger penalty fitted the base alone better. Without keeping the
      penalty in use, a stream that no linear model predicts flipped between two penalties
      whose errors differed by little, and its trees' weights swung with them. Held-out
      streams, seeds 0-1, reward at 1k / 10k / 30k / last 10k of 30k, penalty 10 -> chosen:
      vowel 0.283 / 0.725 / 0.864 / 0.943 -> the same (its trees weigh over one half: 10 stays),
      vehicle 0.579 / 0.835 / 0.910 / 0.951 -> 0.593 / 0.833 / 0.909 / 0.953, waveform-40 0.686 /
      0.811 / 0.885 / 0.934 -> 0.698 / 0.817 / 0.886 / 0.930, splice 0.771 / 0.918 / 0.955 / 0.976
      -> 0.788 / 0.923 / 0.956 / 0.975, german-numeric 0.710 / 0.871 / 0.917 / 0.943 -> 0.707 /
      0.872 / 0.916 / 0.942, credit-a 0.792 / 0.871 / 0.921 / 0.952 -> 0.804 / 0.884 / 0.923 /
      0.950, the MOOC stream 0.053 / 0.059 / 0.066 / 0.072 -> 0.051 / 0.056 / 0.066 / 0.073 (mean
      +0.007 / +0.003 / +0.000 / -0.001). Unlike the choices above, this one was made looking
      at the issue's streams too (Adult's gap started it, Letter's loss led to the mask): at
      10k, 8 seeds, Adult 0.239 -> 0.257 (VW squarecb 0.246), Letter 0.405 -> 0.399 (LinUCB
      0.407); Letter at 1M (3 seeds) 0.841 -> 0.839.
    - *A sliding window of 100,000 events* (memory and refit time bounded whatever the stream's
      length; the policy follows traffic that drifts): a 30,000-event window lost 0.044 on
      waveform-40 over the last 10k of 100k steps. gamma stops growing at the window size
      because the oracle's error stops shrinking there.
    - *Watching each action's held-out errors for a change* (``drift_delta``, 0.01): traffic
      is not stationary, and a window of 100,000 events forgets a change only as it slides.
      Each learned event's error (the reward minus what the models in use predicted for the
      action played, the held-out prediction the trees' weights already use) is tested for a
      mean other than zero over the action's last 16 to 512 errors, with Azuma-Hoeffding's bound
      and an anytime union bound (false alarms over the whole stream <= ``drift_delta``;
      :mod:`~online.policies.drift`). When the test rejects, the action's events before the
      change point (the least-squares split of its errors) are left out of every later fit and a
      refit is due at once. The other actions are then tested at that change point, one
      hypothesis each (``ResidualMonitor.shifted_since``): refits mix an action's old events
      with its new ones, so that an action whose change was not found first would be found
      late or never (the service's test, 5 actions, found 4 of 5 in some runs without this).
      gamma's n becomes the events the models are fitted on, so the policy explores again as
      much as its smaller data warrants, and the refit schedule starts again from the events
      kept (below). The old models' predictions of the changed actions' new rewards (all
      wrong) weigh neither the trees nor the share ``R`` of the bonus
      (``ActionChanges.stale``): with them ``R`` stayed ~0 for ~1,300 events after every
      action of the five-action problem changed, the bonus with it; without, 0.94 from ~500
      on. Letter with every label's action moved at step 30,000
      (``bench/policies/drift.py``, 3 seeds): over the 2k-5k / 10k-30k steps after the
      change 0.325 / 0.693 with the test, 0.009 / 0.026 with the window alone (LinUCB 0.300 /
      0.590 with its own test, 0.015 / 0.036 without; VW squarecb 0.027 / 0.069). On
      stationary streams the test found no change (Letter, Adult, Shuttle at 10k, seeds 0-2;
      Letter and Shuttle at 100k, Adult at 200k, seed 0; the seven held-out streams at 30k:
      decisions identical to those without it): there the mean held-out error of an action
      over a refit's period stayed within ~0.05 of zero, against a smallest threshold of ~0.2
      of the rewards' range. Smaller changes are left to the window. Figures:
      bench/policies/README.md.
    - *Refit schedule*: refit when the events learned since the last fit reach
      ``refit_fraction`` (0.25) of those the next fit would take: the last fit's events plus
      the new ones, at most the window (and at least ``refit_min``): geometric growth while
      the window fills (many cheap fits early, when each event matters most), then every
      25,000 events. Refitting twice as often (0.1) did not earn more. The basis is what the
      fits take, not what the window holds, since the twenty-ninth session: after a change
      (``drift_delta``) the fits leave the changed actions' old events out, and the schedule
      starts again from the events kept, as a new policy's does. Counted from the window, the
      refit after a change fitted on ~1,500 events served until 8,000 more had come (a
      quarter of a 32k window): Letter with every label moved earned 0.142 over events
      5,000-10,000 after the change, 0.349 with this schedule (0.399 with the old predictions
      left out too: bench/policies/README.md, "After a change"). On a stream without a change
      the two counts are the same and so are the decisions.
      Warm-starting (``init_model``) was not used: it adds trees at every refit, so the
      decision's cost would grow without bound. *An action whose window events are the same
      as at the last fit keeps its trees* (``RefitJob._kept``: same events, same penalty of
      the linear base; the trees then are a fit on the same data with the bins LightGBM drew
      from the window of their time, not bit for bit a new booster's). On a stream whose
      actions all keep playing this saves nothing once the window slides (every action's
      events change), but where actions come with their requests (a Personalizer app's
      articles of the day) most of the window's actions had no event since the last refit:
      ``bench/policies/offered.py``, 60k events, 110.9 -> 44.4 CPU s, reward 0.0555 both. A
      refit of 26 actions on a full 100k window takes ~2.4 s of one core (Letter), off the
      serving path in the service (its trainer runs refits in a thread of lower CPU priority
      than its learning). Inline (``auto_refit``), refits are most of the first events'
      cost: 13.0 of the 16.8 CPU s of Letter's first 20k events (21 refits; ~190 us per event
      for the rest). An
      action's boosting stops at its first round whose tree has no split (``refit.boost``: the
      same trees, fewer calls; on those refits 23,306 of 53,600 rounds, ~4 % less CPU), and an
      action with too few events to split gets no booster at all (its model would be one leaf
      of 0): with 200 actions live and one replaced every 20 events, -27 % refit CPU.
    - *Removed actions get no trees*: a refit fits the trees of the inventory's actions only.
      A removed action's events stay in the window (its linear base is still fitted, cheaply),
      its late events (rewards of decisions made before its removal) are learned by its
      linear base without putting it back (with no trees in use, they are neither held out
      for the trees' weights nor tested for a change), and when it comes back a refit is due
      at once, which gives it trees again. Before,
      every action with events in the window was refitted, so an inventory that changes (a
      campaign ends, a new one starts) paid for the trees of every action of the last 100k
      events and shipped them in every snapshot, though no decision reads them: with 20
      actions live and one replaced every 100 events (``bench/policies/churn.py``, 30k
      events), refits 25.5 -> 5.2 CPU s, the served model 22,226 -> 1,604 trees and 9.8 ->
      0.4 MB, the same decisions. Once the window holds no event of a removed action (or of
      one that came with events and was never added), the action is forgotten
      (``Policy._forget_stale``: its per-action arrays are freed and the indices renumbered,
      the decisions unchanged): without it, every action ever seen kept its slot in memory
      and in every state the trainer writes (with ``auto``'s two candidates, 67 kB per action
      on 8 features, 670 MB after 10,000 actions).
    - *Actions no request offers any more get no trees* (twenty-third session). A request that
      names its actions (a Personalizer app's articles of the day) brings actions that no one
      adds or removes, and an article lives a day: a 100k-event window held the events of
      ~1,500 articles and each refit boosted the ~375 played since the last one, though the
      requests offered 30. An action whose offers have stopped (the events' fifth item, the
      actions each decision was drawn among, :class:`~online.policies.offers.OfferTimes`:
      named at least twice, and not for ten times its mean gap between offers, nor drawn
      among the inventory since) is fitted at a refit as a removed one is: its linear base,
      no trees. Offered again, it waits for the next refit for its trees (its linear base
      learns its events meanwhile; a removed action added back still makes a refit due at
      once). Offers, not plays: how often an action is played depends on the policy (a poor
      one is played at the exploration's rate), how often it is offered does not. Events that
      name no actions (drawn among the inventory) leave every action's trees. The same
      decisions, less CPU: the article stream (``bench/policies/articles.py``, 40k events,
      seed 0) 12.0 -> 7.0 CPU s; ``auto`` on ``bench/policies/offered.py --offered-known
      --popularity 0.04`` (60k events) 48.1 -> 17.9 CPU s; through the trainer at 2,000
      rewards/s, bench/http/README.md.
    - *Off-policy*: each regressor is fitted by direct regression (squared loss, unweighted) on
      the events where its action was played, whichever policy logged them: E[r | x, a] does not
      depend on the logging policy, which only changes where contexts are sampled, and the trees
      fit each region of the context space from the events there; importance weights 1 / p
      would only add variance to the fits. What off-policy learning needs is that the logging
      policy played every action with probability > 0 where it matters (its exploration floor).
      The logged propensities are kept in the window (and the state) for evaluation.

    Costs, bounded whatever the stream's length (Letter, 26 actions, figures in
    bench/policies/README.md): memory and state ~ the window (100k events x columns x 4 bytes +
    20 bytes per event: 37 MB with 76 columns; the linear base's ``A^-1``, actions x coded
    columns^2 x 8 bytes, 1.2 MB more, in the trainer's state only; the widths' ``A^-1`` in
    float32, one triangle laid out pair by pair (``widths``), 0.3 MB, in the serving copy too:
    5.4 MB after 100k events, the state keeping the matrices whole); a refit ~2.4 CPU s on a
    full window (keys sent only when set included: ``refit.presence_as_zero``); learning an
    event, the base's update ~5 us more and its widths' ~6 us; a decision p50 ~40-42 us (~3-4
    us of it the bonus's widths; one compiled call, ``trees_decide``), p99 ~78-90 us on a quiet
    VM (twenty-eighth session; ~75-120 us before),
    ~125-160 us on a loaded one, 2-3x that on another whose caches are slower (26 x
    100 trees of 63 leaves scored by QuickScorer, ~20 ns per tree at p50; 100 trees per action
    cost that, fewer lost reward on every held-out stream), faster than VW squarecb's decision
    on the same machine.

    Rewards are assumed in [0, 1] (gamma is in the units of 1 / reward).

    Deciding evaluates the candidates' ensembles from flat arrays with a compiled kernel
    (``tree_arrays``): no Python per tree. Refits run off the caller's path through
    :meth:`refit_due`, :meth:`start_refit` (a self-contained callable, safe in a thread) and
    :meth:`finish_refit`; with ``auto_refit=True`` (the default) ``learn_one`` runs them inline.

    Parameters
    ----------
    gamma_scale
        The constant of SquareCB's gamma.
    window
        Number of most recent events the oracle is fitted on.
    refit_fraction, refit_min
        Refit schedule (see above).
    n_trees, learning_rate, num_leaves, min_data_in_leaf, l2
        Each action's LightGBM regressor.
    linear_l2
        The ridge penalty of each action's linear base: a number, or a grid of numbers from
        which each refit takes the one with the least leave-one-out error (the default,
        ``PENALTIES``: 0.1 to 1,000 in steps of sqrt(10)); None: no linear base, trees alone.
    optimism, optimism_explained
        The weight of the linear base's width in the scores IGW weighs is ``optimism +
        optimism_explained * explained`` (0: the predictions; see above).
    weigh_trees
        Weigh each action's trees by their held-out fit (False: weight 1, the trees as fitted).
    drift_delta
        The chance of a false alarm, over the whole stream, of the test for a change in an
        action's rewards (see above); None: no test, the window alone forgets.
    auto_refit
        Refit inside ``learn_one`` when due (a service drives the refit hooks instead).
    max_columns
        The most feature columns coded (a number or a category's codes each take one; a
        category's values do not add columns). Features first seen after that are left out,
        as an unknown key is, until a refit finds a column's feature absent from the whole
        window: that column is then freed for the next new feature of its kind (the policy
        keeps learning the keys of new campaigns). What this bounds: the window's memory
        (window x columns x 4 bytes: 410 MB at 1,024 columns and 100k events) and each refit's
        linear base (a decomposition cubic in the columns, per action). Without a bound, a
        stream that sends a new key with every event (an id as a key, ``{"user.123": 1}``)
        took 60 CPU s and 1.9 GB for its first 5,000 events.
    seed
        Seeds the decisions' random draws and LightGBM.

    Examples
    --------
    >>> policy = TreeEnsemblePolicy(seed=1)
    >>> for a in ["a1", "a2", "a3"]:
    ...     policy.add_action(a)
    >>> import random
    >>> rng = random.Random(0)
    >>> total = 0.0
    >>> for t in range(2000):
    ...     x = {"favorite": rng.choice(["a1", "a2", "a3"]), "hour": rng.random()}
    ...     d = policy.decide(x)
    ...     reward = 1.0 if d.action == x["favorite"] else 0.0
    ...     policy.learn_one(x, d.action, reward, d.probability)
    ...     total += reward if t >= 1000 else 0.0
    >>> total / 1000 > 0.9
    True
    >>> d = policy.decide({"favorite": "a2", "hour": 0.5})
    >>> d.action, round(sum(d.probabilities.values()), 12)
    ('a2', 1.0)

    References
    ----------
    Foster, D. & Rakhlin, A. (2020). Beyond UCB: optimal and efficient contextual bandits with
    regression oracles. ICML. Foster, D., Agarwal, A., Dudik, M., Luo, H. & Schapire, R.
    (2018). Practical contextual bandits with regression oracles. ICML. Li, L., Chu, W.,
    Langford, J. & Schapire, R. (2010). A contextual-bandit approach to personalized news
    article recommendation. WWW. Bietti, A., Agarwal, A. & Langford, J. (2021). A contextual bandit
    bake-off. JMLR 22.
    """

    FORMAT = "grove.trees"
    VERSION = 2  # 2: the linear base (a version-1 state loads with zero linear weights)

    def __init__(self, gamma_scale: float = 4.0, window: int = 100_000,
                 refit_fraction: float = 0.25, refit_min: int = 32, n_trees: int = 100,
                 learning_rate: float = 0.1, num_leaves: int = 63, min_data_in_leaf: int = 5,
                 l2: float = 1.0, linear_l2: float | Sequence[float] | None = PENALTIES,
                 optimism: float = 0.0, optimism_explained: float = 1.0,
                 weigh_trees: bool = True, drift_delta: float | None = 0.01,
                 auto_refit: bool = True, max_columns: int = MAX_COLUMNS,
                 seed: int | None = None):
        for name, value in (("gamma_scale", gamma_scale), ("refit_fraction", refit_fraction),
                            ("learning_rate", learning_rate)):
            if not value > 0:
                raise ValueError(f"{name} must be > 0, got {value!r}")
        for name, value in (("l2", l2), ("optimism", optimism),
                            ("optimism_explained", optimism_explained)):
            if not value >= 0:
                raise ValueError(f"{name} must be >= 0, got {value!r}")
        if linear_l2 is not None:
            grid = [linear_l2] if np.isscalar(linear_l2) else list(linear_l2)
            if not grid or not all(isinstance(v, Real) and not isinstance(v, bool) and v > 0
                                   for v in grid):
                raise ValueError("linear_l2 must be a number > 0, a non-empty list of them, or "
                                 f"None, got {linear_l2!r}")
            linear_l2 = grid[0] if np.isscalar(linear_l2) else tuple(grid)
        if drift_delta is not None and not 0.0 < drift_delta < 1.0:
            raise ValueError(f"drift_delta must be in (0, 1) or None, got {drift_delta!r}")
        for name, value, low in (("window", window, 1), ("refit_min", refit_min, 1),
                                 ("max_columns", max_columns, 1),
                                 ("n_trees", n_trees, 1), ("num_leaves", num_leaves, 2),
                                 ("min_data_in_leaf", min_data_in_leaf, 1)):
            if int(value) != value or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        self.gamma_scale = gamma_scale
        self.window = window
        self.refit_fraction = refit_fraction
        self.refit_min = refit_min
        self.n_trees = n_trees
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.min_data_in_leaf = min_data_in_leaf
        self.l2 = l2
        self.linear_l2 = linear_l2
        self.optimism = optimism
        self.optimism_explained = optimism_explained
        self.weigh_trees = weigh_trees
        self.drift_delta = drift_delta
        self.auto_refit = auto_refit
        self.max_columns = int(max_columns)
        super().__init__(seed=seed)
        self._window = EventWindow(window)
        self._ensemble = CompiledEnsemble.empty()
        self._linear = RidgeBase.empty()
        self._plays = np.zeros(0, np.int64)  # per action index: plays in the fitted window
        self._fitted = np.zeros(0, np.bool_)  # per action index: trees fitted (in the inventory)
        # per action index: in the inventory at the last refit (None: as its trees say, a state
        # written before it was kept); an action added since, with events, is back (_returned)
        self._fit_inventory: np.ndarray | None = None
        # int64 (n, 3) per action index: the events its trees were fitted on (refit.spans); a
        # refit keeps the trees of an action whose events are the same
        self._spans = np.zeros((0, 3), np.int64)
        # (inventory, fitted, whether an action of that inventory lacks the trees its events
        # warrant): _returned's answer, kept until a refit or a change of inventory
        self._returned_for: tuple | None = None
        self._blend = np.ones(0)  # per action index: the weight of its trees (refit.tree_weights)
        # the share of the rewards' variance the models explained at the last refit
        # (refit.explained_share): the width's weight is optimism + optimism_explained times it
        self._explained = 0.0
        self._fitted_events = 0  # window events the current ensemble was fitted up to
        self._fit_rows = 0  # events the current models were fitted on: sum(plays), gamma's n
        self._refits = 0
        self._drift = ActionChanges.start(drift_delta)
        # _candidate_models' answers by candidate set (a multi-slot rank alternates two)
        self._candidate_cache: dict[bytes, _CandidateModels] = {}
        self._candidate_last: _CandidateModels | None = None  # the one last returned
        self._scored: _ScoredRows | None = None  # the last distribution_rows' trees, reused
        # the last single context's trees (ensemble, vector, action indices, sums): a decide
        # followed by learning its event (river's pull then update) reads its action's sum
        self._last_sums: tuple | None = None
        self._refit_running = False  # a start_refit job's result is not installed yet
        # (code columns, per column a mask over its codes): the codes of the window the trees
        # in use were fitted from; any other is a value they cannot have seen (_new_values)
        self._known_codes: tuple[list[int], list[np.ndarray]] = ([], [])
        # when each action was offered: an action whose offers have stopped gets no trees at
        # a refit (start_refit)
        self._offers = OfferTimes()

    def _new_encoder(self) -> FeatureEncoder:
        # trees split on category codes and route missing values themselves
        return FeatureEncoder(categories="code", missing="nan", max_columns=self.max_columns)

    # -- deciding --------------------------------------------------------------------------

    def _candidate_models(self, known: np.ndarray) -> _CandidateModels:
        """What deciding among ``known`` needs of the fitted models, kept per candidate set
        (at most ``CANDIDATE_SETS``) until the models change or a new action's linear base
        learns its first event (~5 us a decision saved; a multi-slot rank's slots alternate two
        sets, a request's own actions come as a new array each time). Unseen: no event at the
        last fit nor since."""
        cached = self._candidate_last  # (the same array again: the inventory's, no key made)
        if cached is not None and cached.known is known and cached.ensemble is self._ensemble:
            return cached
        key = known.tobytes()
        cached = self._candidate_cache.get(key)
        if cached is not None and cached.ensemble is self._ensemble:
            self._candidate_last = cached
            return cached
        if cached is not None or len(self._candidate_cache) >= CANDIDATE_SETS:
            self._forget_candidates()  # (a refit since: every set is stale)
        e = self._ensemble
        models = np.where(known < e.n_models, known, -1)
        linear = np.where(known < self._linear.n_models, known, -1)
        if e.n_models:
            unseen = (models < 0) | (self._plays[np.maximum(models, 0)] == 0)
            blend = self._blend[np.maximum(models, 0)]
        else:
            unseen, blend = np.ones(len(models), np.bool_), np.zeros(len(models))
        unseen &= ~self._linear.has_events(linear)
        cached = self._candidate_cache[key] = _CandidateModels(known, e, models, unseen, blend,
                                                               linear)
        self._candidate_last = cached
        return cached

    def _forget_candidates(self) -> None:
        self._candidate_cache.clear()
        self._candidate_last = None

    def _predicted(self, trees: np.ndarray, x: np.ndarray, c: _CandidateModels,
                   optimistic: bool) -> np.ndarray:
        """The oracle's prediction of each candidate at ``x`` from its trees' sums ``trees``:
        the trees weighed (weights of 1 without ``weigh_trees``) plus the linear base;
        ``optimistic``: plus the bonus's weight times the linear base's width (what IGW
        weighs; :func:`~online.policies.trees_decide.weighed_scores`)."""
        scores = np.empty(len(trees))
        weighed_scores(x, c.arrays, self._linear.kernel_arrays(),
                       self._bonus() if optimistic else 0.0,
                       np.ascontiguousarray(trees, np.float64), scores)
        return scores

    def _scores(self, x: np.ndarray, known: np.ndarray,
                optimistic: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Predicted reward of each candidate (``optimistic``: the scores the exploration rule
        weighs), and which candidates the oracle has no data for."""
        c = self._candidate_models(known)
        trees = self._ensemble.predict(x, c.models)
        if self._known_codes[0] and self._new_values(x[None])[0]:
            trees[:] = 0.0
        self._last_sums = (self._ensemble, x, known, trees)
        return self._predicted(trees, x, c, optimistic), c.unseen

    def _distribution(self, x: np.ndarray, known: np.ndarray) -> np.ndarray:
        """IGW over the optimistic scores (:meth:`_scores`), in one compiled call."""
        c = self._candidate_models(known)
        sums, probs = np.empty(len(known)), np.empty(len(known))
        new_value = bool(self._known_codes[0]) and bool(self._new_values(x[None])[0])
        candidate_distribution(x, c.arrays, self._ensemble.kernel_arrays,
                               self._linear.kernel_arrays(), self._bonus(),
                               self.gamma(len(known)), new_value, sums, probs)
        self._last_sums = (self._ensemble, x, known, sums)
        return probs

    def scores(self, x: dict, actions=None, excluded=(), optimistic: bool = False) -> dict:
        """The oracle's predicted reward of each candidate action (NaN: no data for it yet);
        ``optimistic``: plus the optimism bonus, the scores the decision's weights come from."""
        xv, _ = self._encoder.encode(x)
        candidates, known = self._candidates(actions, excluded)
        s, unseen = self._scores(xv, known, optimistic)
        return {a: (float("nan") if u else float(v))
                for a, v, u in zip(candidates, s.tolist(), unseen)}

    def distribution_rows(self, xs: list[dict], actions=None) -> tuple[list, np.ndarray]:
        """The inventory's actions (or ``actions``), and for each context of ``xs`` the
        distribution :meth:`decide` would draw from over them (row i: ``xs[i]``; the values of
        :meth:`probabilities`, in that order).

        For an evaluator (``AutoPolicy``) that needs many rows at once: the trees score all
        rows model by model (``CompiledEnsemble.predict_rows``), so one model's trees stay in
        the caches while every row walks them."""
        candidates, known = self._candidates(actions, ())
        X = self._rows(xs)
        c = self._candidate_models(known)
        trees = self._ensemble.predict_rows(X, c.models)
        trees[self._new_values(X)] = 0.0
        self._keep_scored(X, trees, known)
        g = self.gamma(len(known))
        probs = np.empty_like(trees)
        for i in range(len(X)):  # as _distribution, row by row
            scores = self._predicted(trees[i], X[i], c, optimistic=True)
            inverse_gap_weights(scores, c.unseen, g, probs[i])
        return candidates, probs

    def offered_rows(self, xs: list[dict], offers: list[tuple],
                     features: list | None = None) -> list[np.ndarray]:
        """For each context of ``xs``, the distribution :meth:`decide` would draw from over the
        actions its request offered (``offers[i]``, distinct ids): what
        ``probabilities(xs[i], offers[i])`` gives, in that order, number for number.

        For an evaluator of requests that bring their own actions (``AutoPolicy``): the rows
        are coded once, each model's trees are walked by the rows that offered its action
        together, and the rows' decisions differ only in the candidates read. (``features``,
        the actions' own, are not read: the trees learn per action id.)"""
        if not xs:
            return []
        known, columns = self._offered_candidates(offers)
        X = self._rows(xs)
        c = self._candidate_models(known)
        sums = np.full((len(xs), len(known)), np.nan)  # the trees' sum of each row's candidates
        rows = np.repeat(np.arange(len(xs)), [len(cols) for cols in columns])
        flat = np.concatenate(columns)
        order = np.argsort(flat, kind="stable")
        bounds = np.flatnonzero(np.diff(flat[order], prepend=-1, append=len(known)))
        for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            j, mine = int(flat[order[lo]]), rows[order[lo:hi]]
            sums[mine, j] = self._ensemble.predict_rows(X[mine], c.models[j:j + 1])[:, 0]
        sums[self._new_values(X)] = 0.0
        self._keep_scored(X, sums, known)
        out = []
        for i, cols in enumerate(columns):  # as _distribution, over the row's candidates
            mine = _CandidateModels(known[cols], c.ensemble, c.models[cols], c.unseen[cols],
                                    c.blend[cols], c.linear[cols])
            probs = np.empty(len(cols))
            inverse_gap_weights(self._predicted(sums[i, cols], X[i], mine, optimistic=True),
                                mine.unseen, self.gamma(len(cols)), probs)
            out.append(probs)
        return out

    def _rows(self, xs: list[dict]) -> np.ndarray:
        """The encoded contexts, one row each."""
        return np.vstack([self._encoder.encode(x)[0] for x in xs]) if xs else \
            np.zeros((0, self._encoder.n_columns))

    def _keep_scored(self, X: np.ndarray, sums: np.ndarray, known: np.ndarray) -> None:
        """Keep the trees' sums of rows ``X`` (column j: the candidate ``known[j]``) for
        learning to read (:meth:`_tree_sum`)."""
        column = np.full(int(known.max(initial=-1)) + 1, -1, np.int64)
        mine = known >= 0  # (-1: an action without models, nothing to keep)
        column[known[mine]] = np.flatnonzero(mine)
        self._scored = _ScoredRows(self._ensemble, {row.tobytes(): i for i, row in enumerate(X)},
                                   sums, column)

    def gamma(self, n_candidates: int) -> float:
        """SquareCB's gamma for a decision among ``n_candidates`` actions now."""
        return igw_gamma(self.gamma_scale, n_candidates, self._fit_rows)

    # -- learning --------------------------------------------------------------------------

    def learn_many(self, events) -> int:
        """:meth:`Policy.learn_many`; then each learned event's fifth item, the actions its
        decision was drawn among, is counted (an action whose offers have stopped gets no
        trees at a refit: see "Actions no request offers any more" in the class doc). Counted
        after learning, so that the batch's new actions have their index; a refit inside the
        batch reads the offers up to the batch before it."""
        events = events if isinstance(events, list) else list(events)
        start = self._n_learned
        try:
            return super().learn_many(events)
        finally:
            learned = events[: self._n_learned - start]
            self._offers.note((e[4] if len(e) > 4 else None for e in learned), start,
                              self._index)

    def _refits_inline(self) -> bool:
        return self.auto_refit and not self._refits_deferred

    def _learn(self, x: np.ndarray, k: int, reward: float, probability: float) -> None:
        held_out = self._predict_then_learn_linear(x, k, reward)
        event = self._window.n_events
        # kept for the next refits' trees' weights and share R, unless the models that made it
        # predate the action's change (ActionChanges.predates)
        kept = self._holds_out() and not (
            self._drift is not None and self._drift.predates(k, self._fitted_events))
        self._window.append(x, k, reward, probability, held_out if kept else (np.nan, np.nan))
        if self._drift is not None:
            self._watch(k, reward, held_out, event)
        if self.auto_refit and not self._refits_deferred and self.refit_due():
            self.finish_refit(self.start_refit()())

    def _bonus(self) -> float:
        """The width's weight in the scores IGW weighs now. While it is 0 (until the next refit:
        the share changes only there) the widths are neither read nor updated: the refit makes
        them anew from the window, and the events learned while it ran are replayed into them
        (:meth:`finish_refit`) with the share it found."""
        return self.optimism + self.optimism_explained * self._explained

    def _holds_out(self) -> bool:
        """Whether the window keeps each event's held-out predictions (for the trees' weights,
        or the share of the rewards the models explain)."""
        return self.weigh_trees or self.optimism_explained > 0

    def _widths(self) -> bool:
        """Whether the scores may take the linear base's widths (its ``A^-1`` kept per action)."""
        return self.optimism > 0 or self.optimism_explained > 0

    def _predict_then_learn_linear(self, x: np.ndarray, k: int,
                                   reward: float) -> tuple[float, float]:
        """What action ``k``'s current models (linear base, trees) predict at ``x`` before the
        event is learned (NaN without models, without trees for a removed action, or when
        neither the weights nor the base read it); then its linear base learns the event on
        what its weighed trees leave of the reward. An action new since the last fit has no
        trees: its linear base learns the whole reward, from its first event on (one in the
        inventory then, without events, waits for the next fit: see the class doc). A number
        column or a category's value the base does not code yet gets its coded column first
        (:meth:`RidgeBase.extend`): a campaign that starts after a fit is learned from its
        first event, not from the next fit on."""
        linear = self._linear
        linear.extend(x, self._encoder.column_kinds if len(x) > linear.n_read else ())
        widths = self._bonus() > 0  # (the widths' A^-1 takes the row only if read before a refit)
        if not (k < self._ensemble.n_models and self._plays[k] > 0):
            if k >= self._ensemble.n_models and self._linear.learn_first(x, k, reward):
                self._forget_candidates()  # seen from now on
            elif k < self._linear.n_models:
                self._linear.update(x, k, reward, widths)  # (nothing for a model without events)
            return np.nan, np.nan
        if not (self._holds_out() or self._linear.inverse.shape[1]):
            return np.nan, np.nan
        if not self._fitted[k]:  # out of the inventory at the last refit: no trees in use, so
            self._linear.update(x, k, reward, widths)  # nothing to hold out (nor to test for a
            # change)
            return np.nan, np.nan
        model = np.array([k])
        held_out = (self._linear.predict(x, model)[0], self._tree_sum(x, k))
        self._linear.update(x, k, reward - self._blend[k] * held_out[1], widths)
        return held_out

    def _tree_sum(self, x: np.ndarray, k: int) -> float:
        """Action ``k``'s trees summed at ``x``: read from the last decision's scores when it
        scored ``x`` with these trees (a decide, then learning its event: ~10 us of ~100 per
        event in process; the service's trainer never decides), or from the last
        :meth:`distribution_rows` that did (an evaluator scores a batch, then the policy learns
        it: ``AutoPolicy``), else computed. The same number every way (QuickScorer and the
        walk find the same leaves, summed in the same order)."""
        last = self._last_sums
        if last is not None and last[0] is self._ensemble and last[1].tobytes() == x.tobytes():
            at = np.flatnonzero(last[2] == k)
            if len(at):
                return float(last[3][at[0]])
        scored = self._scored
        if scored is not None and scored.ensemble is self._ensemble and k < len(scored.column) \
                and scored.column[k] >= 0:
            i = scored.rows.get(x.tobytes())
            if i is not None and not np.isnan(scored.sums[i, scored.column[k]]):
                return float(scored.sums[i, scored.column[k]])
        if self._known_codes[0] and self._new_values(x[None])[0]:
            return 0.0
        return float(self._ensemble.predict(x, np.array([k]))[0])

    def _new_values(self, X: np.ndarray) -> np.ndarray:
        """Per row of ``X`` (encoded contexts): whether a category value in it is newer than
        the trees in use, which then add nothing to its predictions.

        A tree routes a value its fit never saw down the side of its category splits that
        holds the values not listed, and adds what it learned of those other values: on a
        stream of campaigns sent as a value (``bench/policies/late_keys.py --as-value``) that
        correction, made of old campaigns' residuals, was what every new campaign got until
        the next refit, and the trees' weight (estimated over all events) did not shrink it.
        The linear base codes a new value at its first event (``RidgeBase.extend``): what the
        stream has shown of the value so far is there. A value is new when its code is not one
        of the window the trees were fitted from (trees kept from an earlier fit,
        ``refit._kept``, were fitted on events of that window too). Until the thirtieth
        session codes were never given twice and "new" was a code at or past its column's
        count when the window was copied; forgotten codes are now given again
        (:meth:`FeatureEncoder.forget_codes`), so a new value may have a small code.
        NaN (missing) is not new."""
        columns, masks = self._known_codes
        if len(X) == 1:  # (a decision: a few scalar reads, not a dozen array operations)
            row = X[0]
            for j, mask in zip(columns, masks):
                v = row[j]
                if v == v and (v >= len(mask) or not mask[int(v)]):
                    return np.ones(1, np.bool_)
            return np.zeros(1, np.bool_)
        new = np.zeros(len(X), np.bool_)
        for j, mask in zip(columns, masks):
            codes = X[:, j]
            given = ~np.isnan(codes)
            at = codes[given].astype(np.int64)
            inside = at < len(mask)
            known = np.zeros(len(at), np.bool_)
            known[inside] = mask[at[inside]]
            new[given] |= ~known
        return new

    def _watch(self, k: int, reward: float, held_out: tuple[float, float], event: int) -> None:
        """Test action ``k``'s held-out error for a change (:mod:`~online.policies.drift`); on
        one, its events before the new regime are left out of the fits from now on, and a
        refit is due at once."""
        d = self._drift
        d.grow(k + 1)
        # no model for the action, or the models in use predate its last change: not tested
        if np.isnan(held_out[0]) or d.predates(k, self._fitted_events):
            d.monitor.widen(reward)
            return
        start = d.monitor.watch(k, reward, held_out[0] + self._blend[k] * held_out[1], event)
        if start is None:
            return
        watched = np.flatnonzero(d.cut_at <= self._fitted_events).tolist()
        changed = d.monitor.changed_with(k, start, watched)
        d.since[changed], d.cut_at[changed] = start, event + 1
        d.changes += len(changed)
        d.refit_now = True

    @property
    def events_since_refit(self) -> int:
        """Events learned since the trees were last refitted: the linear base has learned
        them, the trees will at the next refit (a serving copy counts up to its snapshot)."""
        return max(0, self._n_learned - self._fitted_events)

    @property
    def explained(self) -> float:
        """The share of the rewards' variance, beyond each action's mean, that the models
        explained out of sample at the last refit (:func:`~online.policies.refit.explained_share`;
        0 before one, or with ``optimism_explained`` 0): the width's weight in the scores IGW
        weighs is ``optimism + optimism_explained * explained``."""
        return self._explained

    @property
    def n_changes(self) -> int:
        """Changes found in an action's rewards (see ``drift_delta``)."""
        return 0 if self._drift is None else self._drift.changes

    # -- refits (the trainer's hooks) ------------------------------------------------------

    def refit_due(self) -> bool:
        """True when the events learned since the last fit reach ``refit_fraction`` of those
        the next fit would take (the last fit's plus the new ones, at most the window; at least
        ``refit_min``), when a change was found since, or when an action is back in the
        inventory whose events the last fit had but whose trees it left out (it was removed
        then)."""
        if self._returned():
            return True
        new = self._window.n_events - self._fitted_events
        if self._drift is not None and self._drift.refit_now:
            return new > 0
        basis = min(self._fit_rows + new, self.window)
        return new > 0 and new >= max(self.refit_min, self.refit_fraction * basis)

    def _returned(self) -> bool:
        """Whether an action of the inventory has events in the last fit but no trees from it
        (it was removed then). Asked after every learned event, it only changes with the
        inventory or a refit: computed once per pair (~5 us a call saved)."""
        inventory, cached = self._active_inventory(), self._returned_for
        if cached is None or cached[0] is not inventory or cached[1] is not self._fitted:
            k = min(len(self._fitted), len(self._actions))
            # (one left out because its offers had stopped was in the inventory: it waits for
            # the next refit)
            was_in = self._fitted if self._fit_inventory is None else self._fit_inventory
            back = bool((self._active[:k] & ~was_in[:k] & (self._plays[:k] > 0)).any())
            self._returned_for = cached = (inventory, self._fitted, back)
        return cached[2]

    def start_refit(self) -> RefitJob:
        """A self-contained refit of the regressors on a copy of the window: every action's
        linear base, and the trees of the actions in the inventory (a removed action's trees
        would cost a fit per refit and serve no decision; it gets them back with the refit that
        its return makes due).

        Call it (in a worker thread if you like: it reads nothing of the policy) and hand its
        :class:`~online.policies.refit.RefitResult` to :meth:`finish_refit`. The events learned
        meanwhile stay in the window for the next refit.
        """
        self._refit_running = True  # its result is indexed as the actions are now
        X, a, r, _ = self._window.arrays(self._encoder.n_columns)
        events = self._window.n_events - len(a) + np.arange(len(a), dtype=np.int64)
        held_out = self._window.held_out() if self._holds_out() else None
        recent = self._window.n_events - self._fitted_events
        # the whole window (the drift test's subset below may leave out a column's values or
        # codes): at the bound, the columns it leaves empty are freed when the fit is in use
        # (finish_refit), and the codes it does not hold are forgotten then
        window_X = X
        if self._drift is not None:
            self._drift.refit_now = False
            keep = self._drift.kept(a, self._window.n_events)
            if keep is not None:  # leave out the events before an action's change
                recent = int(keep[len(keep) - min(recent, len(keep)):].sum())
                X, a, r, events = X[keep], a[keep], r[keep], events[keep]
                held_out = None if held_out is None else held_out[keep]
                if held_out is not None:  # (a copy) the old models' predictions of the new
                    # rewards weigh neither the trees nor the share R
                    held_out[self._drift.stale(a, events)] = np.nan
        categorical = [j for j, kind in enumerate(self._encoder.column_kinds) if kind == "code"]
        silent = self._silent()
        params = booster_params(self.n_trees, self.learning_rate, self.num_leaves,
                                self.min_data_in_leaf, self.l2, (self.seed or 0) + self._refits)
        penalties = self.linear_l2
        if isinstance(penalties, tuple) and self._linear.l2 in penalties:
            # the penalty in use is kept unless the errors show another better: the first fits
            # start from the grid's first, and a choice once made does not flip with the noise
            penalties = (self._linear.l2, *(p for p in penalties if p != self._linear.l2))
        return RefitJob(X, a, r, len(self._actions), categorical, params, self._window.n_events,
                        self._encoder.column_kinds, penalties, self._widths(), held_out,
                        recent, weigh=self.weigh_trees,
                        blend_in_use=self._blend.copy() if self.optimism_explained else None,
                        active=self._active[:len(self._actions)].copy(),
                        silent=silent, events=events,
                        previous=PreviousFit(self._ensemble, self._spans, self._fitted,
                                             None if self.linear_l2 is None else self._linear.l2),
                        window_X=window_X, codes_seen=self._encoder.code_counts(),
                        find_absent=self._encoder.n_columns >= self.max_columns)

    def _silent(self) -> np.ndarray:
        """Per action index: in the inventory, and its offers have stopped (see "Actions no
        request offers any more" in the class doc)."""
        n = len(self._actions)
        self._offers.grow(n)
        return self._active[:n] & self._offers.stopped(self._offers.upto)[:n]

    def finish_refit(self, result: RefitResult) -> None:
        """Decide from the refitted oracle from now on (a swap of arrays)."""
        self._ensemble = result.ensemble
        self._linear = result.linear
        self._plays = result.plays
        self._fitted = result.fitted
        self._fit_inventory = result.inventory
        self._spans = np.zeros((0, 3), np.int64) if result.spans is None else result.spans
        self._blend = result.blend
        self._explained = result.explained
        self._fitted_events = result.n_events
        self._fit_rows = int(result.plays.sum())
        if result.codes_present is not None:
            self._known_codes = _code_masks(result.codes_present)
        self._refits += 1
        self._refit_running = False
        self._grown = True  # look for stale actions before the next event (not inside this one)
        X, actions, rewards = self._window.recent(self._window.n_events - result.n_events)
        if result.codes_present is not None:
            self._forget_codes(result, X)
        if result.absent is not None:
            self._free_columns(result.absent, X)
        if not self._linear.inverse.shape[1]:
            return
        # the events learned while the refit ran: into the new linear base, as _learn would have
        for row, k, reward in zip(X, actions.tolist(), rewards.tolist()):
            self._predict_then_learn_linear(row[: self._encoder.n_columns].astype(np.float64),
                                            k, reward)

    def _forget_codes(self, result: RefitResult, recent: np.ndarray) -> None:
        """Forget the category values that no event of the window has (the refit's copy, and
        the ``recent`` rows learned since): the models in use hold nothing of them (the base
        codes values of the window, and a tree kept from an earlier fit was fitted on its
        action's events, all in this window). Values given a code since the refit began are
        kept. A value that comes back is a new one. Without this a category with a new value
        at every event (a user id sent as a value) kept a code per value ever seen, in memory
        and in every state: after 150,000 such events with a 50,000-event window, 150,000
        codes against 59,366 now (``bench/policies/new_keys.py --as-value``). Their codes are
        given again to the next new values (float32 window rows hold a code exactly up to
        2^24, and a split's bitset is as long as its largest code: ``forget_codes``)."""
        columns, counts = result.codes_seen
        given = dict(zip(columns.tolist(), counts.tolist()))  # codes given when it began
        kinds = self._encoder.column_kinds
        for j, present in result.codes_present.items():
            if j in given and kinds[j] == "code":  # (still the code column it was)
                v = recent[:, j] if j < recent.shape[1] else np.zeros(0)
                since = v[~np.isnan(v)].astype(np.int64)
                self._encoder.forget_codes(j, np.concatenate([present, since]), given[j])

    def _free_columns(self, absent: np.ndarray, recent: np.ndarray) -> None:
        """At ``max_columns``, free the columns that no event of the window has a value in:
        ``absent`` in the window the refit copied, and in the ``recent`` rows learned since.

        The models now in use hold nothing of such a column's feature: the linear base was
        fitted on rows where it is 0 (so its weight is 0 and its ``A^-1`` row a fresh one) and
        no tree can split on it (a tree kept from an earlier fit was fitted on its action's
        events, which are in this window, so empty there too). A new feature of the column's
        kind takes it from its first event, and is learned as a new column is. Without this, a
        policy at the bound would code its first 1,024 features for ever, and a feature first
        seen later (the key of a new campaign, of a new day's tag) would never be learned.
        A forgotten feature that comes back is a new feature."""
        n = len(absent)
        gone = absent & np.isnan(recent[:, :n]).all(axis=0)
        self._encoder.free(np.flatnonzero(gone).tolist())

    # -- forgetting stale actions (Policy._forget_stale) -------------------------------------

    def _forget_horizon(self) -> int:
        """The window: a stale action has no event left in it, so no fit would see it."""
        return self.window

    def _can_forget(self) -> bool:
        return not self._refit_running

    def _keep_actions(self, keep: np.ndarray) -> None:
        # (the window holds events of kept actions only: a stale one has none left there)
        new_index = np.full(int(keep.max(initial=-1)) + 1, -1, np.int64)
        new_index[keep] = np.arange(len(keep))
        self._window.renumber_actions(new_index)
        fitted = keep[keep < self._ensemble.n_models]
        self._ensemble = self._ensemble.select(fitted)
        self._linear = self._linear.select(keep[keep < self._linear.n_models])
        self._plays, self._fitted, self._blend, self._spans = (
            array[keep[keep < len(array)]]
            for array in (self._plays, self._fitted, self._blend, self._spans))
        if self._fit_inventory is not None:
            self._fit_inventory = self._fit_inventory[keep[keep < len(self._fit_inventory)]]
        # gamma's n stays the rows the models were fitted on (the forgotten actions' too)
        if self._drift is not None:
            self._drift.select(keep)
        self._offers.select(keep)
        self._forget_candidates()
        self._scored = self._returned_for = self._last_sums = None

    # -- introspection and state -----------------------------------------------------------

    @classmethod
    def _unit_test_params(cls):
        yield {"n_trees": 10, "window": 1000, "seed": 42}

    @property
    def n_refits(self) -> int:
        return self._refits

    @property
    def n_trees_fitted(self) -> int:
        return self._ensemble.n_trees

    def memory_usage(self) -> int:
        """Bytes of the window's and the ensemble's arrays."""
        return self._window.nbytes() + self._ensemble.nbytes() + self._linear.nbytes()

    def _model_state(self, statistics: bool) -> dict:
        state = {"ensemble": self._ensemble.to_state(),
                 "linear": self._linear.to_state(inverse=statistics),
                 "plays": self._plays.copy(), "fitted": self._fitted.copy(),
                 "blend": self._blend.copy(), "spans": self._spans.copy(),
                 "explained": self._explained,
                 "fitted_events": self._fitted_events, "fit_rows": self._fit_rows,
                 "refits": self._refits,
                 "n_changes": self.n_changes,
                 "known_codes": {"columns": list(self._known_codes[0]),
                                 "lengths": [len(m) for m in self._known_codes[1]],
                                 "bits": [np.packbits(m) for m in self._known_codes[1]]}}
        if statistics:  # the window: what the next refits learn from (and the base's A^-1)
            state["window"] = self._window.to_state(self._encoder.n_columns)
            if self._drift is not None:
                state["changes"] = self._drift.to_state()
            state["offers"] = self._offers.to_state()
        if self._fit_inventory is not None:
            state["fit_inventory"] = self._fit_inventory.copy()
        return state

    @classmethod
    def _check_state(cls, state: dict) -> None:
        """Versions 1 (trees only) and 2 (a linear base under the trees) are read."""
        super()._check_state({**state, "version": cls.VERSION}
                             if state.get("version") == 1 else state)

    def _load_model_state(self, state: dict) -> None:
        if self._encoder.max_columns is None:  # written before the bound: bounded from now on
            self._encoder.max_columns = self.max_columns
        self._ensemble = CompiledEnsemble.from_state(state["ensemble"])
        self._linear = RidgeBase.from_state(state["linear"]) if "linear" in state else \
            RidgeBase.empty(self._ensemble.n_models)  # version 1: trees only
        self._plays = np.asarray(state["plays"], np.int64).copy()
        # written before removed actions' trees were left out: every played action had trees
        self._fitted = np.asarray(state.get("fitted", self._plays > 0), np.bool_).copy()
        inventory = state.get("fit_inventory")  # (written before: as its trees say)
        self._fit_inventory = None if inventory is None else \
            np.asarray(inventory, np.bool_).reshape(-1).copy()
        self._blend = np.asarray(state["blend"], np.float64).copy() if "blend" in state else \
            np.ones(self._ensemble.n_models)  # written before the trees were weighed: weight 1
        # (written before the share was estimated: none until the next refit estimates it)
        self._explained = float(state.get("explained", 0.0))
        if not 0.0 <= self._explained <= 1.0:
            raise ValueError(f"explained must be in [0, 1], got {self._explained!r}")
        # (written before refits kept trees: the next refit fits every action)
        self._spans = np.array(state.get("spans", np.zeros((0, 3))), np.int64).reshape(-1, 3)
        self._fitted_events = int(state["fitted_events"])
        known = state.get("known_codes")
        if known is not None:
            columns = [int(j) for j in known["columns"]]
            lengths, bits = list(known["lengths"]), list(known["bits"])
            if not len(columns) == len(lengths) == len(bits):
                raise ValueError(f"known_codes: {len(columns)} columns, {len(lengths)} lengths, "
                                 f"{len(bits)} masks")
            self._known_codes = (columns, [
                np.unpackbits(np.asarray(b, np.uint8), count=int(n)).astype(np.bool_)
                for n, b in zip(lengths, bits)])
        elif state.get("codes_seen") is not None:  # (written before codes were given again:
            # the codes below each column's count then, of those the encoder still holds)
            seen = state["codes_seen"]
            counts = dict(zip(np.asarray(seen["columns"], np.int64).reshape(-1).tolist(),
                              np.asarray(seen["counts"], np.float64).reshape(-1).tolist()))
            numbers = self._encoder.code_numbers()
            self._known_codes = _code_masks({
                j: numbers[j][numbers[j] < counts[j]] for j in counts if j in numbers})
        # (written before actions were forgotten: the plays counted them all)
        self._fit_rows = int(state.get("fit_rows", self._plays.sum()))
        self._refits = int(state["refits"])
        if self._drift is not None:  # (a serving copy, without statistics: the count only)
            n_changes = int(state.get("n_changes", 0))
            if "changes" in state:
                self._drift = ActionChanges.from_state(state["changes"])
            self._drift.changes = n_changes
        if "window" in state:
            self._window = EventWindow.from_state(state["window"])
        # (a serving copy, or a state written before offers were counted: none known)
        self._offers = OfferTimes.from_state(state.get("offers"))


def _code_masks(present: dict[int, np.ndarray]) -> tuple[list[int], list[np.ndarray]]:
    """``TreeEnsemblePolicy._known_codes`` from each code column's codes: per column (in
    order) a boolean mask over codes 0 .. the largest."""
    columns = sorted(int(j) for j in present)
    masks = []
    for j in columns:
        codes = np.asarray(present[j], np.int64)
        mask = np.zeros(int(codes.max(initial=-1)) + 1, np.bool_)
        mask[codes] = True
        masks.append(mask)
    return columns, masks
