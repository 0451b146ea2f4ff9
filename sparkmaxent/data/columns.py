"""Feature columns of Spark tables as (names, values) pairs.

A table's features may come as ``array<string>`` (binary predicates, with an
optional aligned ``array<double>`` values column), ``map<string,double>``
(predicate name -> value) or a pyspark.ml ``Vector`` (index -> value; the
predicate's name is the index as a string, so a ``CountVectorizer``'s output
is usable as it is). ``prepare_table`` and the pyspark.ml models both read
features through :func:`names_and_values`, so every kind means the same in
training and in scoring.
"""

from __future__ import annotations

import numpy as np

from .readers import InputError

ARRAY, MAP, VECTOR = "array<string>", "map<string,double>", "vector"
KINDS = (ARRAY, MAP, VECTOR)


def feature_kind(df, where: str, features_col: str) -> str:
    """The kind of ``features_col`` in ``df``'s schema (one of :data:`KINDS`).

    Raises
    ------
    InputError
        The column is missing (the columns present are listed) or of another
        type; ``where`` names the table in the message.
    """
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql.types import ArrayType, MapType, NumericType, StringType

    fields = {f.name: f.dataType for f in df.schema.fields}
    if features_col not in fields:
        raise InputError(
            f"{where}: expected a features column named {features_col!r}, got columns "
            f"{list(fields)}"
        )
    ftype = fields[features_col]
    if isinstance(ftype, ArrayType) and isinstance(ftype.elementType, StringType):
        return ARRAY
    if (
        isinstance(ftype, MapType)
        and isinstance(ftype.keyType, StringType)
        and isinstance(ftype.valueType, NumericType)
    ):
        return MAP
    if isinstance(ftype, VectorUDT):
        return VECTOR
    raise InputError(
        f"{where}: expected column {features_col!r} of type array<string>, "
        f"map<string,double> or vector, got {ftype.simpleString()}"
    )


def names_and_values(df, where: str, features_col: str, values_col: str | None = None):
    """(``array<string>`` names, ``array<double>`` values) column expressions
    for the features of ``df``.

    ``values_col`` (aligned ``array<double>``) is allowed with an
    ``array<string>`` features column only; without it every value is 1.0.
    Nulls and non-finite values are left for the caller's value checks.

    Raises
    ------
    InputError
        As :func:`feature_kind`; a values column with a map or vector features
        column, or a values column that is missing or not a numeric array.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, NumericType

    kind = feature_kind(df, where, features_col)
    col = F.col(features_col)
    if values_col is not None:
        if kind != ARRAY:
            raise InputError(
                f"{where}: a values column ({values_col!r}) goes with an array<string> "
                f"features column; {features_col!r} is a {kind} and carries its own values"
            )
        fields = {f.name: f.dataType for f in df.schema.fields}
        vtype = fields.get(values_col)
        if vtype is None:
            raise InputError(
                f"{where}: expected a values column named {values_col!r}, got columns "
                f"{list(fields)}"
            )
        if not (isinstance(vtype, ArrayType) and isinstance(vtype.elementType, NumericType)):
            raise InputError(
                f"{where}: expected column {values_col!r} of type array<double>, "
                f"got {vtype.simpleString()}"
            )
        return col, F.col(values_col).cast("array<double>")
    if kind == ARRAY:
        return col, F.transform(col, lambda _: F.lit(1.0))
    if kind == MAP:
        return F.map_keys(col), F.map_values(col).cast("array<double>")
    pairs = _vector_pairs(col)
    return pairs.getField("names"), pairs.getField("values")


def _vector_pairs(col):
    """A struct (names, values) of a Vector column's stored entries (a dense
    vector's non-zero ones)."""
    from pyspark.ml.linalg import SparseVector
    from pyspark.sql import functions as F

    # Row-based, not Arrow: Spark's Arrow UDF input cannot hold a UDT column
    # read from a columnar source such as Parquet (UNSUPPORTED_DATATYPE).
    @F.udf("struct<names: array<string>, values: array<double>>", useArrow=False)
    def pairs(v):
        if v is None:
            return None
        if isinstance(v, SparseVector):
            index, values = v.indices, v.values
        else:
            dense = v.toArray()
            index = np.flatnonzero(dense)
            values = dense[index]
        return ([str(int(i)) for i in index], [float(x) for x in values])

    return pairs(col)


__all__ = ["ARRAY", "MAP", "VECTOR", "KINDS", "feature_kind", "names_and_values"]
