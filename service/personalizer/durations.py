"""ISO 8601 durations (``PT10M``, ``P1DT2H``), as Personalizer's configuration writes them, and
the instants its JSON carries (:func:`instant`).

Personalizer's ``rewardWaitTime``, ``modelExportFrequency`` and ``autoOptimizationFrequency`` are
ISO 8601 durations; .NET clients also sent ``TimeSpan`` text (``00:10:00``, ``1.00:00:00``), so
both are read. Years and months have no fixed length: they are refused, not guessed.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

_ISO = re.compile(
    r"^P(?:(?P<weeks>\d+(?:\.\d+)?)W)?(?:(?P<days>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<hours>\d+(?:\.\d+)?)H)?(?:(?P<minutes>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$"
)
_TIMESPAN = re.compile(
    r"^(?:(?P<days>\d+)\.)?(?P<hours>\d+):(?P<minutes>\d+):(?P<seconds>\d+(?:\.\d+)?)$"
)
_SECONDS = {"weeks": 604_800, "days": 86_400, "hours": 3_600, "minutes": 60, "seconds": 1}


def parse(text: str) -> float:
    """Seconds in an ISO 8601 duration or a .NET TimeSpan; ValueError saying what is wrong.

    >>> parse("PT10M"), parse("P1DT2H"), parse("PT0.5S"), parse("00:05:00"), parse("1.00:00:00")
    (600.0, 93600.0, 0.5, 300.0, 86400.0)
    >>> parse("P1M")
    Traceback (most recent call last):
    ...
    ValueError: 'P1M' is not an ISO 8601 duration such as PT10M or P1DT2H (years and months ...
    """
    text = text.strip() if isinstance(text, str) else ""
    match = _ISO.match(text) or _TIMESPAN.match(text)
    if not match or text in ("P", "PT") or text.endswith("T"):
        raise ValueError(
            f"{text!r} is not an ISO 8601 duration such as PT10M or P1DT2H "
            "(years and months have no fixed length)"
        )
    return float(sum(float(v) * _SECONDS[k] for k, v in match.groupdict().items() if v))


def format(seconds: float) -> str:  # noqa: A001 (the module's pair to parse)
    """The ISO 8601 text of ``seconds``.

    >>> format(600), format(93600), format(0.5), format(0), format(0.000001), format(61.25)
    ('PT10M', 'P1DT2H', 'PT0.5S', 'PT0S', 'PT0.000001S', 'PT1M1.25S')
    """
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"no duration of {seconds} seconds")
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    text = "P" + (f"{int(days)}D" if days else "")
    clock = (f"{int(hours)}H" if hours else "") + (f"{int(minutes)}M" if minutes else "")
    if secs:
        # decimal digits, never an exponent (1e-06 is no ISO 8601): to the microsecond
        clock += (f"{secs:.6f}".rstrip("0").rstrip(".") or "0") + "S" if secs != int(secs) \
            else f"{int(secs)}S"
    if clock:
        text += "T" + clock
    return text if text != "P" else "PT0S"


def instant(seconds: float) -> str:
    """An instant (seconds since the epoch) as Personalizer's JSON writes one: ISO 8601 in UTC,
    always to the millisecond. ``isoformat`` alone drops a zero fraction, and strings of the two
    forms do not sort as their times do ("...:20Z" after "...:20.5Z").

    >>> instant(1764389720), instant(1764389720.1234), instant(1764389720.9996)
    ('2025-11-29T04:15:20.000Z', '2025-11-29T04:15:20.123Z', '2025-11-29T04:15:21.000Z')
    """
    return datetime.fromtimestamp(round(seconds * 1000) / 1000, UTC).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")
