"""The benches' clocks: CPU time of this process (every thread) and of its finished children, beside wall time.

Every ratio a bench prints is CPU time over CPU time measured in the same run: on a shared machine the load
stretches wall time (a run waits for a core) far more than CPU time (what the run itself executes), so a
ratio of wall times measured a minute apart compares loads as much as code. Wall time is printed beside it
for information. Only the latency benches (a server's response time as a browser sees it) report wall time,
which is what they measure by nature.

    with clock() as c:
        work()
    c.cpu_s, c.wall_s  # (the process's threads and the children it waited for, in that block)
"""

from __future__ import annotations

import os
import resource
import time
from contextlib import contextmanager
from dataclasses import dataclass


def self_cpu_s() -> float:
    """CPU seconds (user + system) of this process so far, every thread of it."""
    return time.process_time()


def children_cpu_s() -> float:
    """CPU seconds (user + system) of this process's children that have ended and been waited for (RUSAGE_CHILDREN:
    a subprocess.run's, not a still running Popen's)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def cpu_s() -> float:
    """This process's CPU seconds and its waited-for children's, together."""
    return self_cpu_s() + children_cpu_s()


@dataclass
class Clock:
    """A block's CPU seconds (this process and its waited-for children) and wall seconds; filled when it ends."""

    cpu_s: float = 0.0
    wall_s: float = 0.0


@contextmanager
def clock():
    """Times the block: yields a Clock whose cpu_s and wall_s are set at the block's end."""
    c = Clock()
    c0, w0 = cpu_s(), time.perf_counter()
    try:
        yield c
    finally:
        c.wall_s, c.cpu_s = time.perf_counter() - w0, cpu_s() - c0


def measure(fn, *args, **kw):
    """(fn(*args, **kw), CPU seconds, wall seconds)."""
    with clock() as c:
        out = fn(*args, **kw)
    return out, c.cpu_s, c.wall_s


def ratio_text(cpu_a: float, cpu_b: float, wall_a: float, wall_b: float, digits: int = 2) -> str:
    """`R x (CPU time; wall time W x)`: a over b in CPU time, the wall-time ratio beside it."""
    return f"{cpu_a / cpu_b:.{digits}f} x (CPU time; wall time {wall_a / wall_b:.{digits}f} x)"


def load_text() -> str:
    """The load averages (1, 5, 15 minutes) and the CPUs: what a figure measured here ran beside."""
    return f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs"
