"""What the collector's threads share: answering a Future its caller may have given up on,
taking whatever is waiting as one group, stopping without waiting on a thread that is gone,
giving freed memory back, and a name the operating system shows."""

from __future__ import annotations

import ctypes
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

STOP = object()
"""Put on a queue to stop the thread that takes from it, after what is queued before it."""


def settle(fut: Future[T], value: T | None = None, error: BaseException | None = None) -> None:
    """Answer a Future unless its caller has cancelled it (a gRPC deadline, a closed
    connection); never raises, so no caller can stop the thread that answers."""
    try:
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(value)  # type: ignore[arg-type]
    except InvalidStateError:
        pass  # cancelled: the work was done all the same, only the answer is dropped


def take_group(q: queue.Queue[Any], first: Any, room: Callable[[list[Any]], bool]) -> tuple[list[Any], bool]:
    """``first`` and whatever else is waiting while ``room(group)`` holds, without waiting;
    the second value says whether STOP was taken (stop after this group)."""
    group = [first]
    while room(group):
        try:
            item = q.get_nowait()
        except queue.Empty:
            break
        if item is STOP:
            return group, True
        group.append(item)
    return group, False


def stop(q: queue.Queue[Any], thread: threading.Thread, timeout: float) -> None:
    """Queue STOP behind what is queued and wait up to ``timeout`` for the thread to finish.
    A thread that is gone already is not waited for (its queue may be full forever)."""
    deadline = time.monotonic() + timeout
    while thread.is_alive():
        try:
            q.put(STOP, timeout=0.1)
            break
        except queue.Full:
            continue
    thread.join(max(0.0, deadline - time.monotonic()))


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(None).malloc_trim  # type: ignore[no-any-return]
    except (AttributeError, OSError):  # not glibc (macOS, musl): nothing to call
        return None


_TRIM = _malloc_trim()


def give_back_memory() -> None:
    """Hand the heap's free pages back to the system (glibc's ``malloc_trim``; elsewhere
    nothing). Called once a group of exports is done with: glibc keeps what a group's
    megabytes of exports and rows freed, and the peak of a busy collector grows with it."""
    if _TRIM is not None:
        _TRIM(0)


def arrow_on_malloc() -> None:
    """Have pyarrow allocate from the C library's heap, which Python uses too and
    ``give_back_memory`` trims, instead of its bundled mimalloc pool, which keeps what a
    group's Arrow tables freed. Called by the collector and each derive worker before they
    build a table, and before they start a thread (docs/collector.md, "Memory")."""
    import pyarrow as pa

    few_heap_arenas()
    pa.set_memory_pool(pa.system_memory_pool())


M_ARENA_MAX = -8  # glibc's mallopt parameter (malloc.h)
HEAP_ARENAS = 2


def few_heap_arenas() -> None:
    """Have glibc's malloc keep at most HEAP_ARENAS arenas instead of up to eight per core.
    Every thread that allocates at the same time as another gets an arena of its own, and an
    arena keeps what was freed in it: the collector's intake, appender, writer and feeding
    threads each pass megabytes of exports and rows through theirs. Holds for the arenas
    made after the call (the threads that start after it); elsewhere than glibc, nothing."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):  # not glibc (macOS, musl)
        return
    mallopt(M_ARENA_MAX, HEAP_ARENAS)


def arrow_allocator() -> str:
    """The allocator pyarrow uses in this process: ``system`` once ``arrow_on_malloc`` ran."""
    import pyarrow as pa

    return str(pa.default_memory_pool().backend_name)


OS_NAME_BYTES = 15  # Linux keeps 15 bytes of a thread's name (TASK_COMM_LEN less its NUL)


def name_this_thread(name: str) -> None:
    """Give the calling thread ``name`` in the operating system too, less a ``midtrace-``
    prefix and cut to 15 bytes, so ``top -H``, ``ps -L`` and ``/proc/PID/task/TID/comm``
    tell the collector's threads apart (which one burns the CPU). Linux only; elsewhere,
    or if the kernel refuses, nothing happens."""
    short = name.removeprefix("midtrace-").encode("utf-8")[:OS_NAME_BYTES]
    try:
        Path(f"/proc/self/task/{threading.get_native_id()}/comm").write_bytes(short)
    except (OSError, AttributeError):  # no /proc, or no native thread ids on this platform
        pass


class NamedThread(threading.Thread):
    """A thread that takes its name in the operating system when it starts
    (``name_this_thread``)."""

    def run(self) -> None:
        name_this_thread(self.name)
        super().run()
