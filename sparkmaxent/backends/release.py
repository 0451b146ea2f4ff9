"""Executor memory around the cached blocks: freed memory given back to the
operating system, one pool of Python workers.

A worker that built cached blocks (or ran a pass) frees its arrays, but the
allocators keep the pages: glibc's malloc keeps freed heap memory below the
top of each arena (and, once a large block was freed, serves later
temporaries of up to 32 MiB from the heap rather than by ``mmap``), and
pyarrow's memory pool keeps freed Arrow buffers. On an executor the workers
stay alive between tasks (``spark.python.worker.reuse``), so what one task
freed stays resident beside the cached blocks. ``release_memory`` hands it
back: the Arrow pool's unused memory (when pyarrow is loaded), then
``malloc_trim(0)`` (glibc only; elsewhere nothing). ``share_worker_pool``
has the workers that build the blocks run the passes too.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import sys

logger = logging.getLogger(__name__)


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim``, or None (not Linux, or another C library)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # musl and others have no malloc_trim
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def release_memory() -> bool:
    """Return this process's freed memory to the operating system (see the
    module docstring). True when glibc's ``malloc_trim`` ran and gave back
    some memory; False when it gave none back or is not available."""
    arrow = sys.modules.get("pyarrow")
    if arrow is not None:
        try:
            arrow.default_memory_pool().release_unused()
        except Exception as e:  # an old pyarrow, or a pool without it
            logger.debug("the Arrow pool released nothing: %s", e)
    trim = _malloc_trim()
    return bool(trim(0)) if trim is not None else False


def collect_local_jvm(sc) -> bool:
    """With a local master (the driver's JVM is the executor), run a full
    garbage collection there, so the heap the JVM grew for the events'
    transient copies while the blocks were cached (the Parquet scan, the
    shuffle of a repartition, the Arrow batches to and from the Python
    workers) is given back before the passes instead of staying resident
    beside the workers: a full collection shrinks the heap to
    ``-XX:MaxHeapFreeRatio`` (the local default, ``session.LOCAL_JVM_CONF``).
    With a cluster's master nothing is done (the executors' JVMs are
    elsewhere). True when it ran."""
    from .session import is_local_master

    if not is_local_master(sc.master):
        return False
    sc._jvm.java.lang.System.gc()
    return True


SIMPLIFIED_TRACEBACK = "spark.sql.execution.pyspark.udf.simplifiedTraceback.enabled"


def share_worker_pool(spark) -> bool:
    """Give the passes' Python functions (RDD tasks) the environment Spark's
    SQL runner gives the ``mapInArrow`` that builds the blocks, so both take
    their workers from one pool. Spark keeps a pool of Python workers (a
    daemon and the workers it forks) per interpreter and environment, and
    its SQL runner adds ``SPARK_SIMPLIFIED_TRACEBACK=1`` while
    ``SIMPLIFIED_TRACEBACK`` is on (the default), which an RDD's runner does
    not: two pools, and the workers that built the blocks stay resident,
    idle, beside the ones that run the passes until Spark's idle timeout.
    One pool's workers build the blocks, give back what that freed
    (``release_memory``) and run the passes. The variable only trims
    pyspark's own frames from a failed task's traceback, as it does for SQL
    functions. True when it was set."""
    if str(spark.conf.get(SIMPLIFIED_TRACEBACK, "true")).lower() != "true":
        return False
    spark.sparkContext.environment["SPARK_SIMPLIFIED_TRACEBACK"] = "1"
    return True
