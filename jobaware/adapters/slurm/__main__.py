"""`python -m jobaware.adapters.slurm collect|adapt|plugins|doctor`: the same commands as `jobaware slurm`, without the
rest of the CLI (a collector beside slurmctld starts fast and loads no model library)."""

import sys

from jobaware import cli_contract
from jobaware.adapters.slurm.commands import slurm_app


def main() -> None:
    sys.exit(cli_contract.run(cli_contract.installed(slurm_app), sys.argv[1:], "python -m jobaware.adapters.slurm"))


if __name__ == "__main__":
    main()
