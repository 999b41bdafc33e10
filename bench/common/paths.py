"""Where the benchmarks read their data sets and write their scratch output.

``DATA``: ``$GROVE_BENCH_DATA`` if set, else the first ``shared/data`` beside the repository or
beside one of its parent directories (``../shared/data`` for a checkout next to ``shared/``,
``../../shared/data`` for a git worktree one level further down).
``OUT``: ``bench/out/`` (ignored by git): resumable JSONL runs and intermediate JSON; the
figures a README quotes are copied into ``bench/<topic>/results/`` and ``plots/``.
"""

from __future__ import annotations

import os
from pathlib import Path

#: the repository's root (bench/ is not installed: the scripts run from a source checkout)
ROOT = Path(__file__).resolve().parents[2]


def _shared_data() -> Path:
    if "GROVE_BENCH_DATA" in os.environ:
        return Path(os.environ["GROVE_BENCH_DATA"])
    for parent in ROOT.parents:
        if (parent / "shared" / "data").is_dir():
            return parent / "shared" / "data"
    return ROOT.parent / "shared" / "data"


#: the shared data sets (see ../shared/data/README.md)
DATA = _shared_data()
#: scratch output of the scripts (git-ignored)
OUT = ROOT / "bench" / "out"
