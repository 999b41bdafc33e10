"""Structured logs: one JSON object per line (GROVE_LOG_FORMAT=json, the default) or text.

Fields given with ``extra=`` (``eventId``, ``app``, ``action``, ...) become keys of the JSON
object, so a log pipeline can follow one event from decide to reward by its ``eventId``.
"""

from __future__ import annotations

import json
import logging
import time

#: the attributes every LogRecord has; anything else came from ``extra=``
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}

#: decide / reward / activate lines (INFO), one per event
events = logging.getLogger("grove.events")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def setup(level: str = "INFO", fmt: str = "json") -> None:
    """Configure the root logger once per process (the CLI calls it)."""
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
