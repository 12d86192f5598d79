import time

import pytest

from jobaware.resource.shell import duration_minutes, looks_like_batch, parse_shell, size_mb

BATCH = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH -n 64
#SBATCH --mem 128G
#SBATCH -t 1-02:00:00
#SBATCH --partition=bigmem
#SBATCH --exclusive
#SBATCH --gres=gpu:2
module load openmpi/4.1 hdf5
export OMP_NUM_THREADS=4
srun -n 64 --cpu-bind=cores python3 -u simulate.py --steps 100 > out.log 2>&1
mpirun -np 32 ./a.out input.dat
wget https://example.org/data.tar.gz && tar xzf data.tar.gz
rsync -av user@host:/data/ ./data/ \\
    --progress
for f in *.h5; do
  h5dump $f > /dev/null
done
python - <<'END'
import numpy as np
a = np.zeros((10000, 10000))
END
python -c "import os; print(os.listdir('.'))" &
#SBATCH --time=5
"""


def parse(text):
    return parse_shell(text, time.monotonic() + 5)


def test_directives_commands_launchers_and_embedded_python():
    script = parse(BATCH)
    assert script.scheduler == "slurm" and script.ignored_directives == 1
    assert script.directives == {"nodes": "2", "ntasks": "64", "mem": "128G", "time": "1-02:00:00",
                                 "partition": "bigmem", "exclusive": "", "gres": "gpu:2"}
    by_program = {c.program: c for c in script.commands}
    assert by_program["python3"].launcher == "srun" and by_program["python3"].launcher_tasks == 64
    assert by_program["a.out"].launcher == "mpirun" and by_program["a.out"].launcher_tasks == 32
    assert by_program["wget"].category == "download" and by_program["tar"].category == "archive"
    assert by_program["rsync"].category == "download" and "--progress" in by_program["rsync"].args
    assert by_program["h5dump"].category == "hdf_netcdf" and by_program["module"].category == "module"
    assert script.python_scripts == ["simulate.py"]
    assert [code for _, code in script.embedded_python] == [
        "import numpy as np\na = np.zeros((10000, 10000))\n", "import os; print(os.listdir('.'))"]
    assert by_program["python"].background is True
    assert script.loops == 1 and script.max_loop_depth == 1 and script.never_ends is None


@pytest.mark.parametrize("body, reason", [
    ("while true; do\n  squeue -u $USER\n  sleep 60\ndone\n", "endless `while` loop"),
    ("while :\ndo\n  date\ndone\n", "endless `while` loop"),
    ("sleep infinity\n", "sleep infinity"),
    ("tail -f run.log\n", "tail -f"),
    ("jupyter lab --no-browser --port 8888\n", "jupyter lab"),
    ("python -m http.server 8000\n", "python -m http.server"),
])
def test_scripts_that_never_end(body, reason):
    assert reason in parse("#!/bin/bash\n#SBATCH -n 1\n" + body).never_ends


@pytest.mark.parametrize("body", [
    "while true; do\n  if [ -f done ]; then break; fi\n  sleep 5\ndone\n",
    "while true; do\n  check || exit 1\ndone\n",
    "while [ $i -lt 10 ]; do i=$((i+1)); done\n",
    "tail -f run.log &\npython x.py\n",
    "for i in 1 2 3; do while true; do break; done; done\n",
])
def test_scripts_that_end(body):
    assert parse("#!/bin/bash\n" + body).never_ends is None


def test_break_of_an_inner_loop_does_not_end_the_outer_one():
    text = "while true; do\n  for f in *; do\n    break\n  done\ndone\n"
    assert parse(text).never_ends is not None


def test_pbs_resources_and_unbalanced_quotes():
    script = parse("#!/bin/sh\n#PBS -l nodes=4:ppn=16,mem=64gb,walltime=12:00:00\necho 'oops\nmpiexec ./x\n")
    assert script.scheduler == "pbs"
    assert script.directives == {"nodes": "4", "ntasks-per-node": "16", "mem": "64G", "time": "12:00:00"}
    assert script.unreadable_lines == 1 and script.commands[-1].launcher == "mpiexec"


def test_sizes_and_durations():
    assert size_mb("4G") == 4096 and size_mb("500") == 500 and size_mb("1T") == 1024**2 and size_mb("x") is None
    assert duration_minutes("90") == 90 and duration_minutes("1:30:00") == 90 and duration_minutes("2-00") == 2880
    assert duration_minutes("1-02:03:04") == pytest.approx(1 * 1440 + 2 * 60 + 3 + 4 / 60)
    assert duration_minutes("UNLIMITED") is None and duration_minutes("soon") is None


def test_kind_detection():
    assert looks_like_batch("#!/bin/bash\necho\n") and looks_like_batch("echo\n#SBATCH -N 1\n")
    assert not looks_like_batch("#!/usr/bin/env python\nimport os\n") and not looks_like_batch("import os\n")


def test_bounded_by_the_deadline():
    script = parse_shell("echo x\n" * 100_000, time.monotonic() - 1)
    assert not script.complete and script.commands == []
