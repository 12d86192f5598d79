"""`python -m jobaware.adapters.htcondor follow|decide|policy|report`: the adapter's commands without the platform's CLI
(which loads every capability, torch included); for a light install beside a schedd. Same functions as
`jobaware hold follow|decide|policy` and `jobaware report holds`."""

import signal
import sys

import typer

from jobaware import cli_contract
from jobaware.adapters.htcondor.commands import (
    decide_command,
    follow_command,
    policy_command,
    report_holds_command,
)

app = typer.Typer(help="The HTCondor adapter: follow event logs, decide holds, act by a stated policy.",
                  no_args_is_help=True, pretty_exceptions_enable=False)
app.command("follow")(follow_command)
app.command("decide")(decide_command)
app.command("policy")(policy_command)
app.command("report")(report_holds_command)

if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # unwind: the position is kept
    sys.exit(cli_contract.run(cli_contract.installed(app), sys.argv[1:], "python -m jobaware.adapters.htcondor"))
