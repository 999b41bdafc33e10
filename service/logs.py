"""Structured logs: one JSON object per line (GROVE_LOG_FORMAT=json, the default) or text.

Fields given with ``extra=`` (``eventId``, ``app``, ``action``, ...) become keys of the JSON
object, so a log pipeline can follow one event from decide to reward by its ``eventId``.

Every line a Grove process writes goes through :func:`setup`'s handler: Grove's own loggers,
uvicorn's (its access lines get ``client``, ``method``, ``path``, ``status`` fields; the CLI
runs uvicorn with ``log_config=None`` so that they reach the root logger), rq's, and Python's
warnings. Records are formatted and written in batches by a background thread
(:class:`BatchWriter`): a request only appends a record to a list.
"""

from __future__ import annotations

import atexit
import collections
import json
import logging
import threading
import time

#: the attributes every LogRecord has; anything else came from ``extra=``
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}

#: decide / reward / activate lines (INFO), one per event
events = logging.getLogger("grove.events")

#: fields some libraries add that say nothing a JSON line does not (uvicorn's ANSI-coloured copy
#: of the message)
_DROPPED = {"color_message"}

#: uvicorn's access line arguments, as fields
_ACCESS_FIELDS = ("client", "method", "path", "httpVersion", "status")


#: one encoder for every line (``json.dumps(..., default=str)`` builds a new one per call:
#: 8 us of a line's 16)
_ENCODER = json.JSONEncoder(default=str)


class JsonFormatter(logging.Formatter):
    _second, _stamp = -1, ""  # the time's text up to the second, written once per second

    def _time(self, record: logging.LogRecord) -> str:
        second = int(record.created)
        if second != self._second:
            self._second = second
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return f"{self._stamp}.{int(record.msecs):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self._time(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.name == "uvicorn.access" and isinstance(record.args, tuple):
            entry.update(zip(_ACCESS_FIELDS, record.args, strict=False))
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in _DROPPED and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        return _ENCODER.encode(entry)


class BatchWriter(logging.Handler):
    """Off the request path: a record is appended to a list (no lock, no format, no write) and
    a writer thread formats and writes what has come, in one write, every ``interval`` seconds
    (at once for warnings and errors, and when the process ends).

    Not the stdlib's ``QueueHandler``/``QueueListener``: that wakes its thread for every record,
    and under load each wake-up costs the event loop a GIL hand-off (profiled: 20 % of the API's
    samples at 800 requests/s); batches cost one hand-off per interval.
    """

    def __init__(self, target: logging.Handler, interval: float = 0.05) -> None:
        super().__init__()
        self.target, self.interval = target, interval
        self._records: collections.deque[logging.LogRecord] = collections.deque()
        self._wake = threading.Event()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="grove-log-writer", daemon=True)
        self._thread.start()

    def handle(self, record: logging.LogRecord) -> bool:  # no handler lock: deque is atomic
        if not self.filter(record):
            return False
        if record.exc_info:  # rendered now, while its frames are alive
            record.exc_text = logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
        self._records.append(record)
        if record.levelno >= logging.WARNING:
            self._wake.set()
        return True

    def emit(self, record: logging.LogRecord) -> None:
        self.handle(record)

    def _run(self) -> None:
        while not self._stopped:
            self._wake.wait(self.interval)
            self._wake.clear()
            self.flush()

    def flush(self) -> None:
        lines = []
        while self._records:
            record = self._records.popleft()
            try:
                lines.append(self.target.format(record))
            except Exception:  # noqa: BLE001 - a bad record must not stop the writer
                self.handleError(record)
        if lines:
            stream = self.target.stream
            stream.write("\n".join(lines) + "\n")
            stream.flush()

    def close(self) -> None:
        self._stopped = True
        self._wake.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self.flush()
        super().close()


_writer: BatchWriter | None = None


def setup(level: str = "INFO", fmt: str = "json") -> None:
    """Configure the root logger once per process (the CLI calls it)."""
    global _writer
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    if _writer is not None:
        _writer.close()
    _writer = BatchWriter(handler)
    atexit.register(_writer.close)  # writes what is buffered before the process ends
    # what no Grove line shows (the caller's file and line, thread and process names) is not
    # looked up for each record: the logging HOWTO's "Optimization" switches
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    root = logging.getLogger()
    root.handlers[:] = [_writer]
    root.setLevel(level.upper())
    logging.captureWarnings(True)  # warnings.warn(...) as log lines, not bare stderr text
