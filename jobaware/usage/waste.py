"""`jobaware report waste`: where a cluster's node-hours went unused, per user, account or partition.

For each group over a period (the jobs that finished, by submit time): the node-hours used; the node-hours left
idle (allocated CPUs not busy: node-hours x (1 - CPU efficiency)); the node-hours of failed jobs (FAILED,
OUT_OF_MEMORY, NODE_FAIL, BOOT_FAIL) and of timed-out ones; the node-hours of time limit asked but not used (what
backfill had to plan around); the GiB-hours of memory asked but not used; and what the recommendations would have
released: the node-hours of time limit had every job asked for the values its own use suggests
(`measures.next_request`), and, per card part that can tell (`released_node_hours` of its `after`), had the jobs
asked what that part recommended. `wasted` = the failed and timed-out jobs' node-hours plus the others' idle ones.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from jobaware.store import JobStore
from jobaware.usage.jobs import Afters, Filters, finished, said
from jobaware.usage.measures import FAILED, TIMED_OUT, efficiencies, next_request


@dataclass
class Group:
    name: str
    jobs: int = 0
    unaccounted: int = 0
    node_hours: float = 0.0
    cpu_hours: float = 0.0
    cpu_time_hours: float = 0.0
    idle_node_hours: float = 0.0
    failed_node_hours: float = 0.0
    timeout_node_hours: float = 0.0
    unused_limit_node_hours: float = 0.0
    unused_memory_gib_hours: float = 0.0
    released_by_use: float = 0.0
    released_by: dict = field(default_factory=lambda: defaultdict(float))

    def add(self, happened: dict, beside: list[dict]) -> None:
        measured = efficiencies(happened)
        self.jobs += 1
        self.unaccounted += not happened["accounted"]
        hours = measured["node_hours"] or 0.0
        self.node_hours += hours
        if measured["cpu_eff"] is not None:
            self.cpu_hours += measured["cpu_hours"]
            self.cpu_time_hours += happened["cpu_time_s"] / 3600
        if happened["state"] in FAILED:
            self.failed_node_hours += hours
        elif happened["state"] in TIMED_OUT:
            self.timeout_node_hours += hours
        elif measured["cpu_eff"] is not None:
            self.idle_node_hours += hours * (1 - min(measured["cpu_eff"], 1.0))
        self.unused_limit_node_hours += measured["unused_time_node_hours"] or 0.0
        self.unused_memory_gib_hours += measured["unused_mem_gib_hours"] or 0.0
        wanted = next_request(happened)
        if wanted["time_s"] is not None and happened["time_limit_s"]:
            self.released_by_use += (happened["nodes"] or 1) * (happened["time_limit_s"] - wanted["time_s"]) / 3600
        for item in beside:
            if item.get("released_node_hours") is not None:
                self.released_by[item["part"]] += item["released_node_hours"]

    @property
    def wasted(self) -> float:
        return self.failed_node_hours + self.timeout_node_hours + self.idle_node_hours

    def row(self, by: str) -> dict:
        return {by: self.name, "jobs": self.jobs, "node_hours": self.node_hours,
                "cpu_eff": self.cpu_time_hours / self.cpu_hours if self.cpu_hours else None,
                "wasted": self.wasted, "idle": self.idle_node_hours, "failed": self.failed_node_hours,
                "timeout": self.timeout_node_hours, "unused_limit": self.unused_limit_node_hours,
                "unused_memory": self.unused_memory_gib_hours, "released_by_use": self.released_by_use,
                "released_by": dict(self.released_by), "unaccounted": self.unaccounted}


def waste(store: JobStore, filters: Filters, by: str = "user", advance=lambda n: None) -> tuple[list[dict], dict]:
    """(one row per group, largest `wasted` first; the totals as one row) over the jobs `filters` keep."""
    groups: dict[str, Group] = {}
    total, afters = Group("all"), Afters()
    for happened, predictions in finished(store, filters):
        advance(1)
        if happened is None:
            continue
        beside = said(predictions, happened, afters) if predictions else []
        name = happened.get(by) or "(none)"
        groups.setdefault(name, Group(name)).add(happened, beside)
        total.add(happened, beside)
    rows = sorted((group.row(by) for group in groups.values()), key=lambda r: (-r["wasted"], r[by]))
    return rows, total.row(by)
