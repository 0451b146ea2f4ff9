"""scripts/pack_env.py (``submit.sh --python-env archive``): the archive of a
virtualenv leaves out pyspark and py4j, by their installed RECORD (packages,
metadata, scripts in bin/, bytecode compiled since), and nothing else."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile

import pytest

from scripts import pack_env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _install(site: str, name: str, files: dict[str, str]) -> None:
    """A fake installed distribution: ``files`` (relative to site-packages,
    ``../../../bin/x`` for scripts) and a dist-info whose RECORD lists them."""
    info = f"{name}-1.0.dist-info"
    files = {**files, f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"}
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
    _install(site, "numpylike", {"numpylike/__init__.py": "", "../../../bin/numpylike": ""})
    return prefix, version


def _members(path: str) -> set[str]:
    with tarfile.open(path) as tar:
        return set(tar.getnames())


def test_the_archive_leaves_out_pyspark_and_py4j_only(venv, tmp_path):
    pytest.importorskip("venv_pack", reason="venv-pack is not installed (the 'cluster' extra)")
    prefix, version = venv
    out = str(tmp_path / "env.tar.gz")
    done = pack_env.pack(prefix, out, keep=[])
    names = _members(out)
    site = f"lib/{version}/site-packages"
    assert f"{site}/numpylike/__init__.py" in names and "bin/numpylike" in names
    assert "bin/python" in names and "pyvenv.cfg" in names
    assert not [n for n in names if "pyspark" in n or "py4j" in n or "spark-submit" in n], names
    assert done["left_out"] == ["pyspark", "py4j"] and done["left_out_files"] == 10, done
    assert done["left_out_bytes"] > 5000 and done["archive_bytes"] == os.path.getsize(out)


def test_keep_packs_a_spark_distribution_anyway(venv, tmp_path):
    pytest.importorskip("venv_pack", reason="venv-pack is not installed (the 'cluster' extra)")
    prefix, version = venv
    out = str(tmp_path / "env.tar.gz")
    pack_env.pack(prefix, out, keep=["PySpark"])
    names = _members(out)
    site = f"lib/{version}/site-packages"
    assert f"{site}/pyspark/jars/big.jar" in names and "bin/spark-submit" in names
    assert f"{site}/py4j/__init__.py" not in names


def test_a_directory_shared_with_another_distribution_loses_only_its_files():
    site = os.path.join("lib", "python3.11", "site-packages")
    mine = [os.path.join(site, "ns", "a.py"), os.path.join(site, "pyspark", "x.py")]
    others = {os.path.join(site, "ns", "b.py")}
    assert pack_env.exclude_patterns(mine, others) == [
        os.path.join(site, "ns", "a.py"),
        os.path.join(site, "pyspark") + "/*",
    ]
