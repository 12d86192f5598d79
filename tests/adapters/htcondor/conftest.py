"""Real events to write (taken from the real logs in jobaware/data/real/condor), and the adapter's runner."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CONDOR = ROOT / "jobaware" / "data" / "real" / "condor"
REAL_LOGS = [CONDOR / "mldag_ospool_pretraining.dag.nodes.log", CONDOR / "mldag_metl_aws.log",
             *sorted((CONDOR / "mldag_standalone").glob("*.log"))]
ADAPTER = [sys.executable, "-m", "jobaware.adapters.htcondor"]


def real_events(path: Path = CONDOR / "mldag_standalone" / "metl_12634462.log") -> list[bytes]:
    """The events of a real log, each with its `...` line."""
    text = path.read_bytes()
    return [m.group(0) for m in re.finditer(rb"^\d{3} \(.*?^\.\.\.\n", text, re.MULTILINE | re.DOTALL)]


def holds_of(events: list[bytes]) -> list[bytes]:
    return [e for e in events if e.startswith(b"012 ")]
