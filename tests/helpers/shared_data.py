"""Where the tests find ../shared/data (beside the repository, or $GROVE_BENCH_DATA, as the
bench scripts do): ``shared_file(name)`` is the file's path, or the test is skipped."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DATA = Path(os.environ.get("GROVE_BENCH_DATA",
                           Path(__file__).resolve().parents[3] / "shared" / "data"))


def shared_file(name: str) -> Path:
    file = DATA / name
    if not file.exists():
        pytest.skip(f"{file} not available")
    return file
