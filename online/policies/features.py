"""Context dicts -> float vectors for the regression-based policies, columns learned online.

Bandit Forest recodes contexts into binary variables (:mod:`online.bandit.encoder`); the
policies of this package regress rewards on the context itself, so here numbers stay numbers
and categories stay categories, in the form the learner asks for.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable

import numpy as np

__all__ = ["FeatureEncoder", "flatten", "MAX_MAGNITUDE", "LARGEST_CODED", "column_scales",
           "checked_scales"]

FORMAT = "grove.features"
# 2: a column may be free (``[kind, null, null]``: its feature forgotten, FeatureEncoder.free);
# 3: a code column's codes may have gaps (``code_numbers``, ``next_codes``: forget_codes);
# 4: forgotten codes are given again (``free_codes``)
VERSION = 4

NUMBER = "number"  # a number or a bool (True = 1.0): the value itself
ONE_HOT = "one-hot"  # one category of a string feature: 1.0 if the feature has that value
CODE = "code"  # a string feature as one column of category codes 0, 1, 2, ... (trees)
_MISSING = object()  # a null feature: nothing to write
# contexts of plain numbers coded key by key before the keys of the last one are taken as the
# plain keys again (a stream whose keys vary pays for a new plan once per so many contexts)
PLAIN_REPLAN = 8
#: the largest magnitude of a number feature. The tree-ensemble policy's window keeps its rows
#: as float32 (3.4e38 at most: a larger value would be kept as inf), and the regressions sum
#: squares and products of values over their events (a ridge's Z'Z, LinUCB's A,
#: Sherman-Morrison's outer products): 1e38 leaves those finite, 1e76 squared times any window,
#: where 1e308 (a finite float) made the first square infinite and every statistic NaN after it
MAX_MAGNITUDE = 1e38
_MAX_SQUARED = MAX_MAGNITUDE * MAX_MAGNITUDE
#: the largest magnitude the linear models (LinUCB, the trees' linear base) learn a number
#: column at: a column with larger values is divided by a power of 2 (:func:`column_scales`).
#: float64 Sherman-Morrison updates and solves of statistics whose columns span many orders of
#: magnitude lose positive definiteness (figures in LinUCB's docstring); up to 2^20 (~1e6:
#: prices, counts, sizes) a number is used as given, as the paper's raw features
LARGEST_CODED = 2.0 ** 20


def column_scales(magnitudes: np.ndarray, limit: float = LARGEST_CODED) -> np.ndarray:
    """Per entry of ``magnitudes`` (|x| >= 0), a number column's scale: 1 up to ``limit``, above
    it the smallest power of 2 that brings the magnitude down to ``limit`` or less (powers of
    2: dividing by one is exact).

    >>> column_scales(np.array([0.0, 1.0, 1000.0, 2.0 ** 20, 1.5 * 2 ** 20, 1e19])).tolist()
    [1.0, 1.0, 1.0, 1.0, 2.0, 17592186044416.0]
    """
    mantissa, exponent = np.frexp(np.maximum(magnitudes / limit, 1.0))  # m 2^e, m in [.5, 1)
    return np.ldexp(1.0, np.where(mantissa == 0.5, exponent - 1, exponent))


def checked_scales(scales, n: int, name: str = "scales") -> np.ndarray:
    """``scales`` read from a state: a copy, or ``ValueError`` unless they are ``n`` finite
    numbers >= 1 (what :func:`column_scales` gives)."""
    scales = np.array(scales, np.float64)
    if scales.shape != (n,) or not (np.isfinite(scales) & (scales >= 1.0)).all():
        raise ValueError(f"{name} must be {n} finite numbers >= 1 (one per column), got shape "
                         f"{scales.shape}")
    return scales


def checked_number(name: str, value) -> float:
    """Feature ``name``'s value (neither a string nor null) as a float: ``ValueError`` for
    NaN, infinities and magnitudes past ``MAX_MAGNITUDE`` (or an integer too large for a
    float), ``TypeError`` for what is not a number."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        if isinstance(value, (int, np.integer)):
            raise ValueError(f"feature {name!r} is {value}: too large a number") from None
        raise TypeError(f"feature {name!r} has a value of type {type(value).__name__}: "
                        "features must be numbers, strings, bools or null") from None
    if not math.isfinite(number):
        raise ValueError(f"feature {name!r} is {number}: numbers must be finite")
    if abs(number) > MAX_MAGNITUDE:
        raise ValueError(f"feature {name!r} is {number!r}: numbers must be within "
                         f"+-{MAX_MAGNITUDE:g}")
    return number


