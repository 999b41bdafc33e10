"""``grove bench [NAME [ARGS...]]``: list the benchmark scripts of ``bench/``, or run one.

The benchmarks are a package beside ``online`` and ``service`` in a source checkout
(``pip install -e .``), not part of the installed wheel: they need the data sets of
``../shared/data`` and the ``bench`` extra (``pip install -e '.[bench]'``: Vowpal Wabbit,
LightGBM, profilers). One folder per topic (``bench/<topic>/``, see ``bench/README.md``).
``grove bench`` lists the scripts as ``<topic>.<script>`` with the first line of their
docstring; ``grove bench bandit_forest.speed --data shuttle`` runs
``python -m bench.bandit_forest.speed --data shuttle`` with this Python (the repository on
``PYTHONPATH``, the current directory unchanged) and returns its exit code. Helper modules
(``common.streams``, ``<topic>.data``, ``bandit_forest.players``) are listed too but are not
meant to be run on their own.
"""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
from pathlib import Path

#: the repository's root and its bench/ package (exist in a source checkout only)
ROOT = Path(__file__).resolve().parents[1]
BENCH_DIR = ROOT / "bench"


def scripts(directory: Path = BENCH_DIR) -> dict[str, str]:
    """Script name (``topic.script``, or ``script`` at the top of bench/) -> first line of its
    module docstring, sorted by name."""
    found = {}
    for path in sorted(directory.rglob("*.py")):
        if path.name == "__init__.py" or "out" in path.relative_to(directory).parts:
            continue
        name = ".".join(path.relative_to(directory).with_suffix("").parts)
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        found[name] = doc.strip().splitlines()[0] if doc.strip() else ""
    return dict(sorted(found.items()))


def add_parser(sub) -> None:
    b = sub.add_parser(
        "bench",
        help="list the benchmark scripts of bench/ or run one (source checkout)",
        description=__doc__.split("\n\n")[0],
    )
    b.add_argument("name", nargs="?", help="topic.script, e.g. bandit_forest.speed")
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
    # bandit_forest.speed, bandit_forest/speed, bandit_forest/speed.py, bench.bandit_forest.speed
    name = args.name.removesuffix(".py").replace("/", ".").removeprefix("bench.")
    if name not in available:
        print(
            f"grove bench: no script {args.name!r} in {BENCH_DIR}; one of: {', '.join(available)}",
            file=sys.stderr,
        )
        return 2
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path}
    return subprocess.call([sys.executable, "-m", f"bench.{name}", *args.args], env=env)
