"""Packed files: how a file is written where only DataFrame writers reach
(a remote file system under Spark Connect, ``connect.py``).

A packed file ``path`` is a directory holding one Parquet part file of one
row whose only column, :data:`COLUMN`, holds the file's bytes: what
``spark.createDataFrame([(data,)], SCHEMA).coalesce(1).write.parquet(path)``
writes (with Spark's ``_SUCCESS`` and ``.crc`` side files). Every file
system of ``storage`` reads one as the file it packs, so a model a Connect
client saved on ``s3a://`` loads in a classic session too.
"""

from __future__ import annotations

from ..errors import InputError

#: the one column of a packed file's Parquet part
COLUMN = "sparkmaxent_file"
#: its schema, as ``createDataFrame`` takes it
SCHEMA = f"{COLUMN} binary"


def unpack(parquet: bytes, path: str) -> bytes:
    """The bytes packed in one Parquet part file of the packed file
    ``path``; InputError naming ``path`` when it holds no packed file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(parquet))
    except (pa.ArrowException, ValueError, OSError) as e:
        raise InputError(f"{path}: cannot read it as a packed file: {e}") from None
    return unpack_table(table, path)


def unpack_table(table, path: str) -> bytes:
    """The bytes of a packed file read as an Arrow ``table``."""
    if table.column_names != [COLUMN] or table.num_rows != 1:
        raise InputError(
            f"{path}: a directory, expected a file (or a packed file: one row of the "
            f"column {COLUMN}; it has the columns {table.column_names}, {table.num_rows} rows)"
        )
    return bytes(table.column(COLUMN)[0].as_py())


def is_packed(names: list[str]) -> bool:
    """Whether a directory whose entries are ``names`` may be a packed
    file: one Parquet part file (and Spark's hidden side files)."""
    visible = [n for n in names if not n.startswith((".", "_"))]
    return len(visible) == 1 and visible[0].startswith("part-") and visible[0].endswith(".parquet")
