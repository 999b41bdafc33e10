"""Garbage-collection probe for ``bench/http/gc.py``, loaded into Grove's API process through
``PYTHONPATH`` (Python imports ``sitecustomize`` at startup). Does nothing unless
``GROVE_GC_PROBE`` names a file.

From SIGUSR2 on (the bench sends it when the load starts), it times every collection with the
``gc.callbacks`` hook (wall and thread CPU, per generation); on SIGUSR1 it writes the figures
as JSON to that file. ``GROVE_GC_PROBE_NO_FREEZE=1`` turns ``gc.freeze()`` into a no-op: the
comparison arm, without the freeze.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import time

_OUT = os.environ.get("GROVE_GC_PROBE")

if _OUT:
    _started: list[float] = []
    _records: list[tuple[int, float, float]] = []  # generation, wall s, thread CPU s
    _counting = [False]

    def _note(phase: str, info: dict) -> None:
        if phase == "start":
            _started[:] = [time.perf_counter(), time.thread_time()]
        elif _counting[0] and _started:
            _records.append((info["generation"], time.perf_counter() - _started[0],
                             time.thread_time() - _started[1]))

    gc.callbacks.append(_note)
    if os.environ.get("GROVE_GC_PROBE_NO_FREEZE"):
        gc.freeze = lambda: None

    def _start(*_args) -> None:
        _counting[0] = True

    def _dump(*_args) -> None:
        figures = {}
        for generation in (0, 1, 2):
            runs = [r for r in _records if r[0] == generation]
            figures[generation] = {
                "collections": len(runs),
                "wall_ms_total": 1e3 * sum(r[1] for r in runs),
                "wall_ms_max": 1e3 * max((r[1] for r in runs), default=0.0),
                "cpu_ms_total": 1e3 * sum(r[2] for r in runs),
                "cpu_ms_max": 1e3 * max((r[2] for r in runs), default=0.0),
            }
        with open(_OUT, "w") as f:
            json.dump({"tracked_objects": len(gc.get_objects()),
                       "frozen_objects": gc.get_freeze_count(), "by_generation": figures}, f)

    signal.signal(signal.SIGUSR1, _dump)
    signal.signal(signal.SIGUSR2, _start)
