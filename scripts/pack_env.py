"""Pack a virtualenv for ``scripts/submit.sh --python-env archive``, without Spark.

    python scripts/pack_env.py --prefix VENV --output env.tar.gz [--keep DIST]... [--all-files]

venv-pack's archive of the virtualenv ``VENV`` minus what Spark's Python
workers and driver never import from it:

- the distributions the cluster's Spark provides to every Python worker it
  starts (``pyspark`` and ``py4j``: Spark puts its own
  ``python/lib/pyspark.zip`` and ``py4j-*.zip`` on the workers'
  ``PYTHONPATH``, and the driver's, in every deploy mode), in a version
  that may not even match the cluster's;
- :data:`NOT_IMPORTED`: pandas (sparkmaxent's workers exchange Arrow
  batches through ``mapInArrow`` and ``arrow_udf``, which pyspark runs
  without pandas; only ``pandas_udf``/``mapInPandas`` need it, and a
  driver planning a ``mapInArrow``: ``--keep pandas`` for one running from
  the archive, as submit.sh does in cluster deploy mode) and the
  installers, with the distributions only they require;
- :data:`UNUSED_FILES` of the others: test suites, bytecode (compiled again
  on import), C headers, Cython sources and type stubs, pyarrow's Flight and
  S3 modules and its link-time copies of its libraries, and the scipy
  subpackages nothing imports (:data:`UNIMPORTED_SCIPY`).

``--keep DIST`` packs a distribution anyway, ``--all-files`` the unused
files. A distribution's files are those its installed ``RECORD`` lists (its
packages, metadata and scripts in ``bin/``), so nothing else of the
environment is left out.

Prints one line: the archive's bytes, and the files and bytes (unpacked)
left out (``benchmarks/env_archive.py`` records them). Needs venv-pack
(``pip install 'sparkmaxent[cluster]'``).
"""

from __future__ import annotations

import argparse
import glob
import importlib.metadata as metadata
import os
import re
import sys

#: what the cluster's Spark installation gives every Python worker
SPARK_PROVIDED = ("pyspark", "py4j")
#: distributions nothing Spark runs from the archive imports (see the module docstring)
NOT_IMPORTED = ("pandas", "pip", "setuptools", "wheel", "venv-pack")
#: scipy's subpackages that neither sparkmaxent nor the scipy modules it imports
#: (optimize, sparse, special, linalg and theirs) import (tests/unit/test_pack_env.py)
UNIMPORTED_SCIPY = (
    "stats",
    "io",
    "signal",
    "interpolate",
    "integrate",
    "ndimage",
    "cluster",
    "fftpack",
    "odr",
    "differentiate",
    "datasets",
    "misc",
)
#: files of the packed distributions nothing imports at run time (venv-pack patterns)
UNUSED_FILES = (
    "lib/python*/site-packages/*/tests/*",  # test suites
    "*/__pycache__/*",  # bytecode: Python compiles a module again when it imports it
    "lib/python*/site-packages/*/include/*",  # C headers, for building extensions
    "lib/python*/site-packages/pyarrow/*flight*",  # pyarrow.flight (Arrow Flight RPC)
    "lib/python*/site-packages/pyarrow/*s3*",  # pyarrow.fs.S3FileSystem (Spark reads s3a://)
    "lib/python*/site-packages/pyarrow/_pyarrow_cpp_tests*",  # pyarrow's C++ test module
    # pyarrow's copies of a library under its linker name (lib*.so) and full version
    # (lib*.so.X.Y.Z), for building C++ extensions: the loader opens the soname (lib*.so.X)
    "lib/python*/site-packages/pyarrow/libarrow*.so",
    "lib/python*/site-packages/pyarrow/libarrow*.so.*.*.*",
    "lib/python*/site-packages/pyarrow/src/*",  # C++ sources of its bindings
    "lib/python*/site-packages/*.pyx",  # Cython sources and declarations (compiled already)
    "lib/python*/site-packages/*.pxd",
    "lib/python*/site-packages/*.pxi",
    "lib/python*/site-packages/*.pyi",  # type stubs
    *(f"lib/python*/site-packages/scipy/{name}/*" for name in UNIMPORTED_SCIPY),
)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def excluded_files(prefix: str, dists: list[str]) -> tuple[list[str], set[str]]:
    """The files of ``dists`` installed in the virtualenv ``prefix``, as
    paths relative to it (as venv-pack names them), found by each
    distribution's ``RECORD`` (a distribution not installed there adds
    none); and the files of every other distribution there."""
    site = [p for p in _site_dirs(prefix) if os.path.isdir(p)]
    wanted = {_canonical(d) for d in dists}
    drop: set[str] = set()
    others: set[str] = set()
    for dist in metadata.distributions(path=site):
        into = drop if _canonical(dist.metadata["Name"] or "") in wanted else others
        for f in dist.files or []:
            rel = os.path.relpath(os.path.normpath(str(dist.locate_file(f))), prefix)
            if not rel.startswith(os.pardir):
                into.add(rel)
    return sorted(f for f in drop if os.path.lexists(os.path.join(prefix, f))), others


