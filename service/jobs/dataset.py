"""A job's input: an uploaded table (CSV or Parquet bytes) or an app's logged events.

Both become one :class:`Dataset` whose ``frame`` is a pandas DataFrame. Uploaded bytes are
parsed by pandas (``read_csv`` / ``read_parquet`` via pyarrow), never unpickled.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import redis

from service import codec, keys
from service.redis_text import as_str

FORMATS = ("csv", "parquet")
#: columns an event row has besides its context features (a context feature of the same name
#: is renamed ``context.<name>``)
EVENT_COLUMNS = ("action", "reward", "probability")
_PAGE = 10_000


class DatasetError(ValueError):
    """The input cannot be read or does not fit the job (ends the job ``failed``)."""


@dataclass
class Dataset:
    """What a job kind's ``run`` receives.

    ``frame``: the rows; ``app``: the app the job belongs to (None for an upload without app);
    ``source``: how the input was given (``{"type": "upload", "format", "bytes", "filename"}``
    or ``{"type": "events", "app", "last"}``); ``store``: the service's
    :class:`service.store.Store`, for kinds that also need the app's model
    (``store.load_snapshot(app)``), or None.
    """

    frame: pd.DataFrame
    app: str | None = None
    source: dict[str, Any] = field(default_factory=dict)
    store: Any = None


def guess_format(filename: str | None, content_type: str | None) -> str:
    """'parquet' for ``*.parquet`` / ``*.pq`` or a parquet content type, else 'csv'."""
    name = (filename or "").lower()
    if name.endswith((".parquet", ".pq")) or "parquet" in (content_type or ""):
        return "parquet"
    return "csv"


def read_table(data: bytes, fmt: str) -> pd.DataFrame:
    """Parse uploaded bytes; every failure is a :class:`DatasetError` saying what is wrong."""
    if fmt not in FORMATS:
        raise DatasetError(f"unknown dataset format {fmt!r}: use one of {list(FORMATS)}")
    if not data:
        raise DatasetError("the uploaded file is empty")
    try:
        if fmt == "csv":
            frame = pd.read_csv(io.BytesIO(data))
        else:
            frame = pd.read_parquet(io.BytesIO(data))
    except ImportError as exc:  # Parquet needs pyarrow
        raise DatasetError(f"cannot read {fmt} on this server: {exc}") from None
    except (ValueError, UnicodeDecodeError, OSError, pd.errors.ParserError) as exc:
        raise DatasetError(f"the {fmt.upper()} file cannot be read: {exc}") from None
    except Exception as exc:  # pyarrow raises its own types for a malformed file
        raise DatasetError(
            f"the {fmt.upper()} file cannot be read: {type(exc).__name__}: {exc}"
        ) from None
    if frame.shape[0] == 0 or frame.shape[1] == 0:
        raise DatasetError(f"the {fmt.upper()} file has no rows or no columns")
    return numbers_as_numbers(frame, text=fmt == "csv")


def numbers_as_numbers(frame: pd.DataFrame, text: bool = False) -> pd.DataFrame:
    r"""``frame`` with each column of Python numbers that pandas kept as objects made float64,
    and with ``text`` (a CSV's frame) each column of text that is all numbers. pandas keeps
    integers that fit neither int64 nor uint64 together (``2**64 - 1`` beside ``-1``) as
    objects (logged events, Parquet), and a CSV's as text; a job would then read such a column
    as text, one category per value. Float64 is what every job reads numbers as. Strings in a
    logged context stay text (``{"zip": "02139"}`` is a category there, as for the policies);
    in a CSV, pandas reads numbers from text itself, and those it left are the integers it
    could not fit.

    >>> frame = pd.DataFrame({"n": [2**64 - 1, -1, None], "t": ["a", 1, None],
    ...                       "zip": ["02139", "9", None]})
    >>> [str(t) for t in numbers_as_numbers(frame).dtypes]
    ['float64', 'object', 'str']
    >>> csv = read_table(b"n,t\n18446744073709551615,x\n-1,\n", "csv")
    >>> csv["n"].tolist(), csv["t"].dtype == float
    ([1.8446744073709552e+19, -1.0], False)
    """
    for col in frame.columns:
        series = frame[col]
        if pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series):
            continue
        kind = pd.api.types.infer_dtype(series, skipna=True)
        if kind in ("integer", "floating", "mixed-integer-float"):
            frame[col] = pd.to_numeric(series).astype("float64")
        elif text and kind == "string" and series.notna().any():
            try:
                frame[col] = series.astype("float64")
            except (ValueError, TypeError, OverflowError):
                pass
    return frame


def event_count(client: redis.Redis, app: str) -> int:
    return int(client.xlen(keys.stream(app)))


def read_events(client: redis.Redis, app: str, last: int) -> pd.DataFrame:
    """The app's ``last`` logged events (decision joined with its reward), oldest first.

    One row per entry of the app's event stream (:func:`service.keys.stream`): the context
    features as columns, then ``action``, ``reward`` (in the app's range) and ``probability``
    (the logged propensity), or ``label`` for the labeled events of a supervised (mcts-is) app.
    Features missing from an event's context are NaN.
    """
    entries: list = []
    newest = "+"
    while len(entries) < last:  # in pages: a million events should not be one reply
        page = client.xrevrange(keys.stream(app), max=newest, count=min(_PAGE, last - len(entries)))
        if not page:
            break
        entries += page
        newest = "(" + as_str(page[-1][0])
    if not entries:
        raise DatasetError(f"app {app!r} has no logged events (decisions joined with rewards)")
    rows = []
    for _, fields in reversed(entries):
        f = {as_str(k): v for k, v in fields.items()}
        context = codec.unpack(f["context"]) if "context" in f else {}
        row = {(f"context.{k}" if k in EVENT_COLUMNS else k): v for k, v in context.items()}
        if "label" in f:  # a labeled event of a supervised app (mcts-is): no action
            row["label"] = int(f["label"])
        else:
            row["action"] = as_str(f["action"])
            row["reward"] = float(f["reward"])
            row["probability"] = float(f["probability"])
        rows.append(row)
    return numbers_as_numbers(pd.DataFrame(rows))


def feature_columns(frame: pd.DataFrame, target: str, features: list[str] | None) -> list[str]:
    """The feature columns of a labeled table (``features``, or every column but ``target``)."""
    if target not in frame.columns:
        raise DatasetError(
            f"target column {target!r} is not in the data (columns: {list(frame.columns)})"
        )
    columns = features or [c for c in frame.columns if c != target]
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise DatasetError(f"feature columns {missing} are not in the data")
    if target in columns:
        raise DatasetError(f"the target {target!r} cannot also be a feature")
    if not columns:
        raise DatasetError("no feature columns besides the target")
    return columns


def context_names(frame: pd.DataFrame) -> dict[str, str]:
    """Column of :func:`read_events`'s frame -> context feature name (``context.<name>`` back)."""
    prefix = "context."
    return {
        c: (c[len(prefix):] if c.startswith(prefix) and c[len(prefix):] in EVENT_COLUMNS else c)
        for c in frame.columns
        if c not in EVENT_COLUMNS and c != "label"
    }


def contexts(frame: pd.DataFrame) -> list[dict]:
    """The logged contexts of :func:`read_events`'s frame as dicts, missing features left out."""
    names = context_names(frame)
    out = []
    for row in frame[list(names)].to_dict("records"):
        x = {}
        for col, value in row.items():
            if value is None or (isinstance(value, float) and np.isnan(value)):
                continue
            x[names[col]] = value.item() if isinstance(value, np.generic) else value
        out.append(x)
    return out
