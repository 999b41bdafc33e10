"""Structured logs: one JSON object per line (GROVE_LOG_FORMAT=json, the default) or text.

Fields given with ``extra=`` (``eventId``, ``app``, ``action``, ...) become keys of the JSON
object, so a log pipeline can follow one event from decide to reward by its ``eventId``.

Every line a Grove process writes goes through :func:`setup`'s handler: Grove's own loggers,
uvicorn's (its access lines get ``client``, ``method``, ``path``, ``status`` fields; the CLI
runs uvicorn with ``log_config=None`` so that they reach the root logger), rq's, and Python's
warnings. Records are formatted and written by a background thread (a ``QueueHandler`` in
front, a ``QueueListener`` behind): a request only appends a record to a queue.
"""

from __future__ import annotations

import atexit
import json
import logging
import logging.handlers
import queue
import time

#: the attributes every LogRecord has; anything else came from ``extra=``
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}

#: decide / reward / activate lines (INFO), one per event
events = logging.getLogger("grove.events")

#: uvicorn's access line arguments, as fields
_ACCESS_FIELDS = ("client", "method", "path", "httpVersion", "status")

_listener: logging.handlers.QueueListener | None = None


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.name == "uvicorn.access" and isinstance(record.args, tuple):
            entry.update(zip(_ACCESS_FIELDS, record.args, strict=False))
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        return json.dumps(entry, default=str)


class _Enqueue(logging.handlers.QueueHandler):
    """Hands the record to the writer thread as is (the stdlib's ``prepare`` formats it here,
    on the request path, and flattens the fields); only the traceback is rendered now, while
    its frames are alive."""

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        if record.exc_info:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
        return record


def _stop(listener: logging.handlers.QueueListener) -> None:
    if listener._thread is not None:  # not stopped yet (stop() twice would fail)
        listener.stop()


def setup(level: str = "INFO", fmt: str = "json") -> None:
    """Configure the root logger once per process (the CLI calls it)."""
    global _listener
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    if _listener is not None:
        _stop(_listener)
    records: queue.SimpleQueue = queue.SimpleQueue()
    _listener = logging.handlers.QueueListener(records, handler, respect_handler_level=False)
    _listener.start()
    atexit.register(_stop, _listener)  # writes what is queued before the process ends
    root = logging.getLogger()
    root.handlers[:] = [_Enqueue(records)]
    root.setLevel(level.upper())
    logging.captureWarnings(True)  # warnings.warn(...) as log lines, not bare stderr text
