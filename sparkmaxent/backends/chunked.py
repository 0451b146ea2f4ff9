"""A cached block's pickle cut into chunks on its way into the JVM, and the
serializer that joins them again on the executors' Python workers.

The cache builder (``spark._pickled_blocks``) writes each block as one
header row (``MAGIC`` and the pickle's length) followed by rows of at most
``chunk_bytes`` of the pickle, in order (a partition's rows keep their
order: no shuffle follows). The JVM caches those rows as byte arrays
(``spark.pickled_block_rdd``); ``ChunkedPickles`` reads a partition's
arrays and gives one block per header. A whole block in one row would make
the JVM hold, per block being cached, a row buffer grown to twice the
pickle and a copy of it besides the Arrow batch it came in: transient
copies of a few hundred megabytes that the heap grows to hold. Chunks keep
those copies a few megabytes each; the cached bytes and the blocks are the
same.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator

from pyspark.serializers import FramedSerializer, SpecialLengths, read_int

MAGIC = b"sparkmaxent-block-chunks:"

#: largest piece of a pickled block per cached row
CACHE_CHUNK_BYTES = 1 << 22


def chunk_rows(data: bytes, chunk_bytes: int) -> Iterator[memoryview | bytes]:
    """The rows of one pickled block: the header, then ``data`` in slices of
    at most ``chunk_bytes`` (views, no copy)."""
    if chunk_bytes < 1:
        raise ValueError(f"expected chunk_bytes >= 1, got {chunk_bytes}")
    yield MAGIC + len(data).to_bytes(8, "little")
    view = memoryview(data)
    for start in range(0, len(data), chunk_bytes):
        yield view[start : start + chunk_bytes]


def _read_into(stream, view: memoryview) -> None:
    """Fill ``view`` from ``stream`` (a short read means the data ended)."""
    done = 0
    while done < len(view):
        n = stream.readinto(view[done:])
        if not n:
            raise EOFError("a cached block ended before its length")
        done += n


class ChunkedPickles(FramedSerializer):
    """Reads framed byte arrays written as ``chunk_rows`` (a header, then the
    chunks) and yields each block unpickled. Reading only: the RDD it reads
    is the JVM's."""

    def load_stream(self, stream):
        while True:
            length = read_int_or_end(stream)
            if length is None:
                return
            header = stream.read(length)
            if not header.startswith(MAGIC) or len(header) != len(MAGIC) + 8:
                raise ValueError("expected a cached block's header row")
            buffer = bytearray(int.from_bytes(header[len(MAGIC) :], "little"))
            view, done = memoryview(buffer), 0
            while done < len(buffer):
                n = read_int(stream)
                _read_into(stream, view[done : done + n])
                done += n
            del view
            yield pickle.loads(buffer)

    def dumps(self, obj):
        raise NotImplementedError("ChunkedPickles reads the JVM's cached rows only")

    def loads(self, obj):
        raise NotImplementedError("ChunkedPickles reads whole streams (load_stream)")


def read_int_or_end(stream) -> int | None:
    """The next frame's length, None at the end of the partition's data."""
    try:
        length = read_int(stream)
    except EOFError:
        return None
    return None if length == SpecialLengths.END_OF_DATA_SECTION else length
