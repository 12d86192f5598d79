"""Progress inside a long step, as lines on its standard output that whoever runs the step reads.

A pipeline step runs in its own process (kfp.local, or a pod on Kubeflow); its output goes to the run's log. A step
that loops (boosting iterations, epochs, folds, trials) says how far it is with `Progress`: one line
`jobaware-progress: <done>/<total> <unit>` at most every `every` seconds, and one at the end. `jobaware pipeline run`
(pipelines/runner.py) turns the lines into the step's progress and an estimate of the time left; on a cluster they
are plain lines in the step's log.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
import time
from collections.abc import Iterator

MARK = "jobaware-progress:"
_listening = False
LINE = re.compile(r"jobaware-progress: (\d+)/(\d+) (.+)$")


class Progress:
    """`advance(n)` as the work gets done; `total` units in all (`unit`: "iterations", "epochs", "folds" ...)."""

    def __init__(self, total: int, unit: str, every: float = 1.0):
        self.total, self.unit, self.every = max(int(total), 1), unit, every
        self.done, self._said = 0, 0.0
        self._say()

    def advance(self, n: int = 1) -> None:
        self.done = min(self.done + n, self.total)
        if self.done == self.total or time.monotonic() - self._said >= self.every:
            self._say()

    def _say(self) -> None:
        self._said = time.monotonic()
        print(f"{MARK} {self.done}/{self.total} {self.unit}", file=sys.stdout, flush=True)


def parse(line: str) -> tuple[int, int, str] | None:
    """(done, total, unit) of a progress line, else None."""
    match = LINE.search(line)
    return (int(match.group(1)), int(match.group(2)), match.group(3).strip()) if match else None


@contextlib.contextmanager
def from_prints(pattern: str, unit: str) -> Iterator[None]:
    """Within the block, lines a library prints on standard output that match `pattern` (its first two groups: done,
    total; scikit-learn's boosting rounds print `[12/300] ...` at `verbose=2`) become progress lines; other lines pass."""
    regex, real, reporter = re.compile(pattern), sys.stdout, None

    class Lines(io.TextIOBase):
        pending = ""

        def write(self, text: str) -> int:
            nonlocal reporter
            *whole, self.pending = (self.pending + text).split("\n")
            for line in whole:
                if match := regex.search(line):
                    done, total = int(match.group(1)), int(match.group(2))
                    reporter = reporter or Progress(total, unit)
                    reporter.advance(done - reporter.done)
                else:
                    real.write(line + "\n")
            return len(text)

        def flush(self) -> None:
            real.flush()

    global _listening
    lines = Lines()
    sys.stdout, _listening = lines, True
    try:
        yield
    finally:
        if lines.pending:
            real.write(lines.pending)
        sys.stdout, _listening = real, False


def listening() -> bool:
    """Whether a `from_prints` block is turning printed rounds into progress (a library's `verbose` may be on)."""
    return _listening
