"""rudi benchmarks: see README.md in this folder."""
