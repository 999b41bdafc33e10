"""RuDi (Zhang et al., CIKM 2022): distil a black-box scorer of behaviour sequences into rules.

Stage 1, MCTS-SG (``mcts_sg.py``) searches K statistics (compositions of the operators in
``operators.py``) that track the teacher's scores; stage 2, GS-NLN (``gs_nln.py``) binarises
them (eq. 10) and learns R weighted AND/OR rules of at most 2^L literals that rank entities as
the teacher does.

Choices where the paper is silent or ambiguous
----------------------------------------------
- ``events`` is a pandas DataFrame or a dict of equal-length columns (name -> array); one row
  per event. ``entity_col`` names the entity; ``order_col`` (optional) orders each entity's
  events and is not a feature. Results are aligned with ``np.unique`` of the entity ids
  (``entities_``).
- ``scores`` (and ``labels``) are a mapping or pandas Series entity -> value, or an array
  aligned with the sorted unique entity ids. Every entity needs a score.
- ``operators`` restricts the built-in operator set to names or name prefixes ("Sum",
  "Select amount", "RetainBy", ...); ``extra_operators`` registers your own operators
  (``operators.Aggregation``, ``Transform``, ``RowFilter``).
- ``statistics_[k]["correlation"]`` is the (multiple) correlation of statistic k with the
  teacher on all N entities (eq. 5); ``partial_correlation`` its reward against the
  residualised target when chosen (eqs. 8-9); ``multiple_correlation_`` is eq. 5 for all K
  statistics together (the Table 3 figure).
- Rules are listed by decreasing |weight|; a rule's support is the fraction of the fitted
  entities it holds for. Last-layer neurons that read as the same rule are listed once with
  their weights summed (the score is unchanged), so ``rules_`` may hold fewer than R rules.
  Fidelity and AUC (``fidelity_``, ``auc_``) are measured on the fitted entities; use ``score``
  on held-out data.
- The progress callback gets (fraction in [0, 1], message); MCTS-SG counts for the first 60%.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from online.rules.events import EventTable, Schema, _column, infer_schema
from online.rules.gs_nln import (
    GSNLN,
    Binarizer,
    count_literals,
    merge_thresholds,
    render,
)
from online.rules.mcts_sg import MCTSSG, multiple_corr
from online.rules.metrics import fidelity
from online.rules.operators import Grammar, build_operators

STATE_FORMAT = "grove.rudi"
STATE_VERSION = 1


def align(values, entities: np.ndarray, what: str) -> np.ndarray:
    """Values per entity, in the order of ``entities``."""
    if hasattr(values, "index") and hasattr(values, "to_numpy"):  # pandas Series
        values = dict(zip(values.index.to_numpy().tolist(), values.to_numpy().tolist()))
    if isinstance(values, Mapping):
        try:
            return np.array([values[e] for e in entities.tolist()], dtype=np.float64)
        except KeyError as err:
            raise ValueError(f"no {what} for entity {err.args[0]!r}") from None
    values = np.asarray(values, dtype=np.float64)
    if values.shape != (len(entities),):
        raise ValueError(f"{what}: expected {len(entities)} values (one per entity), "
                         f"got shape {values.shape}")
    return values


class RuDi:
    """Rule distillation: K statistics by MCTS-SG, then R weighted rules by GS-NLN.

    Parameters (defaults from Table 2)
    ----------------------------------
    K, D, B, n_simulations : MCTS-SG (20, 4, 128, 500).
    R, H, L, epochs, batch_size, lr, temperature : GS-NLN (20, 20, 2, 500, 128,
        (0.1, 0.001), (1.0, 1e-4)).
    max_categories : one-hot dimensions / By-operators per categorical column (most frequent).
    categorical : columns to treat as categorical even if numeric.
    operators : None (all) or names / name prefixes of the built-in operators to keep.
    extra_operators : your own ``Operator`` instances.
    random_state : seed.

    Attributes
    ----------
    statistics_, rules_, multiple_correlation_, fidelity_, auc_ (None without labels),
    entities_ (sorted entity ids of the fit).

    Examples
    --------
    >>> import numpy as np
    >>> from online.rules.rudi import RuDi
    >>> rng = np.random.default_rng(0)
    >>> n = 300
    >>> lengths = rng.integers(1, 6, n)
    >>> events = {"user": np.repeat(np.arange(n), lengths),
    ...           "amount": rng.integers(1, 10, lengths.sum()).astype(float)}
    >>> total = np.add.reduceat(events["amount"], np.r_[0, np.cumsum(lengths)[:-1]])
    >>> scores = (total > 20).astype(float)
    >>> model = RuDi(K=1, D=2, R=2, H=2, n_simulations=40, epochs=30, random_state=0)
    >>> model = model.fit(events, "user", scores)
    >>> model.statistics_[0]["name"]
    'Sum(Select amount)'
    >>> round(model.fidelity_, 2)
    1.0
    >>> print(model.rules_text().splitlines()[0])  # doctest: +SKIP
    Sum(Select amount) > 20    weight +0.31    support 0.49
    """

    def __init__(self, K=20, D=4, R=20, B=128, n_simulations=500, H=20, L=2, epochs=500,
                 batch_size=128, lr=(0.1, 0.001), temperature=(1.0, 1e-4), max_categories=10,
                 categorical=None, operators=None, extra_operators=(), random_state=None):
        self.K = K
        self.D = D
        self.R = R
        self.B = B
        self.n_simulations = n_simulations
        self.H = H
        self.L = L
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.temperature = temperature
        self.max_categories = max_categories
        self.categorical = categorical
        self.operators = operators
        self.extra_operators = extra_operators
        self.random_state = random_state

    # -- building blocks -------------------------------------------------------------------
    def _grammar(self, schema: Schema) -> Grammar:
        ops = build_operators(schema, self.extra_operators)
        if self.operators is not None:
            keep = tuple(self.operators)
            extra = {o.name for o in self.extra_operators}
            ops = [o for o in ops if o.name in extra
                   or any(o.name == k or o.name.startswith(k + " ") or
                          (o.kind == "agg" and o.name.startswith(k)) for k in keep)]
        return Grammar(ops, self.D)

    def _table(self, events) -> EventTable:
        return EventTable.from_events(events, self.entity_col_, self.schema_, self.order_col_)

    # -- fit -------------------------------------------------------------------------------
    def fit(self, events, entity_col: str, scores, labels=None, order_col=None, progress=None):
        """Distil ``scores`` (the teacher's, one per entity) of the sequences in ``events``.

        ``labels`` (optional, same forms as ``scores``) give ``auc_``; ``progress`` is called
        as ``progress(fraction, message)`` while fitting.
        """
        if self.R < 2 or self.R % 2:
            raise ValueError("R must be a positive even number (R/2 conjunctions + R/2 "
                             "disjunctions)")
        self.entity_col_, self.order_col_ = entity_col, order_col
        self.schema_ = infer_schema(events, entity_col, order_col, self.categorical,
                                    self.max_categories)
        table = self._table(events)
        self.entities_ = table.entities
        y = align(scores, table.entities, "scores")
        rng = np.random.default_rng(self.random_state)
        self.grammar_ = self._grammar(self.schema_)

        def stage(lo, hi):
            if progress is None:
                return None
            return lambda f, msg: progress(lo + (hi - lo) * f, msg)

        sg = MCTSSG(self.K, self.D, self.B, self.n_simulations, random_state=rng)
        sg.fit(table, y, self.grammar_, progress=stage(0.0, 0.6))
        self.search_seconds_ = sg.search_seconds_
        self.search_cpu_seconds_ = sg.search_cpu_seconds_
        self.evaluation_seconds_ = sg.evaluation_seconds_
        self.compositions_ = [tuple(s) for s in sg.statistics_]
        names = []
        self.statistics_ = []
        for s, X, pc in zip(sg.statistics_, sg.values_, sg.partial_correlations_):
            dims = self.grammar_.dimension_labels(s)
            names += dims
            self.statistics_.append({
                "name": self.grammar_.label(s),
                "dimensions": dims,
                "operators": [self.grammar_.operators[i].name for i in s],
                "correlation": multiple_corr(X, y),
                "partial_correlation": pc,
            })
        self.feature_names_ = names
        X = np.hstack(sg.values_) if sg.values_ else np.zeros((len(y), 0))
        self.multiple_correlation_ = multiple_corr(X, y) if X.shape[1] else 0.0

        self.binarizer_ = Binarizer().fit(X)
        Z = self.binarizer_.transform(X)
        self.network_ = GSNLN(self.R, self.H, self.L, self.epochs, self.batch_size, self.lr,
                              self.temperature, random_state=rng)
        self.network_.fit(Z, y, progress=stage(0.6, 1.0))
        self._describe_rules(Z)
        pred = self.network_.predict(Z)
        self.fidelity_ = fidelity(y, pred)
        self.auc_ = None
        if labels is not None:
            from sklearn.metrics import roc_auc_score

            self.auc_ = float(roc_auc_score(align(labels, table.entities, "labels"), pred))
        return self

    def _describe_rules(self, Z) -> None:
        words = self.binarizer_.describe(self.feature_names_)
        acts = self.network_.rule_activations(Z)
        lits = self.binarizer_.literals_
        exprs = [merge_thresholds(e, lits) for e in self.network_.expressions(len(lits))]
        rules: dict[str, dict] = {}
        for r, expr in enumerate(exprs):
            text = render(expr, words)
            if text in rules:  # the same rule from two neurons: one rule, weights summed
                rules[text]["weight"] += float(self.network_.w_[r])
                continue
            rules[text] = {
                "rule": text,
                "weight": float(self.network_.w_[r]),
                "support": float(acts[:, r].mean()),
                "n_literals": count_literals(expr),
            }
        self.rules_ = sorted(rules.values(), key=lambda r: -abs(r["weight"]))

    # -- use -------------------------------------------------------------------------------
    def transform(self, events) -> np.ndarray:
        """The K statistics (all dimensions) of each entity in ``events``."""
        table = self._table(events)
        if not self.compositions_:
            return np.zeros((table.n_entities, 0))
        return np.hstack([self.grammar_.evaluate(s, table) for s in self.compositions_])

    def rule_activations(self, events) -> np.ndarray:
        """(n_entities, R) booleans in the network's rule order."""
        return self.network_.rule_activations(self.binarizer_.transform(self.transform(events)))

    def predict(self, events) -> np.ndarray:
        """Student scores sum_r w_r * rule_r for the entities of ``events`` (sorted ids)."""
        return self.network_.predict(self.binarizer_.transform(self.transform(events)))

    def entities(self, events) -> np.ndarray:
        """The entity ids ``predict`` is aligned with."""
        return np.unique(_column(events, self.entity_col_))

    def score(self, events, scores, labels=None) -> dict:
        """Fidelity (sec. 4.3) to ``scores`` and, with labels, the AUC, on new data."""
        ents = self.entities(events)
        pred = self.predict(events)
        out = {"fidelity": fidelity(align(scores, ents, "scores"), pred)}
        if labels is not None:
            from sklearn.metrics import roc_auc_score

            out["auc"] = float(roc_auc_score(align(labels, ents, "labels"), pred))
        return out

    def rules_text(self) -> str:
        """The rules as Table 5 would print them, one a line."""
        return "\n".join(
            f"{r['rule']}    weight {r['weight']:+.2f}    support {r['support']:.2f}"
            for r in self.rules_
        )

    # -- state -----------------------------------------------------------------------------
    def to_state(self) -> dict:
        layers = [{"Wa": ly["Wa"].copy(), "Wb": ly["Wb"].copy(), "n_conj": int(ly["n_conj"])}
                  for ly in self.network_.layers_]
        lits = self.binarizer_.literals_
        return {
            "format": STATE_FORMAT,
            "version": STATE_VERSION,
            "params": {k: (list(v) if isinstance(v, tuple) else v)
                       for k, v in self._json_params().items()},
            "entity_col": self.entity_col_,
            "order_col": self.order_col_,
            "schema": self.schema_.to_state(),
            "statistics": [list(st["operators"]) for st in self.statistics_],
            "statistics_info": self.statistics_,
            "literal_columns": np.array([j for j, _ in lits], dtype=np.int64),
            "literal_thresholds": np.array([np.nan if t is None else t for _, t in lits]),
            "layers": layers,
            "w": self.network_.w_.copy(),
            "rules": self.rules_,
            "feature_names": list(self.feature_names_),
            "multiple_correlation": float(self.multiple_correlation_),
            "fidelity": float(self.fidelity_),
            "auc": self.auc_,
        }

    def _json_params(self) -> dict:
        return {k: getattr(self, k) for k in (
            "K", "D", "R", "B", "n_simulations", "H", "L", "epochs", "batch_size", "lr",
            "temperature", "max_categories", "categorical", "operators", "random_state")}

    @classmethod
    def from_state(cls, state: dict, extra_operators=()) -> RuDi:
        if state.get("format") != STATE_FORMAT or state.get("version") != STATE_VERSION:
            raise ValueError("not a RuDi state of a supported version")
        params = dict(state["params"])
        for k in ("lr", "temperature"):
            params[k] = tuple(params[k])
        model = cls(**params, extra_operators=extra_operators)
        model.entity_col_, model.order_col_ = state["entity_col"], state["order_col"]
        model.schema_ = Schema.from_state(state["schema"])
        model.grammar_ = model._grammar(model.schema_)
        index = model.grammar_.index
        model.compositions_ = [tuple(index[n] for n in names) for names in state["statistics"]]
        model.statistics_ = state["statistics_info"]
        model.feature_names_ = list(state["feature_names"])
        model.binarizer_ = Binarizer()
        model.binarizer_.literals_ = [
            (int(j), None if np.isnan(t) else float(t))
            for j, t in zip(state["literal_columns"], state["literal_thresholds"])
        ]
        net = GSNLN(model.R, model.H, model.L, model.epochs, model.batch_size, model.lr,
                    model.temperature)
        net.layers_ = [{"Wa": np.asarray(ly["Wa"]), "Wb": np.asarray(ly["Wb"]),
                        "n_conj": int(ly["n_conj"])} for ly in state["layers"]]
        net.w_ = np.asarray(state["w"])
        model.network_ = net
        model.rules_ = state["rules"]
        model.multiple_correlation_ = state["multiple_correlation"]
        model.fidelity_ = state["fidelity"]
        model.auc_ = state["auc"]
        return model