def flatten(x: dict, prefix: str = "") -> dict:
    """Nested dicts and lists -> one flat dict, names joined with dots.

    The names the service gives Personalizer's namespaces (service/api/personalizer_map.py):
    ``{"user": {"age": 30}}`` -> ``user.age``; a list gives one feature per position.

    >>> flatten({"user": {"age": 30, "tags": ["a", "b"]}, "device": "mobile"})
    {'user.age': 30, 'user.tags.0': 'a', 'user.tags.1': 'b', 'device': 'mobile'}
    """
    out: dict = {}
    _walk(out, prefix, x)
    return out


def _walk(out: dict, prefix: str, value) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            _walk(out, f"{prefix}.{key}" if prefix else str(key), inner)
    elif isinstance(value, (list, tuple)):
        for i, inner in enumerate(value):
            _walk(out, f"{prefix}.{i}", inner)
    else:
        out[prefix] = value


class FeatureEncoder:
    """Turns a context dict into a float64 vector, adding columns as new features appear.

    * Numbers (and numpy numbers) are one column each, with their value; ``bool`` is a number
      (True = 1.0, False = 0.0).
    * Strings are categories: with ``categories="one-hot"`` each (feature, value) seen while
      learning is a 0/1 column ``feature=value`` (linear models); with ``categories="code"`` a
      string feature is one column ``feature=*`` holding the value's code 0, 1, 2, ... in the
      order first seen (tree learners split on it as a category).
    * A feature seen both as a number and as a string gets both columns.
    * Nested dicts and lists are flattened as :func:`flatten` does (``user.age``).
    * ``None`` or a missing key is *missing*: ``missing="zero"`` writes 0.0 in its columns (a
      one-hot column is 0.0 either way), ``missing="nan"`` writes NaN in its number and code
      columns (learners that handle missing values themselves).
    * A key or category never seen while learning is not part of the coding yet: :meth:`encode`
      ignores it (a code column gets the missing value), and says so (``known`` is False).
      Only :meth:`learn_encode` adds columns; columns are only ever appended, so a column's
      index and meaning never change, unless the learner frees it (:meth:`free`). With
      ``max_columns`` set, features that would add columns past it are ignored (a linear
      model's cost grows as d^2), or take a free column of their kind.
    * NaN, infinite numbers and numbers beyond +-:data:`MAX_MAGNITUDE` (1e38) raise
      ``ValueError`` naming the feature; values of other types (bytes, objects) raise
      ``TypeError`` naming the feature.

    Parameters
    ----------
    categories
        ``"one-hot"`` or ``"code"``, see above.
    missing
        ``"zero"`` or ``"nan"``, see above.
    max_columns
        Upper bound on the number of columns (None: no bound).

    Examples
    --------
    >>> enc = FeatureEncoder()
    >>> enc.learn_encode({"site": "a", "age": 30, "mobile": True}).tolist()
    [1.0, 30.0, 1.0]
    >>> enc.learn_encode({"site": "b", "user": {"visits": 2}}).tolist()
    [0.0, 0.0, 0.0, 1.0, 2.0]
    >>> enc.column_names
    ['site=a', 'age', 'mobile', 'site=b', 'user.visits']
    >>> enc.encode({"site": "unseen", "age": None, "new": 1.5})
    (array([0., 0., 0., 0., 0.]), False)

    For trees, categories as codes and missing values as NaN:

    >>> enc = FeatureEncoder(categories="code", missing="nan")
    >>> for x in [{"site": "a", "age": 30}, {"site": "b"}]:
    ...     _ = enc.learn_encode(x)
    >>> enc.column_names, enc.encode({"site": "b"})[0].tolist()
    (['site=*', 'age'], [1.0, nan])

    At the bound, a learner that knows a column's feature is gone from everything it learns
    from (the tree-ensemble policy: from its whole window) frees the column for a new feature
    of the same kind:

    >>> enc = FeatureEncoder(categories="code", missing="nan", max_columns=2)
    >>> _ = enc.learn_encode({"campaign.spring": 1, "campaign.summer": 1})
    >>> enc.learn_encode({"campaign.autumn": 1}).tolist(), enc.left_out
    ([nan, nan], 1)
    >>> enc.free([0])
    >>> enc.learn_encode({"campaign.autumn": 1}).tolist(), enc.column_names
    ([1.0, nan], ['campaign.autumn', 'campaign.summer'])
    >>> enc.encode({"campaign.spring": 1})  # forgotten: an unknown key
    (array([nan, nan]), False)
    """

    def __init__(self, categories: str = "one-hot", missing: str = "zero",
                 max_columns: int | None = None):
        if categories not in (ONE_HOT, CODE):
            raise ValueError(f"categories must be 'one-hot' or 'code', got {categories!r}")
        if missing not in ("zero", "nan"):
            raise ValueError(f"missing must be 'zero' or 'nan', got {missing!r}")
        if max_columns is not None and max_columns < 1:
            raise ValueError(f"max_columns must be at least 1, got {max_columns}")
        self.categories = categories
        self.missing = missing
        self.max_columns = max_columns
        # features (or one-hot categories) learn_encode met and could not give a column, the
        # max_columns reached: counted each time, not once per name (a set of names would grow
        # without bound, what the bound is there to stop)
        self.left_out = 0
        self._fill = 0.0 if missing == "zero" else math.nan
        self._columns: list[tuple[str, str, str | None]] = []  # (kind, feature, category)
        self._numbers: dict[str, int] = {}  # feature -> its number column
        self._one_hot: dict[tuple[str, str], int] = {}  # (feature, category) -> column
        self._codes: dict[str, tuple[int, dict[str, int]]] = {}  # feature -> (column, codes)
        # feature -> the code of its next new value when none is free (one past every code given)
        self._next_code: dict[str, int] = {}
        # feature -> the codes of its forgotten values, a min-heap: a new value takes the
        # smallest (forget_codes)
        self._free_codes: dict[str, list[int]] = {}
        self._template = np.zeros(0)  # the vector of a context with every feature missing
        # kind -> free columns of that kind, lowest first (free: their feature forgotten)
        self._free: dict[str, list[int]] = {}
        # (keys, columns): the keys of a recent context whose values were all numbers with
        # their columns, and those columns; a context with the same keys is coded in one step
        # (_same_keys). One attribute, replaced whole: a reader in another thread sees a pair
        self._plain: tuple[tuple, np.ndarray] = ((), np.zeros(0, np.int64))
        self._plain_misses = PLAIN_REPLAN  # plain contexts coded key by key since then

    # -- reading -------------------------------------------------------------------------------

    @property
    def n_columns(self) -> int:
        return len(self._columns)

    @property
    def n_free(self) -> int:
        """Columns freed (:meth:`free`) that no feature has taken since."""
        return sum(len(columns) for columns in self._free.values())

    @property
    def column_names(self) -> list[str | None]:
        """``age``, ``site=a`` (one-hot), ``site=*`` (codes); None for a free column."""
        return [None if feature is None else feature if kind == NUMBER else
                f"{feature}={'*' if kind == CODE else value}"
                for kind, feature, value in self._columns]

    @property
    def column_kinds(self) -> list[str]:
        """``"number"``, ``"one-hot"`` or ``"code"`` per column (trees: which are categorical)."""
        return [kind for kind, _, _ in self._columns]

    def code_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """(code columns, one past the largest code each has given): a code at or past its
        column's count is given after now (a forgotten code given again may be below it)."""
        entries = sorted((column, self._next_code[feature])
                         for feature, (column, _) in self._codes.items())
        return (np.array([column for column, _ in entries], np.int64),
                np.array([count for _, count in entries], np.float64))

    def forget_codes(self, column: int, keep, below: float = math.inf) -> int:
        """Forget the values of code column ``column`` whose codes are below ``below`` and not
        in ``keep``: such a value is unknown from now on, and a new value if it comes back.
        For a learner whose models hold nothing of those values any more (the tree-ensemble
        policy: no event of its window has them): an id sent as a value (``{"user": "u123"}``)
        would otherwise keep a code per user ever seen, in memory and in every state.

        Their codes are given again, the smallest first, to the column's next new values, so
        that its codes stay about as many as the values it holds, not as many as the stream
        has had: a learner's float32 rows hold a code exactly only up to 2^24, and LightGBM
        writes a split on a category as a bitset as long as the largest code it sends left (a
        value that became popular after 80,000 events of ids, 20,000 in the window, got code
        55,912: 588,190 bitset words in the trees, a 7.3 MB snapshot; given a forgotten code,
        3,548: 38,158 words, 5.1 MB; ``bench/policies/late_popular.py``). Returns how many
        were forgotten."""
        kind, feature, _ = self._columns[column] if 0 <= column < len(self._columns) else \
            (None, None, None)
        if kind != CODE or feature is None:
            raise ValueError(f"column {column} is not a code column")
        keep = set(np.asarray(keep, np.int64).tolist())
        codes = self._codes[feature][1]
        kept = {value: code for value, code in codes.items() if code in keep or code >= below}
        if len(kept) < len(codes):
            self._codes[feature] = (column, kept)  # (replaced whole: readers see one or other)
            free = self._free_codes.setdefault(feature, [])
            free.extend(code for value, code in codes.items() if value not in kept)
            heapq.heapify(free)
        return len(codes) - len(kept)

    def code_numbers(self) -> dict[int, np.ndarray]:
        """Per code column, the codes of the values it holds (int64, in no order)."""
        return {column: np.fromiter(codes.values(), np.int64, len(codes))
                for column, codes in self._codes.values()}

    def categories_of(self, column: int) -> list[str]:
        """The categories of a ``code`` column, by code."""
        kind, feature, _ = self._columns[column]
        if kind != CODE:
            raise ValueError(f"column {column} ({self.column_names[column]}) is not a code column")
        return list(self._codes[feature][1])

    def encode(self, x: dict) -> tuple[np.ndarray, bool]:
        """``(vector, known)``; never changes the coding. ``known``: every feature and category
        of ``x`` already has its column (``learn_encode(x)`` would add none)."""
        return self._encode(x, learn=False)

    def learn_encode(self, x: dict) -> np.ndarray:
        """The vector of ``x``, after adding columns for its new features and categories."""
        return self._encode(x, learn=True)[0]

    def _encode(self, x: dict, learn: bool) -> tuple[np.ndarray, bool]:
        if not isinstance(x, dict):
            raise TypeError(f"a context must be a dict, got {type(x).__name__}")
        if len(x) == len(self._plain[0]) and len(x):
            out = self._same_keys(x)
            if out is not None:
                return out, True
        out = self._template.copy()
        known = plain = True
        numbers, one_hot, codes = self._numbers, self._one_hot, self._codes
        for key, value in x.items():
            # the hot path inlined: flat numbers (bools: 1.0 / 0.0) and categories that have
            # their column (without bools here, 76 JSON booleans took 128 us against 27 us)
            t = type(value)
            if t is float or t is int or t is bool:
                column = numbers.get(key)
                if column is not None and -MAX_MAGNITUDE <= value <= MAX_MAGNITUDE:
                    out[column] = value
                    continue
            elif t is str:
                if self.categories == ONE_HOT:
                    column = one_hot.get((key, value))
                    if column is not None:
                        out[column] = 1.0
                        plain = False
                        continue
                else:
                    entry = codes.get(key)
                    if entry is not None:
                        code = entry[1].get(value)
                        if code is not None:
                            out[entry[0]] = code
                            plain = False
                            continue
            plain = False
            if isinstance(value, (dict, list, tuple)):
                items = flatten(value, str(key)).items()
            else:
                items = ((key if type(key) is str else str(key), value),)
            for name, inner in items:
                hit = self._column(name, inner, learn)
                if hit is None:
                    known = False
                elif hit is not _MISSING:
                    column, number = hit
                    if column >= len(out):  # added by this call
                        grown = self._template.copy()
                        grown[: len(out)] = out
                        out = grown
                    out[column] = number
        if plain and x:
            self._plain_misses += 1
            if self._plain_misses >= PLAIN_REPLAN:
                self._plain = (tuple(x), np.array([numbers[key] for key in x], np.int64))
                self._plain_misses = 0
        return out, known

    def _same_keys(self, x: dict) -> np.ndarray | None:
        """``x``'s vector in one step if it has the plain keys and its values are all finite
        numbers within +-MAX_MAGNITUDE (None: code it key by key). One ``sum`` checks the
        types: it raises for a string, None, a list or a dict. The vector's squared norm is
        over MAX_MAGNITUDE^2 (or NaN, or infinite) when a value is out of bounds, and when
        several values near the bound are together: the key-by-key path then decides (a value
        past ~1e154 overflows the square, with numpy's RuntimeWarning, and is refused there).
        77 numbers: ~6 us instead of ~12."""
        keys, columns = self._plain
        try:
            if tuple(x) != keys:
                return None
            sum(x.values())
            values = np.fromiter(x.values(), np.float64, len(x))
        except (TypeError, ValueError, OverflowError):
            return None
        if not values.dot(values) <= _MAX_SQUARED:
            return None
        out = self._template.copy()
        out[columns] = values
        return out

    def _column(self, name: str, value, learn: bool):
        """``(column, value to write)`` of feature ``name``; ``_MISSING`` for null; None if it
        has no column (with ``learn``, a column is added unless ``max_columns`` is reached)."""
        if value is None:
            return _MISSING
        if isinstance(value, (bool, np.bool_)):
            value = 1.0 if value else 0.0
        if isinstance(value, str):
            return self._category(name, value, learn)
        number = checked_number(name, value)
        column = self._numbers.get(name)
        if column is None:
            column = self._add((NUMBER, name, None)) if learn else None
            if column is None:
                return None
            self._numbers[name] = column
        return column, number

    def _category(self, name: str, value: str, learn: bool):
        if self.categories == ONE_HOT:
            column = self._one_hot.get((name, value))
            if column is None:
                column = self._add((ONE_HOT, name, value)) if learn else None
                if column is None:
                    return None
                self._one_hot[(name, value)] = column
            return column, 1.0
        entry = self._codes.get(name)
        if entry is None:
            column = self._add((CODE, name, None)) if learn else None
            if column is None:
                return None
            entry = self._codes[name] = (column, {})
            self._next_code[name] = 0
        column, codes = entry
        code = codes.get(value)
        if code is None:
            if not learn:
                return None
            free = self._free_codes.get(name)
            if free:
                code = codes[value] = heapq.heappop(free)
            else:
                code = codes[value] = self._next_code[name]
                self._next_code[name] = code + 1
        return column, float(code)

    def _add(self, column: tuple) -> int | None:
        """The index of a new column ``(kind, feature, category)``: appended, or past
        ``max_columns`` a free column of its kind (None: none, the feature is left out)."""
        if self.max_columns is None or len(self._columns) < self.max_columns:
            self._columns.append(column)
            self._template = np.append(self._template,
                                       0.0 if column[0] == ONE_HOT else self._fill)
            return len(self._columns) - 1
        free = self._free.get(self._pool(column[0])) if self._free else None
        if not free:
            self.left_out += 1
            return None
        j = free.pop(0)
        if not free:  # (only pools with a column in them: at the bound, no lookup at all)
            del self._free[self._pool(column[0])]
        self._columns[j] = column
        self._template[j] = 0.0 if column[0] == ONE_HOT else self._fill
        return j

    def _pool(self, kind: str) -> str:
        """Which free columns a feature of ``kind`` may take: a code encoder's learner reads
        a code column and a number column differently (its own kind); a one-hot encoder's
        columns are all numbers to its learner (any)."""
        return kind if self.categories == CODE else "any"

    def free(self, columns: Iterable[int]) -> None:
        """Forget the features of ``columns``: each column is free for the next new feature
        (or category, one-hot) that finds ``max_columns`` reached (a code encoder's column
        for a feature of its kind, a one-hot encoder's for any), and the forgotten feature is
        an unknown key until it comes back as a new one.

        For a learner whose models hold nothing of those features any more (every event it
        learns from has them missing, or it took them out of its statistics): the new feature
        then starts from a column its models have learned nothing on. Without it, an encoder
        at its bound codes its first features for ever, and a feature first seen later (a new
        campaign's key) is never learned.
        """
        for j in sorted(set(int(j) for j in columns)):
            kind, feature, value = self._columns[j]
            if feature is None:
                continue  # already free
            if kind == NUMBER:
                del self._numbers[feature]
            elif kind == ONE_HOT:
                del self._one_hot[(feature, value)]
            else:
                del self._codes[feature], self._next_code[feature]
                self._free_codes.pop(feature, None)
            self._columns[j] = (kind, None, None)
            pool = self._free.setdefault(self._pool(kind), [])
            pool.append(j)
            pool.sort()
        # a plain context's keys may have lost their columns: coded key by key until replanned
        self._plain = ((), np.zeros(0, np.int64))

    # -- state ---------------------------------------------------------------------------------

    def to_state(self) -> dict:
        """JSON-able: the settings and the columns in order (codes in code order)."""
        return {
            "format": FORMAT,
            "version": VERSION,
            "categories": self.categories,
            "missing": self.missing,
            "max_columns": self.max_columns,
            "left_out": self.left_out,
            "columns": [[kind, feature, value] for kind, feature, value in self._columns],
            "codes": {feature: list(codes) for feature, (_, codes) in self._codes.items()},
            "code_numbers": {feature: list(codes.values())
                             for feature, (_, codes) in self._codes.items()},
            "next_codes": dict(self._next_code),
            "free_codes": {feature: sorted(free) for feature, free in self._free_codes.items()
                           if free},
        }

    @classmethod
    def from_state(cls, state: dict) -> FeatureEncoder:
        if state.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} state (format={state.get('format')!r})")
        # (1: no free columns; 2: no gaps; 3: forgotten codes not given again, none kept free)
        if state.get("version") not in (1, 2, 3, VERSION):
            raise ValueError(f"unsupported {FORMAT} state version {state.get('version')!r}")
        enc = cls(state["categories"], state["missing"], None)
        for kind, feature, value in state["columns"]:
            column = enc._add((kind, feature, value))
            if feature is None:
                enc._free.setdefault(enc._pool(kind), []).append(column)
            elif kind == NUMBER:
                enc._numbers[feature] = column
            elif kind == ONE_HOT:
                enc._one_hot[(feature, value)] = column
            else:
                values = state["codes"][feature]
                numbers = state.get("code_numbers", {}).get(feature, range(len(values)))
                enc._codes[feature] = (column, dict(zip(values, map(int, numbers))))
                enc._next_code[feature] = int(state.get("next_codes", {}).get(feature,
                                                                              len(values)))
                free = [int(c) for c in state.get("free_codes", {}).get(feature, [])]
                if free:
                    enc._free_codes[feature] = free  # (sorted: a heap)
        enc.max_columns = state["max_columns"]
        enc.left_out = int(state.get("left_out", 0))  # (written before it was counted: 0)
        return enc

    def encode_many(self, xs: Iterable[dict]) -> np.ndarray:
        """Rows of :meth:`encode` (coding unchanged) as one 2-d array."""
        rows = [self.encode(x)[0] for x in xs]
        return np.vstack(rows) if rows else np.zeros((0, self.n_columns))
