"""A cached block's pickle cut into chunks on its way into the JVM, and the
serializer that joins them again on the executors' Python workers.

The cache builder (``spark._pickled_blocks``) pickles each block with
protocol 5 and its arrays out of band (``pickle_frames``: the pickle's
head, then each array's own bytes, no copy of them) and writes one header
row (``MAGIC``, the number of frames and each one's length) followed by
each frame in rows of at most ``chunk_bytes``, in order (a partition's rows
keep their order: no shuffle follows). The JVM caches those rows as byte
arrays (``spark.pickled_block_rdd``); ``ChunkedPickles`` reads a
partition's arrays, each frame into a buffer of its own, and gives one
block per header, its arrays over those buffers (no copy either). A whole
block in one row would make the JVM hold, per block being cached, a row
buffer grown to twice the pickle and a copy of it besides the Arrow batch
it came in: transient copies of a few hundred megabytes that the heap grows
to hold. Chunks keep those copies a few megabytes each; the frames keep the
Python workers from holding a block's pickle beside the block (the builder
while it writes the block, each pass's worker while it reads it); the
cached bytes are the block's arrays and a small head, and the blocks are
the same.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator

from pyspark.serializers import FramedSerializer, SpecialLengths, read_int

MAGIC = b"sparkmaxent-block-frames:"

#: largest piece of a pickled block per cached row: below half of G1's
#: smallest heap region (1 MiB), so that no chunk is a humongous object.
#: G1 gives each of those whole regions of its own outside the young
#: generation, and the local JVM's heap grew by hundreds of megabytes of
#: them while the blocks were cached (the scale benchmark's JVM peak)
CACHE_CHUNK_BYTES = 1 << 18

_LEN = 8  # bytes of each count and length in the header, little-endian


def pickle_frames(obj: object) -> list[bytes | memoryview]:
    """``obj`` pickled with protocol 5, its contiguous arrays out of band:
    the pickle's head, then each out-of-band buffer as a view of the
    array's own memory (no copy). ``unpickle_frames`` joins them again."""
    buffers: list[pickle.PickleBuffer] = []
    head = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    return [head, *(b.raw() for b in buffers)]


def unpickle_frames(frames: list) -> object:
    """The object ``pickle_frames`` cut into ``frames`` (its arrays over the
    frames' memory, not copied)."""
    return pickle.loads(frames[0], buffers=frames[1:])


def chunk_rows(frames: list[bytes | memoryview], chunk_bytes: int) -> Iterator[memoryview | bytes]:
    """The rows of one pickled block (``pickle_frames``): the header (the
    number of frames and each one's length), then each frame in slices of
    at most ``chunk_bytes`` (views, no copy; a slice never spans two
    frames, an empty frame has none)."""
    if chunk_bytes < 1:
        raise ValueError(f"expected chunk_bytes >= 1, got {chunk_bytes}")
    views = [memoryview(f).cast("B") for f in frames]
    sizes = [len(frames), *(len(v) for v in views)]
    yield MAGIC + b"".join(n.to_bytes(_LEN, "little") for n in sizes)
    for view in views:
        for start in range(0, len(view), chunk_bytes):
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
            frames = [_read_frame(stream, size) for size in _frame_sizes(stream.read(length))]
            block = unpickle_frames(frames)
            del frames  # the block's arrays hold the buffers they need
            yield block
            del block  # not held while the next block is read

    def dumps(self, obj):
        raise NotImplementedError("ChunkedPickles reads the JVM's cached rows only")

    def loads(self, obj):
        raise NotImplementedError("ChunkedPickles reads whole streams (load_stream)")


def _frame_sizes(header: bytes) -> list[int]:
    """The frames' lengths a header row gives (``chunk_rows``)."""
    body = header[len(MAGIC) :]
    n = int.from_bytes(body[:_LEN], "little") if header.startswith(MAGIC) else -1
    if n < 1 or len(body) != _LEN * (n + 1):
        raise ValueError("expected a cached block's header row")
    return [int.from_bytes(body[i : i + _LEN], "little") for i in range(_LEN, len(body), _LEN)]


def _read_frame(stream, size: int) -> bytearray:
    """One frame of ``size`` bytes, from the chunk rows that follow."""
    buffer = bytearray(size)
    view, done = memoryview(buffer), 0
    while done < size:
        n = read_int(stream)
        if n > size - done:
            raise ValueError("a cached block's chunk runs past its frame")
        _read_into(stream, view[done : done + n])
        done += n
    del view
    return buffer


def read_int_or_end(stream) -> int | None:
    """The next frame's length, None at the end of the partition's data."""
    try:
        length = read_int(stream)
    except EOFError:
        return None
    return None if length == SpecialLengths.END_OF_DATA_SECTION else length
