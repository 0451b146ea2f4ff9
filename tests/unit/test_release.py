"""Giving freed memory back (backends/release.py): glibc's malloc_trim in
the Python workers, a full collection of a local master's JVM."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

from sparkmaxent.backends.release import _malloc_trim, collect_local_jvm

glibc = pytest.mark.skipif(_malloc_trim() is None, reason="glibc's malloc_trim only")


@glibc
def test_freed_heap_memory_goes_back_to_the_system():
    """200 MB of heap chunks freed between live ones stay resident (glibc
    keeps them in its heap) until release_memory gives them back."""
    script = textwrap.dedent(
        """
        import ctypes
        from sparkmaxent.backends.release import release_memory

        libc = ctypes.CDLL("libc.so.6")
        libc.malloc.restype, libc.free.argtypes = ctypes.c_void_p, [ctypes.c_void_p]

        def rss():
            with open("/proc/self/status") as f:
                return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:")) / 1024

        freed, kept = [], []
        for _ in range(3200):  # 64 KiB: below the mmap threshold, on the heap
            freed.append(libc.malloc(64 << 10))
            ctypes.memset(freed[-1], 1, 64 << 10)
            kept.append(libc.malloc(1024))  # between them: no free chunk at the top
        for p in freed:
            libc.free(p)
        before = rss()
        released = release_memory()
        print(before - rss(), released)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    freed, released = out.stdout.split()
    assert released == "True"
    assert float(freed) > 150


class FakeSystem:
    def __init__(self):
        self.collections = 0

    def gc(self):
        self.collections += 1


class FakeContext:
    def __init__(self, master: str):
        self.master = master
        self.system = FakeSystem()
        lang = SimpleNamespace(System=self.system)
        self._jvm = SimpleNamespace(java=SimpleNamespace(lang=lang))


@pytest.mark.parametrize(
    "master, collected",
    [("local[2]", True), ("local", True), ("spark://host:7077", False), ("yarn", False)],
)
def test_the_jvm_is_collected_only_when_it_is_the_local_executor(master, collected):
    sc = FakeContext(master)
    assert collect_local_jvm(sc) is collected
    assert sc.system.collections == int(collected)
