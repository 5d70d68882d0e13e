"""CPU pressure (``/proc/pressure/cpu``): the machine is shared."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path


def stall_seconds() -> float | None:
    """Seconds all tasks have stalled for CPU so far (/proc/pressure/cpu, some total)."""
    try:
        line = Path("/proc/pressure/cpu").read_text().splitlines()[0]
        return int(line.split("total=")[1]) / 1e6
    except (OSError, IndexError, ValueError):
        return None


def pressure_since(stall: float | None, seconds: float) -> float | None:
    """The CPU pressure (% of the time some task waited for a CPU) since ``stall``."""
    now = stall_seconds()
    return None if stall is None or now is None or seconds <= 0 else round(100 * (now - stall) / seconds, 1)


def pressure_now() -> str:
    """The CPU pressure of the last 10 s (some avg10), e.g. ``'3.2 %'``."""
    try:
        line = Path("/proc/pressure/cpu").read_text().splitlines()[0]
        return line.split()[1].split("=")[1] + " %"
    except (OSError, IndexError):
        return "n/a"


@contextlib.contextmanager
def busy(processes: int):
    """``processes`` other programs that keep a CPU busy each (a Python loop, at normal
    priority) while the block runs: a machine under load, as a shared one often is."""
    spin = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    try:
        yield
    finally:
        for p in spin:
            p.kill()
            p.wait()