def left_out_distributions(prefix: str, keep: list[str]) -> list[str]:
    """:data:`SPARK_PROVIDED` and :data:`NOT_IMPORTED` installed in
    ``prefix``, less ``keep``, then every distribution that only those left
    out require and nobody installed by name (pip's ``REQUESTED`` marker):
    pandas' pytz, tzdata and python-dateutil, unless a packed one such as
    matplotlib needs them."""
    site = [p for p in _site_dirs(prefix) if os.path.isdir(p)]
    dists = {_canonical(d.metadata["Name"] or ""): d for d in metadata.distributions(path=site)}
    kept = {_canonical(k) for k in keep}
    out = {_canonical(n) for n in (*SPARK_PROVIDED, *NOT_IMPORTED)} & set(dists) - kept
    while True:
        needed = {r for name in set(dists) - out for r in _requires(dists[name])}
        more = {r for name in out for r in _requires(dists[name])}
        more = {r for r in (more & set(dists)) - needed - out - kept if not _requested(dists[r])}
        if not more:
            return sorted(out)
        out |= more


def _requested(dist) -> bool:
    """Whether ``dist`` was installed by name, not as a dependency."""
    return dist.read_text("REQUESTED") is not None


def _requires(dist) -> set[str]:
    """The canonical names ``dist`` requires (not those of its extras)."""
    names = set()
    for req in dist.requires or []:
        found = _NAME.match(req)
        if found and "extra" not in req.partition(";")[2]:
            names.add(_canonical(found.group()))
    return names


def _site_dirs(prefix: str) -> list[str]:
    lib = os.path.join(prefix, "lib")
    names = sorted(os.listdir(lib)) if os.path.isdir(lib) else []
    return [os.path.join(lib, n, "site-packages") for n in names if n.startswith("python")]


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def exclude_patterns(files: list[str], others: set[str]) -> list[str]:
    """venv-pack patterns for ``files``: a directory of site-packages that
    holds some of them and no file of another distribution (``others``) as a
    whole, ``dir/*`` (with the bytecode compiled there since installing,
    which no ``RECORD`` lists), any other file by its own (escaped) name."""
    shared = {_site_top(f) for f in others} - {None}
    patterns: set[str] = set()
    for rel in files:
        top = _site_top(rel)
        if top is not None and top not in shared:
            patterns.add(glob.escape(top) + "/*")
        else:
            patterns.add(glob.escape(rel))
    return sorted(patterns)


def _site_top(rel: str) -> str | None:
    """``lib/pythonX.Y/site-packages/<top>`` of a file below such a
    directory, else None."""
    parts = rel.split(os.sep)
    if len(parts) > 4 and parts[0] == "lib" and parts[2] == "site-packages":
        return os.sep.join(parts[:4])
    return None


def pack(prefix: str, output: str, keep: list[str], all_files: bool = False) -> dict:
    """Pack ``prefix`` into ``output`` without the distributions of
    :func:`left_out_distributions` and, unless ``all_files``, the
    :data:`UNUSED_FILES`; returns what was packed and left out:
    ``archive_bytes``, ``unpacked_bytes``, ``files``, ``left_out`` (names),
    ``left_out_files``, ``left_out_bytes`` (unpacked), ``unused_files`` and
    ``unused_bytes`` (of them, those of the patterns)."""
    import venv_pack

    dists = left_out_distributions(prefix, keep)
    files, others = excluded_files(prefix, dists)
    env = venv_pack.Env(prefix=prefix)
    before = _unpacked(env)
    for pattern in exclude_patterns(files, others):
        env = env.exclude(pattern)
    middle = _unpacked(env)
    for pattern in () if all_files else UNUSED_FILES:
        env = env.exclude(pattern)
    after = _unpacked(env)
    env.pack(output=output, force=True, verbose=False)
    return {
        "archive_bytes": os.path.getsize(output),
        "unpacked_bytes": after[1],
        "files": after[0],
        "left_out": dists,
        "left_out_files": before[0] - after[0],
        "left_out_bytes": before[1] - after[1],
        "unused_files": middle[0] - after[0],
        "unused_bytes": middle[1] - after[1],
    }


def _unpacked(env) -> tuple[int, int]:
    """(files, bytes) of a venv-pack environment as it would be unpacked."""
    return len(env.files), sum(os.lstat(f.source).st_size for f in env.files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prefix", required=True, help="the virtualenv to pack")
    parser.add_argument("--output", required=True, help="the archive to write (.tar.gz)")
    parser.add_argument(
        "--keep",
        action="append",
        default=[],
        metavar="DIST",
        help="pack this distribution anyway (repeatable): one of "
        f"{', '.join(SPARK_PROVIDED + NOT_IMPORTED)} or one only they require",
    )
    parser.add_argument(
        "--all-files", action="store_true", help="pack the unused files too (tests, bytecode, ...)"
    )
    args = parser.parse_args(argv)
    done = pack(os.path.abspath(args.prefix), args.output, args.keep, args.all_files)
    print(
        f"{args.output}: {done['archive_bytes']} bytes ({done['unpacked_bytes']} unpacked); "
        f"left out {', '.join(done['left_out']) or 'nothing'}: {done['left_out_files']} files, "
        f"{done['left_out_bytes']} bytes unpacked (unused files: {done['unused_files']} files, "
        f"{done['unused_bytes']} bytes)",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
