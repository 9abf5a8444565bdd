"""The collector caps glibc's malloc arenas (collector/storage/threads.py, few_heap_arenas):
counted with glibc's own malloc_info, in a fresh process whose threads allocate at once."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import pytest

from midtrace.collector.storage.threads import HEAP_ARENAS

THREADS = 8

ARENAS = f"""
import ctypes, sys, tempfile, threading
from midtrace.collector.storage.threads import few_heap_arenas
if sys.argv[1] == "capped":
    few_heap_arenas()
start, done = threading.Barrier({THREADS}), threading.Barrier({THREADS})
def work():
    start.wait()
    kept = [bytearray(200_000) for _ in range(20)]  # past pymalloc: from malloc
    done.wait()
threads = [threading.Thread(target=work) for _ in range({THREADS})]
for t in threads:
    t.start()
for t in threads:
    t.join()
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
with tempfile.NamedTemporaryFile(suffix=".xml") as f:
    fp = ctypes.c_void_p(libc.fopen(f.name.encode(), b"w"))
    libc.malloc_info(0, fp)
    libc.fclose(fp)
    print(open(f.name).read().count("<heap nr="))
"""


def _arenas(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", ARENAS, mode], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout)


def test_threads_share_few_arenas_once_capped() -> None:
    if not hasattr(ctypes.CDLL(None), "malloc_info"):
        pytest.skip("not glibc: malloc keeps its own arenas and the cap is not set")
    free = _arenas("free")
    assert free > HEAP_ARENAS, f"{THREADS} threads made only {free} arenas uncapped"
    assert _arenas("capped") <= HEAP_ARENAS
