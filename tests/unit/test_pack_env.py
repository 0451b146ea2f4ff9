"""scripts/pack_env.py (``submit.sh --python-env archive``): the archive of a
virtualenv leaves out pyspark and py4j, pandas and the installers with what
only they require, by their installed RECORD (packages, metadata, scripts
in bin/, bytecode compiled since), and the unused files (tests, bytecode,
headers) of the others, and nothing else."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile

import pytest

from scripts import pack_env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _install(
    site: str, name: str, files: dict[str, str], requires: tuple = (), requested: bool = False
) -> None:
    """A fake installed distribution: ``files`` (relative to site-packages,
    ``../../../bin/x`` for scripts) and a dist-info whose RECORD lists them
    (with ``REQUESTED``, as pip marks a distribution installed by name)."""
    info = f"{name}-1.0.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    files = {**files, f"{info}/METADATA": meta, **({f"{info}/REQUESTED": ""} if requested else {})}
    for rel, text in files.items():
        path = os.path.normpath(os.path.join(site, rel))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    with open(os.path.join(site, info, "RECORD"), "w") as f:
        f.writelines(f"{rel},,\n" for rel in [*files, f"{info}/RECORD"])


@pytest.fixture
def venv(tmp_path):
    prefix = str(tmp_path / "venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", prefix], check=True)
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    site = os.path.join(prefix, "lib", version, "site-packages")
    _install(
        site,
        "pyspark",
        {
            "pyspark/__init__.py": "",
            "pyspark/sql/__init__.py": "",
            "pyspark/jars/big.jar": "x" * 5000,
            "../../../bin/spark-submit": "#!/bin/sh\n",
        },
    )
    # compiled after installing: in no RECORD, left out with its directory
    os.makedirs(os.path.join(site, "pyspark", "__pycache__"))
    with open(os.path.join(site, "pyspark", "__pycache__", "x.pyc"), "w") as f:
        f.write("pyc")
    _install(site, "py4j", {"py4j/__init__.py": ""})
    _install(
        site,
        "numpylike",
        {"numpylike/__init__.py": "", "../../../bin/numpylike": ""},
        requires=("shared>=1", "optional; extra == 'plots'"),
        requested=True,
    )
    # pandas' own dependency goes with it; one numpylike requires, or installed by name, stays
    _install(site, "pandas", {"pandas/__init__.py": ""}, requires=("tzlike", "shared", "numpylike"))
    _install(site, "tzlike", {"tzlike/__init__.py": ""})
    _install(site, "shared", {"shared/__init__.py": ""})
    _install(site, "optional", {"optional/__init__.py": ""})
    return prefix, version


def _members(path: str) -> set[str]:
    with tarfile.open(path) as tar:
        return set(tar.getnames())


def test_the_archive_leaves_out_spark_pandas_and_what_only_pandas_requires(venv, tmp_path):
    pytest.importorskip("venv_pack", reason="venv-pack is not installed (the 'cluster' extra)")
    prefix, version = venv
    out = str(tmp_path / "env.tar.gz")
    done = pack_env.pack(prefix, out, keep=[])
    names = _members(out)
    site = f"lib/{version}/site-packages"
    assert f"{site}/numpylike/__init__.py" in names and "bin/numpylike" in names
    assert f"{site}/shared/__init__.py" in names and f"{site}/optional/__init__.py" in names
    assert "bin/python" in names and "pyvenv.cfg" in names
    gone = ("pyspark", "py4j", "spark-submit", "pandas", "tzlike")
    assert not [n for n in names if any(g in n for g in gone)], names
    assert done["left_out"] == ["pandas", "py4j", "pyspark", "tzlike"], done
    assert done["left_out_files"] == 10 + 2 * 3, done  # pandas, tzlike: module, METADATA, RECORD
    assert done["left_out_bytes"] > 5000 and done["archive_bytes"] == os.path.getsize(out)


def test_unused_files_are_left_out_unless_all_files(venv, tmp_path):
    pytest.importorskip("venv_pack", reason="venv-pack is not installed (the 'cluster' extra)")
    prefix, version = venv
    site = os.path.join(prefix, "lib", version, "site-packages")
    unused = ["numpylike/tests/test_x.py", "numpylike/__pycache__/x.pyc", "numpylike/include/x.h"]
    for rel in [*unused, "numpylike/testing.py"]:
        os.makedirs(os.path.dirname(os.path.join(site, rel)), exist_ok=True)
        with open(os.path.join(site, rel), "w") as f:
            f.write("x" * 100)
    out = str(tmp_path / "env.tar.gz")
    done = pack_env.pack(prefix, out, keep=[])
    names = _members(out)
    assert f"lib/{version}/site-packages/numpylike/testing.py" in names
    assert not [n for n in names if any(n.endswith(u) for u in unused)], names
    assert done["unused_files"] == 3 and done["unused_bytes"] == 300, done
    done = pack_env.pack(prefix, out, keep=[], all_files=True)
    assert all(f"lib/{version}/site-packages/{u}" in _members(out) for u in unused)
    assert done["unused_files"] == 0


def test_keep_packs_a_spark_distribution_anyway(venv, tmp_path):
    pytest.importorskip("venv_pack", reason="venv-pack is not installed (the 'cluster' extra)")
    prefix, version = venv
    out = str(tmp_path / "env.tar.gz")
    pack_env.pack(prefix, out, keep=["PySpark", "pandas"])
    names = _members(out)
    site = f"lib/{version}/site-packages"
    assert f"{site}/pyspark/jars/big.jar" in names and "bin/spark-submit" in names
    assert f"{site}/pandas/__init__.py" in names and f"{site}/tzlike/__init__.py" in names
    assert f"{site}/py4j/__init__.py" not in names


def test_a_directory_shared_with_another_distribution_loses_only_its_files():
    site = os.path.join("lib", "python3.11", "site-packages")
    mine = [os.path.join(site, "ns", "a.py"), os.path.join(site, "pyspark", "x.py")]
    others = {os.path.join(site, "ns", "b.py")}
    assert pack_env.exclude_patterns(mine, others) == [
        os.path.join(site, "ns", "a.py"),
        os.path.join(site, "pyspark") + "/*",
    ]


def test_no_module_of_sparkmaxent_imports_a_scipy_subpackage_the_archive_leaves_out():
    """Importing every sparkmaxent module (and so the scipy modules it
    imports) loads none of ``UNIMPORTED_SCIPY``: an executor never needs one."""
    code = (
        "import importlib, pkgutil, sys, sparkmaxent\n"
        "for m in pkgutil.walk_packages(sparkmaxent.__path__, 'sparkmaxent.'):\n"
        "    if not m.name.endswith('__main__'):\n"
        "        importlib.import_module(m.name)\n"
        "names = {n.split('.')[1] for n in sys.modules if n.startswith('scipy.')}\n"
        "print(' '.join(sorted(names)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(done.stdout.split())
    assert {"optimize", "sparse", "special"} <= loaded, loaded  # the check sees scipy's imports
    assert not loaded & set(pack_env.UNIMPORTED_SCIPY), loaded


def test_the_pattern_for_pyarrows_link_time_copies_spares_its_modules_and_sonames():
    from fnmatch import fnmatch

    site = "lib/python3.11/site-packages/pyarrow/"
    unused = [p for p in pack_env.UNUSED_FILES if "libarrow" in p]
    gone = ["libarrow_python.so", "libarrow_python.so.2600.1.0"]
    kept = ["libarrow_python.so.2600", "libarrow.so.2600", "lib.cpython-311-x86_64-linux-gnu.so"]
    assert all(any(fnmatch(site + f, p) for p in unused) for f in gone)
    assert not [f for f in kept if any(fnmatch(site + f, p) for p in pack_env.UNUSED_FILES)]
