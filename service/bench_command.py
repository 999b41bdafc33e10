"""``grove bench [NAME [ARGS...]]``: list the benchmark scripts of ``bench/``, or run one.

The benchmarks are scripts beside the package in a source checkout (``pip install -e .``), not
part of the installed wheel: they need the data sets of ``../shared/data`` and the ``bench``
extra (``pip install -e '.[bench]'``: Vowpal Wabbit, LightGBM, profilers). ``grove bench`` lists
them with the first line of their docstring; ``grove bench bandit_forest_speed --data shuttle``
runs ``bench/bandit_forest_speed.py --data shuttle`` with this Python and returns its exit code.
Helper modules (``*_data.py``, ``streams.py``, ``*_policies.py``) are listed but are not meant to
be run on their own.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path

#: the repository's bench/ directory (exists in a source checkout only)
BENCH_DIR = Path(__file__).resolve().parents[1] / "bench"


def scripts(directory: Path = BENCH_DIR) -> dict[str, str]:
    """Script name (file stem) -> first line of its module docstring, sorted by name."""
    found = {}
    for path in sorted(directory.glob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        found[path.stem] = doc.strip().splitlines()[0] if doc.strip() else ""
    return found


def add_parser(sub) -> None:
    b = sub.add_parser(
        "bench",
        help="list the benchmark scripts of bench/ or run one (source checkout)",
        description=__doc__.split("\n\n")[0],
    )
    b.add_argument("name", nargs="?", help="script name, e.g. bandit_forest_speed")
    b.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    b.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if not BENCH_DIR.is_dir():
        print(
            f"grove bench: no bench/ directory at {BENCH_DIR}: the benchmarks live in a source "
            "checkout (git clone, then pip install -e '.[bench]')",
            file=sys.stderr,
        )
        return 2
    available = scripts()
    if not args.name:
        width = max(map(len, available), default=0)
        for name, summary in available.items():
            print(f"{name:<{width}}  {summary}")
        return 0
    name = args.name.removesuffix(".py")
    if name not in available:
        print(
            f"grove bench: no script {name!r} in {BENCH_DIR}; one of: {', '.join(available)}",
            file=sys.stderr,
        )
        return 2
    return subprocess.call([sys.executable, str(BENCH_DIR / f"{name}.py"), *args.args])
