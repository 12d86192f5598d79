"""Run a benchmark target in a fresh process, so that its peak resident memory is its own."""

from __future__ import annotations

import multiprocessing as mp
import queue as queue_module
from pathlib import Path


def peak_mib() -> float:
    """This process's peak resident memory (Linux VmHWM)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _child(target, args, queue):
    result = target(*args)
    result["peak_mib"] = peak_mib()
    queue.put(result)


def measure(target, *args) -> dict:
    """Run target(*args) in a fresh process; its result with its peak memory (an error if it dies)."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    process = ctx.Process(target=_child, args=(target, args, queue))
    process.start()
    while True:
        try:
            result = queue.get(timeout=5)
            break
        except queue_module.Empty:
            if not process.is_alive():
                raise RuntimeError(f"{target.__name__} died (exit code {process.exitcode})") from None
    process.join()
    return result
