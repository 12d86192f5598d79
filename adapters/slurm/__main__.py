"""`python -m adapters.slurm collect|adapt|plugins`: the same commands as `jobaware slurm`, without the rest of the CLI
(a collector beside slurmctld starts fast and loads no model library)."""

import sys

from adapters.slurm.commands import slurm_app
from jobaware.console import err
from jobaware.errors import JobawareError


def main() -> None:
    try:
        slurm_app(prog_name="python -m adapters.slurm")
    except JobawareError as exc:
        err.print(f"error: {exc}", highlight=False, soft_wrap=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
