"""Which files and parser options a prepare run reads, resolved on the driver.

Patterns (files, directories, globs) become a sorted list of URIs through
Hadoop's FileSystem, so the names match what Spark's ``binaryFile`` reports;
option strings from a command line become the types the format declares.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from .readers import InputError, format_spec


def _has_scheme(path: str) -> bool:
    head, sep, _ = path.partition("://")
    return bool(sep) and head.isalpha()


def _hidden(name: str) -> bool:
    # Spark's own convention: _SUCCESS, .crc and _temporary are not data.
    return name.startswith((".", "_"))


def expand_inputs(spark, inputs: Iterable[str]) -> list[str]:
    """Files named by ``inputs`` (files, directories, globs), sorted, as
    fully qualified URIs (``file:/...``, ``hdfs://...``).

    Directories are listed recursively, and directories and globs skip
    hidden files (names starting with ``.`` or ``_``, Spark's convention); a
    file named explicitly is always read. Listing goes through Hadoop's FileSystem, so the
    names match what Spark's ``binaryFile`` source reports.

    Raises
    ------
    InputError
        If no input is given, or a pattern matches no file.
    """
    inputs = [inputs] if isinstance(inputs, str) else list(inputs)
    if not inputs:
        raise InputError("expected at least one input file, directory or glob, got none")
    from ..session_kind import is_connect

    list_files = _server_lister(spark) if is_connect(spark) else _hadoop_lister(spark)
    found: set[str] = set()
    for pattern in inputs:
        if not _has_scheme(pattern):
            pattern_q = os.path.abspath(os.path.expanduser(pattern))
        else:
            pattern_q = pattern
        matched = list_files(pattern_q, any(c in pattern for c in "*?[{"))
        if not matched:
            raise InputError(
                f"expected input files, got nothing matching {pattern!r}"
                + (f" (looked for {pattern_q})" if pattern_q != pattern else "")
            )
        found.update(matched)
    return sorted(found)


def _hadoop_lister(spark):
    """``list(pattern, is_glob) -> files`` through the driver's Hadoop
    FileSystem (a classic session)."""
    jvm = spark._jvm
    hconf = spark._jsc.hadoopConfiguration()

    def list_files(pattern: str, is_glob: bool) -> list[str]:
        jpath = jvm.org.apache.hadoop.fs.Path(pattern)
        fs = jpath.getFileSystem(hconf)
        matched: list[str] = []
        for st in fs.globStatus(jpath) or []:
            if st.isDirectory():
                it = fs.listFiles(st.getPath(), True)
                while it.hasNext():
                    f = it.next()
                    rel = f.getPath().toString()[len(st.getPath().toString()) :]
                    if f.isFile() and not any(_hidden(p) for p in rel.split("/") if p):
                        matched.append(f.getPath().toString())
            elif not (is_glob and _hidden(st.getPath().getName())):
                matched.append(st.getPath().toString())
        return matched

    return list_files


def _server_lister(spark):
    """``list(pattern, is_glob) -> files`` under Spark Connect (no ``_jvm`` on
    the client): the server lists them, as the ``binaryFile`` source it
    reads them with (recursively, hidden files skipped, contents not read)."""

    def list_files(pattern: str, is_glob: bool) -> list[str]:
        reader = spark.read.format("binaryFile").option("recursiveFileLookup", "true")
        try:
            rows = reader.load(pattern).select("path").collect()
        except Exception as e:  # AnalysisException: PATH_NOT_FOUND
            if "PATH_NOT_FOUND" in str(e) or "does not exist" in str(e):
                return []
            raise
        return [str(row[0]) for row in rows]

    return list_files


def display_path(uri: str) -> str:
    """``file:/a/b`` -> ``/a/b``; other URIs as they are."""
    if uri.startswith("file://"):
        return uri[len("file://") :]
    if uri.startswith("file:"):
        return uri[len("file:") :]
    return uri


def resolve_options(fmt: str, options: dict | None) -> dict:
    """The parser options of ``fmt``: its declared defaults updated by
    ``options``; string values are converted to the type of the default
    (so ``lowercase=false`` from a command line is False, not a true string).

    Raises
    ------
    InputError
        For an unknown format, or an option the format does not declare
        (when it declares any).
    """
    spec = format_spec(fmt)
    given = dict(options or {})
    if spec.options:
        unknown = sorted(set(given) - set(spec.options))
        if unknown:
            raise InputError(
                f"unknown option(s) {unknown} for format {fmt!r}: expected "
                f"some of {sorted(spec.options)}"
            )
    resolved = dict(spec.options)
    for key, value in given.items():
        default = spec.options.get(key)
        if isinstance(value, str) and default is not None and not isinstance(default, str):
            value = _coerce(fmt, key, value, type(default))
        resolved[key] = value
    return resolved


def _coerce(fmt: str, key: str, value: str, kind: type) -> Any:
    if kind is bool:
        low = value.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise InputError(f"option {key} of format {fmt!r}: expected true or false, got {value!r}")
    try:
        return kind(value)
    except ValueError:
        raise InputError(
            f"option {key} of format {fmt!r}: expected a {kind.__name__}, got {value!r}"
        ) from None


__all__ = ["expand_inputs", "display_path", "resolve_options"]
