"""The repository's scripts, importable (``from scripts import pack_env``) by
the benchmarks and tests that measure or check them; each Python script is
also run as a file (``python scripts/pack_env.py``, as submit.sh does)."""
