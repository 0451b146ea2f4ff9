"""Table inputs: which columns hold what, reading a table through any
``spark.read`` source (or the catalog), and preparing text or a table alike.

A format that is not a text reader of ``readers.FORMATS`` names a Spark
data source (``parquet``, ``orc``, ``json``, ``delta``, ``avro``, ...) whose
files ``spark.read.format(fmt).load`` reads, or ``table`` for a table of
the session's catalog. Paths are Hadoop URIs or bare paths (qualified as
every other path is, through ``storage``). The command line, the pipeline
job and the Python API all prepare inputs through :func:`prepare_input`.
"""

from __future__ import annotations

from typing import Any

from .. import storage
from .options import PrepareOptions, TableColumns
from .readers import FORMATS, InputError
from .schema import DatasetInfo

CATALOG = "table"  # the format of a catalog table: the input is its name
#: the sources Spark ships (others, such as delta or avro, need a package)
BUILT_IN_SOURCES = ("parquet", "orc", "json", "csv", CATALOG)


def is_table_format(fmt: str) -> bool:
    """Whether ``fmt`` names a Spark source rather than a text reader."""
    return fmt not in FORMATS and fmt != "synthetic"


def load_table(spark, fmt: str, inputs: list[str], options: dict | None = None):
    """The DataFrame of a catalog table (``fmt`` "table": ``inputs`` is one
    name) or of the files ``inputs`` read by the Spark source ``fmt`` with
    ``options`` (``spark.read`` options, e.g. mergeSchema).

    Raises
    ------
    InputError
        No input, a missing path, several catalog names, or a source the
        session lacks (for delta: how to add it).
    """
    if not inputs:
        raise InputError(f"--format {fmt}: expected at least one input, got none")
    if fmt == CATALOG:
        if len(inputs) != 1 or options:
            raise InputError(
                f"--format {CATALOG}: expected one catalog table name and no options, "
                f"got {inputs} and {sorted(options or {})}"
            )
        if not spark.catalog.tableExists(inputs[0]):
            raise InputError(
                f"expected a table named {inputs[0]!r} in the Spark catalog, found none"
            )
        return spark.table(inputs[0])
    paths = [storage.qualify(p) for p in inputs]
    for given, path in zip(inputs, paths):
        if not any(c in given for c in "*?[{") and not storage.exists(path):
            raise InputError(f"--format {fmt}: expected an input at {given}, found none")
    _check_source(spark, fmt)
    return spark.read.format(fmt).options(**dict(options or {})).load(paths)


def _check_source(spark, fmt: str) -> None:
    """InputError when the session has no data source named ``fmt``."""
    if fmt in BUILT_IN_SOURCES:
        return
    try:
        spark._jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
            fmt, spark._jsparkSession.sessionState().conf()
        )
    except Exception as e:  # py4j's Py4JJavaError, or pyspark's AnalysisException
        text = str(e)
        if not any(s in text for s in ("DATA_SOURCE_NOT", "ClassNotFound", "find data source")):
            raise
        if fmt == "delta":
            hint = (
                "; add Delta Lake to the session, e.g. spark-submit --packages "
                f"io.delta:delta-spark_2.13:<the release for Spark {spark.version}> --conf "
                "spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension --conf "
                "spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog"
                " (or the same settings in the config's [spark] conf table)"
            )
        elif "\n" not in text.strip():  # pyspark's own message: Spark says what to do
            hint = f" ({text.strip()})"
        else:
            hint = " (a package of the session must provide it, e.g. spark-submit --packages)"
        raise InputError(
            f"unknown input format {fmt!r}: expected a text format {sorted(FORMATS)} or a "
            f"Spark data source; this Spark {spark.version} session has no source named "
            f"{fmt!r}{hint}"
        ) from None


def prepare_input(
    spark,
    inputs: list[str],
    out_dir: str,
    fmt: str,
    *,
    columns: TableColumns | None = None,
    options: dict | None = None,
    settings: PrepareOptions | None = None,
    **keywords: Any,
) -> DatasetInfo:
    """Prepare text files (``prepare``) or a table (``prepare_table``, or
    ``prepare_candidate_table`` when ``columns.group`` is set) with
    ``settings`` (``options.PrepareOptions``; ``keywords``, its field names,
    set over it). ``options`` are the reader's options: a text parser's, or
    ``spark.read``'s for a table.

    Raises
    ------
    InputError
        As the function it calls; a table with ``quarantine``; table columns
        given for text input.
    """
    from .prepare import prepare, prepare_candidate_table, prepare_table, with_keywords

    s = with_keywords(settings, keywords)
    if not is_table_format(fmt):
        if columns is not None and columns != TableColumns():
            raise InputError(
                f"--format {fmt} reads text: column options (--label-col, ...) are for tables"
            )
        return prepare(spark, inputs, out_dir, fmt, options=options, settings=s)
    if s.quarantine:
        raise InputError(f"--format {fmt}: --quarantine is for text formats; tables are checked")
    storage.refuse_existing_output(out_dir, s.overwrite, "output directory", s.lock_stale_s)
    cols = columns or TableColumns()
    paths = [inputs] if isinstance(inputs, str) else list(inputs)
    table = (load_table(spark, fmt, paths, options), ", ".join(paths))  # named in messages
    if cols.group is not None:
        return prepare_candidate_table(
            spark,
            table,
            out_dir,
            group_col=cols.group,
            features_col=cols.features,
            correct_col=cols.correct,
            weight_col=cols.weight,
            values_col=cols.values,
            key_col=cols.key,
            settings=s,
        )
    return prepare_table(
        spark,
        table,
        out_dir,
        label_col=cols.label or None,
        features_col=cols.features,
        weight_col=cols.weight,
        values_col=cols.values,
        key_col=cols.key,
        settings=s,
    )


__all__ = [
    "CATALOG",
    "TableColumns",
    "is_table_format",
    "load_table",
    "prepare_input",
]
