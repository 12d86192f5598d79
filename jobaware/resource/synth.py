"""Generate labelled job scripts in the real layout: `labels.csv` (file,class,stored_as, LF) and
`files/<name>.txt`, with the ground truth beside them in `synthetic_truth.csv`
(file, class, not_a_job, kind, recipe, variant) — which also marks the folder as generated for `ingest`.

Each script comes from a recipe of its class, in Python or as a Slurm batch script, with randomised names,
sizes, structure and shared noise (argument parsing, logging, timing, plotting, comments, a main guard), so
that no single token gives the class away:
- cpu: number theory loops, N-body / ODE integration, Monte Carlo, dense linear algebra, recursion,
  a process pool over a compute kernel; batch: many tasks per node running a solver.
- mem: huge arrays and matrices, dictionaries and lists grown in loops, big DataFrame joins, caches;
  batch: `--mem` in hundreds of GB or a bigmem partition.
- network: HTTP crawls, REST calls, database clients, sockets, S3 transfers, MPI exchanges over many nodes;
  batch: downloads and remote copies, MPI across nodes.
- io: file walks and copies, CSV / HDF5 / NetCDF / NumPy / pickle reading and writing, compression;
  batch: staging data with cp / rsync / tar, HDF5 and NetCDF tools.
- other: configuration modules, template strings, a library of definitions with nothing run.
- not a job (any class by what it touches, `not_a_job` true in the truth): servers (`serve_forever`, Flask,
  asyncio `run_forever`, `while True` receive loops), endless monitors; batch: `while true` loops,
  `sleep infinity`, a notebook server.
Variants (a few percent each): CRLF line ends, Python 2 syntax, a Latin-1 comment (non-UTF-8 bytes).
"""

from __future__ import annotations

import csv
import json
import re
import textwrap
from pathlib import Path

import numpy as np

from jobaware.errors import InputError
from jobaware.resource.schema import TRUTH_FILE

CLASS_SHARES = {"cpu": 0.40, "mem": 0.18, "network": 0.17, "io": 0.15, "other": 0.04, "not_a_job": 0.06}
SHELL_SHARE = 0.25
VARIANT_SHARES = {"crlf": 0.05, "py2": 0.04, "latin1": 0.03}
_NOUNS = ["data", "grid", "field", "cells", "items", "records", "samples", "values", "points", "rows", "frames",
          "events", "particles", "matrix", "table", "results", "chunk", "batch", "series", "nodes"]
_VERBS = ["compute", "process", "run", "step", "update", "build", "collect", "analyse", "handle", "load_all"]


class _Writer:
    """Random choices of one script."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def pick(self, options):
        return options[int(self.rng.integers(len(options)))]

    def name(self) -> str:
        return self.pick(_NOUNS) + self.pick(["", "_a", "_b", "2", "_list", "_all", "_tmp"])

    def func(self) -> str:
        return self.pick(_VERBS) + "_" + self.pick(_NOUNS)

    def n(self, low: int, high: int) -> int:
        return int(self.rng.integers(low, high))

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)


_NOISE = [
    ("import time", "start = time.time()\n"),
    ("import sys", "print('starting', sys.argv)\n"),
    ("import logging", "logging.basicConfig(level=logging.INFO)\nlog = logging.getLogger(__name__)\n"),
    ("import argparse", "parser = argparse.ArgumentParser()\nparser.add_argument('--seed', type=int, default=0)\n"
                        "args, _ = parser.parse_known_args()\n"),
    ("import os", "OUT = os.environ.get('OUT', '.')\n"),
    ("", "VERBOSE = False\n"),
    ("", "# TODO: tune the parameters below\n"),
    ("import matplotlib.pyplot as plt", "plt.figure()\n"),
]


def _noise(w: _Writer) -> tuple[str, str]:
    """Imports and statements any class may carry."""
    chosen = [_NOISE[i] for i in sorted(w.rng.permutation(len(_NOISE))[: w.n(0, 4)])]
    imports = sorted({i for i, _ in chosen if i} | ({w.pick(["import math", "import random", "import json"])}
                                                  if w.chance(0.4) else set()))
    doc = ""
    if w.chance(0.5):
        doc = f'"""{w.pick(["Batch job", "Analysis script", "Run for the paper", "Job script"])} {w.n(1, 99)}."""\n'
    return doc + "".join(f"{i}\n" for i in imports), "".join(code for _, code in chosen)


def _wrap(w: _Writer, header: str, setup: str, body: str, tail: str = "") -> str:
    """Header, optional noise, then the body run at module level, in a main() or under a main guard."""
    body = textwrap.dedent(body).strip("\n") + "\n"
    style = w.pick(["module", "main", "guard"])
    noise_imports, noise_code = _noise(w)
    text = noise_imports + header + "\n\n" + noise_code + textwrap.dedent(setup).strip("\n") + "\n\n"
    if style == "module":
        text += body
    else:
        text += "def main():\n" + textwrap.indent(body, "    ") + "\n"
        text += "if __name__ == '__main__':\n    main()\n" if style == "guard" else "main()\n"
    return text + textwrap.dedent(tail)


# ---------------------------------------------------------------- Python recipes per class


def _cpu(w: _Writer) -> tuple[str, str]:
    recipe = w.pick(["primes", "nbody", "montecarlo", "linalg", "recursion", "pool", "collatz", "rk4"])
    n, f, x = w.n(1_000, 2_000_000), w.func(), w.name()
    if recipe == "primes":
        return recipe, _wrap(w, "", f"""
            def {f}(limit):
                found = []
                for k in range(2, limit):
                    is_prime = True
                    for d in range(2, int(k ** 0.5) + 1):
                        if k % d == 0:
                            is_prime = False
                            break
                    if is_prime:
                        found.append(k)
                return found
            """, f"{x} = {f}({n})\nprint(len({x}), sum({x}))\n")
    if recipe == "nbody":
        steps = w.n(100, 100_000)
        return recipe, _wrap(w, "import numpy as np", f"""
            G = 6.674e-11
            def {f}(pos, vel, mass, dt):
                acc = np.zeros_like(pos)
                for i in range(len(mass)):
                    for j in range(len(mass)):
                        if i != j:
                            r = pos[j] - pos[i]
                            acc[i] += G * mass[j] * r / np.linalg.norm(r) ** 3
                return pos + vel * dt, vel + acc * dt
            """, f"""
            pos = np.random.rand({w.n(3, 200)}, 3)
            vel = np.zeros_like(pos)
            mass = np.ones(len(pos)) * 1e24
            for step in range({steps}):
                pos, vel = {f}(pos, vel, mass, {w.pick(['0.01', '1e-3', '60.0'])})
            print(pos.mean(axis=0))
            """)
    if recipe == "montecarlo":
        return recipe, _wrap(w, "import random", "", f"""
            inside = 0
            for trial in range({n}):
                a, b = random.random(), random.random()
                if a * a + b * b <= 1.0:
                    inside += 1
            print('pi ~', 4.0 * inside / {n})
            """)
    if recipe == "linalg":
        size = w.n(50, 800)
        return recipe, _wrap(w, "import numpy as np\nfrom numpy import linalg", "", f"""
            {x} = np.random.randn({size}, {size})
            for it in range({w.n(5, 500)}):
                {x} = np.dot({x}, {x}.T) / {size}
                vals = linalg.eigvalsh({x})
                {x} = {x} + np.eye({size}) * vals.max()
            print(np.trace({x}))
            """)
    if recipe == "recursion":
        return recipe, _wrap(w, "", f"""
            def {f}(k):
                if k < 2:
                    return k
                return {f}(k - 1) + {f}(k - 2)
            """, f"for i in range({w.n(20, 36)}):\n    print(i, {f}(i))\n")
    if recipe == "pool":
        return recipe, _wrap(w, "from multiprocessing import Pool\nimport math", f"""
            def {f}(k):
                total = 0.0
                for j in range(1, {w.n(1000, 100000)}):
                    total += math.sin(k * j) / j
                return total
            """, f"""
            with Pool({w.pick([4, 8, 16, 32])}) as pool:
                {x} = pool.map({f}, range({w.n(100, 10000)}))
            print(max({x}))
            """)
    if recipe == "collatz":
        return recipe, _wrap(w, "", "", f"""
            longest, best = 0, 0
            for start in range(1, {n}):
                k, steps = start, 0
                while k != 1:
                    k = k // 2 if k % 2 == 0 else 3 * k + 1
                    steps += 1
                if steps > longest:
                    longest, best = steps, start
            print(best, longest)
            """)
    return "rk4", _wrap(w, "import numpy as np", f"""
        def deriv(t, y):
            return np.array([y[1], -{w.pick(['9.81', '4.0', 'omega ** 2'])} * np.sin(y[0])])
        omega = {w.n(1, 9)}
        def {f}(t, y, h):
            k1 = deriv(t, y)
            k2 = deriv(t + h / 2, y + h * k1 / 2)
            k3 = deriv(t + h / 2, y + h * k2 / 2)
            k4 = deriv(t + h, y + h * k3)
            return y + h * (k1 + 2 * k2 + 2 * k3 + k4) / 6
        """, f"""
        y, t = np.array([1.0, 0.0]), 0.0
        for step in range({w.n(10_000, 5_000_000)}):
            y = {f}(t, y, 1e-3)
            t += 1e-3
        print(t, y)
        """)


def _mem(w: _Writer) -> tuple[str, str]:
    recipe = w.pick(["bigarray", "dictgrow", "pandas", "cache", "readall", "sortbig"])
    x, f = w.name(), w.func()
    if recipe == "bigarray":
        a, b = w.n(20_000, 100_000), w.n(10_000, 60_000)
        return recipe, _wrap(w, "import numpy as np", "", f"""
            {x} = np.zeros(({a}, {b}), dtype=np.float64)
            other = np.ones(({a}, {b}))
            {x} += other * 2
            copy = {x}.copy()
            print(copy.nbytes / 1e9, 'GB')
            """)
    if recipe == "dictgrow":
        return recipe, _wrap(w, "from collections import defaultdict", "", f"""
            {x} = defaultdict(list)
            seen = {{}}
            for i in range({w.n(10_000_000, 500_000_000)}):
                key = (i % {w.n(1000, 100000)}, i // 7)
                {x}[key].append(i)
                seen[i] = str(i) * {w.n(2, 20)}
            print(len({x}), len(seen))
            """)
    if recipe == "pandas":
        return recipe, _wrap(w, "import pandas as pd\nimport numpy as np", "", f"""
            left = pd.DataFrame({{'key': np.arange({w.n(10**6, 10**8)}), 'a': np.random.rand({w.n(10**6, 10**8)})}})
            right = pd.DataFrame({{'key': np.arange({w.n(10**6, 10**8)}), 'b': np.random.rand({w.n(10**6, 10**8)})}})
            {x} = left.merge(right, on='key', how='outer')
            wide = {x}.pivot_table(index='key', values=['a', 'b'])
            print(wide.memory_usage(deep=True).sum())
            """)
    if recipe == "cache":
        return recipe, _wrap(w, "import copy", f"""
            {x} = {{}}
            def {f}(k):
                if k not in {x}:
                    {x}[k] = [j * j for j in range(k % {w.n(1000, 20000)})]
                return {x}[k]
            """, f"""
            snapshots = []
            for i in range({w.n(100_000, 5_000_000)}):
                snapshots.append(copy.deepcopy({f}(i)))
            print(len(snapshots))
            """)
    if recipe == "readall":
        return recipe, _wrap(w, "", "", f"""
            lines = open('{w.name()}.{w.pick(['txt', 'csv', 'log'])}').readlines()
            {x} = [line.split(',') for line in lines]
            table = {{}}
            for row in {x}:
                table.setdefault(row[0], []).extend(row[1:])
            everything = sorted(table.items(), key=lambda kv: len(kv[1]))
            print(len(everything))
            """)
    return "sortbig", _wrap(w, "import random", "", f"""
        {x} = [random.random() for _ in range({w.n(10**7, 10**9)})]
        {x}.sort()
        pairs = list(zip({x}, {x}[1:]))
        print(len(pairs))
        """)


def _network(w: _Writer) -> tuple[str, str]:
    recipe = w.pick(["crawl", "rest", "mysql", "socket", "s3", "mpi", "smtp", "urllib"])
    x, f = w.name(), w.func()
    host = w.pick(["example.org", "api.example.com", "data.example.net", "10.0.0.12"])
    if recipe == "crawl":
        return recipe, _wrap(w, "import requests\nfrom bs4 import BeautifulSoup", "", f"""
            {x} = ['https://{host}/page/%d' % i for i in range({w.n(100, 50000)})]
            for url in {x}:
                response = requests.get(url, timeout=30)
                soup = BeautifulSoup(response.text, 'html.parser')
                links = [a.get('href') for a in soup.find_all('a')]
                print(url, len(links))
            """)
    if recipe == "rest":
        return recipe, _wrap(w, "import requests", f"""
            def {f}(item):
                r = requests.post('https://{host}/v1/items', json=item)
                r.raise_for_status()
                return r.json()
            """, f"for i in range({w.n(100, 100000)}):\n    {f}({{'id': i}})\n")
    if recipe == "mysql":
        return recipe, _wrap(w, "import pymysql", "", f"""
            db = pymysql.connect(host='{host}', user='REDACTED_USER', passwd='REDACTED', db='{w.name()}')
            cursor = db.cursor()
            cursor.execute("SELECT id, value FROM {w.name()} WHERE value > %s", ({w.n(0, 100)},))
            for row in cursor.fetchall():
                cursor.execute("UPDATE totals SET n = n + 1 WHERE id = %s", (row[0],))
            db.commit()
            db.close()
            """)
    if recipe == "socket":
        return recipe, _wrap(w, "import socket", "", f"""
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.connect(('{host}', {w.n(1024, 65000)}))
            for chunk in range({w.n(100, 100000)}):
                s.sendall(b'x' * {w.pick([1024, 4096, 65536])})
                reply = s.recv(4096)
            s.close()
            """)
    if recipe == "s3":
        return recipe, _wrap(w, "import boto3", "", f"""
            s3 = boto3.client('s3')
            for key in ['{w.name()}/%05d.dat' % i for i in range({w.n(10, 5000)})]:
                s3.download_file('{w.name()}-bucket', key, '/tmp/x')
                s3.upload_file('/tmp/x', '{w.name()}-out', key)
            """)
    if recipe == "mpi":
        return recipe, _wrap(w, "from mpi4py import MPI\nimport numpy as np", "", f"""
            comm = MPI.COMM_WORLD
            rank, size = comm.Get_rank(), comm.Get_size()
            {x} = np.ones({w.n(10**5, 10**7)}) * rank
            for it in range({w.n(100, 10000)}):
                total = comm.allreduce({x}.sum(), op=MPI.SUM)
                comm.Bcast({x}, root=0)
                halo = comm.sendrecv({x}[-100:], dest=(rank + 1) % size, source=(rank - 1) % size)
            print(rank, total)
            """)
    if recipe == "smtp":
        return recipe, _wrap(w, "import smtplib\nfrom email.mime.text import MIMEText", "", f"""
            server = smtplib.SMTP('{host}', 587)
            for person in range({w.n(10, 5000)}):
                message = MIMEText('Hello %d' % person)
                server.sendmail('me@{host}', 'user%d@{host}' % person, message.as_string())
            server.quit()
            """)
    return "urllib", _wrap(w, "import urllib.request\nimport json", "", f"""
        for page in range({w.n(10, 10000)}):
            with urllib.request.urlopen('https://{host}/api?page=%d' % page) as response:
                {x} = json.loads(response.read())
            print(page, len({x}))
        """)


def _io(w: _Writer) -> tuple[str, str]:
    recipe = w.pick(["csv", "hdf5", "netcdf", "npsave", "walkcopy", "pickle", "gzip", "pandasio"])
    x = w.name()
    folder = w.pick(["/scratch/run", "data", "/project/out", "./results"])
    if recipe == "csv":
        return recipe, _wrap(w, "import csv", "", f"""
            with open('{x}.csv') as src, open('{x}_clean.csv', 'w') as dst:
                reader = csv.reader(src)
                writer = csv.writer(dst)
                for row in reader:
                    if row and row[0]:
                        writer.writerow([c.strip() for c in row])
            """)
    if recipe == "hdf5":
        return recipe, _wrap(w, "import h5py\nimport numpy as np", "", f"""
            with h5py.File('{folder}/{x}.h5', 'r') as src, h5py.File('{folder}/{x}_out.h5', 'w') as dst:
                for name in src.keys():
                    block = src[name][()]
                    dst.create_dataset(name, data=block, compression='gzip')
            """)
    if recipe == "netcdf":
        return recipe, _wrap(w, "from netCDF4 import Dataset", "", f"""
            for year in range({w.n(1950, 2000)}, {w.n(2001, 2024)}):
                ds = Dataset('{folder}/{x}_%d.nc' % year)
                temperature = ds.variables['{w.pick(['tas', 'pr', 'temp', 'sst'])}'][:]
                ds.close()
                with open('{folder}/summary.txt', 'a') as out:
                    out.write('%d %f\\n' % (year, temperature.mean()))
            """)
    if recipe == "npsave":
        return recipe, _wrap(w, "import numpy as np\nimport glob", "", f"""
            for path in sorted(glob.glob('{folder}/*.npy')):
                {x} = np.load(path)
                np.save(path.replace('.npy', '_scaled.npy'), {x} * 0.5)
                np.savetxt(path + '.txt', {x}[:10])
            """)
    if recipe == "walkcopy":
        return recipe, _wrap(w, "import os\nimport shutil", "", f"""
            for root, dirs, files in os.walk('{folder}'):
                for name in files:
                    source = os.path.join(root, name)
                    if os.path.getsize(source) > {w.n(0, 10**6)}:
                        shutil.copy(source, '/archive/' + name)
            """)
    if recipe == "pickle":
        return recipe, _wrap(w, "import pickle", "", f"""
            for part in range({w.n(10, 2000)}):
                with open('{folder}/{x}_%04d.pkl' % part, 'rb') as handle:
                    chunk = pickle.load(handle)
                with open('{folder}/{x}_merged.pkl', 'ab') as out:
                    pickle.dump(chunk, out)
            """)
    if recipe == "gzip":
        return recipe, _wrap(w, "import gzip\nimport shutil\nimport glob", "", f"""
            for path in glob.glob('{folder}/*.{w.pick(['log', 'txt', 'dat'])}'):
                with open(path, 'rb') as src, gzip.open(path + '.gz', 'wb') as dst:
                    shutil.copyfileobj(src, dst)
            """)
    return "pandasio", _wrap(w, "import pandas as pd", "", f"""
        for number, chunk in enumerate(pd.read_csv('{folder}/{x}.csv', chunksize={w.n(1000, 10**6)})):
            chunk.to_parquet('{folder}/{x}_%03d.parquet' % number)
            chunk.describe().to_csv('{folder}/stats_%03d.csv' % number)
        """)


def _other(w: _Writer) -> tuple[str, str]:
    recipe = w.pick(["config", "template", "library"])
    if recipe == "config":
        entries = "\n".join(f"    '{w.name()}': {w.pick([repr(w.name()), str(w.n(1, 100)), 'True', 'None'])},"
                            for _ in range(w.n(3, 12)))
        return recipe, f"CONFIG = {{\n{entries}\n}}\nSITES = {[w.name() for _ in range(w.n(1, 4))]}\n"
    if recipe == "template":
        return recipe, f'TEMPLATE = """#!/bin/bash\nmodule load {w.name()}\n$command\n"""\nNAME = "{w.name()}"\n'
    f, g = w.func(), w.func()
    return "library", f'"""Helpers."""\n\n\ndef {f}(a, b):\n    return a + b\n\n\ndef {g}(x):\n    return [x]\n'


def _not_a_job(w: _Writer) -> tuple[str, str, str]:
    recipe = w.pick(["socketserver", "flask", "asyncio", "udp_loop", "monitor", "httpserver"])
    port = w.n(1024, 65000)
    if recipe == "socketserver":
        return "network", recipe, _wrap(w, "import socketserver", """
            class Handler(socketserver.BaseRequestHandler):
                def handle(self):
                    data = self.request.recv(1024)
                    self.request.sendall(data.upper())
            """, f"server = socketserver.TCPServer(('0.0.0.0', {port}), Handler)\nserver.serve_forever()\n")
    if recipe == "flask":
        return "network", recipe, _wrap(w, "from flask import Flask, jsonify", """
            app = Flask(__name__)
            @app.route('/status')
            def status():
                return jsonify(ok=True)
            """, f"app.run(host='0.0.0.0', port={port})\n")
    if recipe == "asyncio":
        return "network", recipe, _wrap(w, "import asyncio", """
            async def handle(reader, writer):
                data = await reader.read(100)
                writer.write(data)
                await writer.drain()
            """, f"""
            loop = asyncio.get_event_loop()
            loop.run_until_complete(asyncio.start_server(handle, '0.0.0.0', {port}))
            loop.run_forever()
            """)
    if recipe == "udp_loop":
        return "network", recipe, _wrap(w, "import socket", "", f"""
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.bind(('', {port}))
            while True:
                message, address = sock.recvfrom(1024)
                sock.sendto(message.upper(), address)
            """)
    if recipe == "monitor":
        return w.pick(["io", "cpu"]), recipe, _wrap(w, "import os\nimport time", "", f"""
            while True:
                usage = os.statvfs('/scratch')
                print(time.ctime(), usage.f_bavail)
                time.sleep({w.n(5, 600)})
            """)
    return "network", recipe, _wrap(w, "import http.server", "", f"""
        handler = http.server.SimpleHTTPRequestHandler
        httpd = http.server.HTTPServer(('', {port}), handler)
        httpd.serve_forever()
        """)


# ---------------------------------------------------------------- batch scripts


def _sbatch(w: _Writer, directives: dict[str, str]) -> str:
    lines = ["#!/bin/bash"]
    lines += [f"#SBATCH --job-name={w.name()}"]
    for key, value in directives.items():
        lines.append(f"#SBATCH --{key}" if value == "" else f"#SBATCH --{key}={value}")
    lines.append(f"#SBATCH --output={w.name()}_%j.out")
    if w.chance(0.5):
        lines.append(f"#SBATCH --account={w.pick(['proj01', 'hpc-lab', 'abc123'])}")
    lines.append("")
    if w.chance(0.6):
        lines.append(f"module load {w.pick(['python/3.11', 'anaconda3', 'gcc/12.2 openmpi/4.1', 'intel'])}")
    if w.chance(0.3):
        lines.append(f"source activate {w.name()}")
    lines.append(f"cd {w.pick(['$SLURM_SUBMIT_DIR', '/scratch/$USER/run', '$HOME/project'])}")
    return "\n".join(lines) + "\n"


def _hours(w: _Writer) -> str:
    return w.pick(["00:30:00", "02:00:00", "12:00:00", "1-00:00:00", "2-12:00:00", "48:00:00"])


def _shell(w: _Writer, label: str) -> tuple[str, str]:
    if label == "cpu":
        tasks = w.pick([16, 32, 36, 48, 64, 128])
        head = _sbatch(w, {"nodes": "1", "ntasks": str(tasks), "cpus-per-task": str(w.pick([1, 2, 4])),
                           "time": _hours(w), "partition": w.pick(["standard", "compute", "short"])})
        body = w.pick([f"srun ./{w.pick(['solver', 'md_sim', 'a.out', 'lmp_mpi'])} -in {w.name()}.in\n",
                       f"export OMP_NUM_THREADS={w.pick([4, 8, 16])}\n"
                       f"srun python {w.func()}.py --steps {w.n(10**4, 10**7)}\n",
                       "python - <<'EOF'\nimport numpy as np\nfor i in range(1000):\n"
                       "    a = np.random.rand(500, 500)\n    np.linalg.eigvals(a @ a.T)\nEOF\n"])
        return "batch_cpu", head + body
    if label == "mem":
        head = _sbatch(w, {"nodes": "1", "ntasks": "1", "cpus-per-task": str(w.pick([1, 2, 4])),
                           "mem": w.pick(["256G", "512G", "750G", "1T", "180G"]), "time": _hours(w),
                           "partition": w.pick(["bigmem", "largemem", "highmem", "standard"])})
        body = w.pick([f"python {w.func()}.py --in-memory --size {w.n(10**8, 10**10)}\n",
                       f"srun {w.pick(['velvet', 'spades.py', 'trinity', 'Rscript analysis.R'])} {w.name()}\n",
                       "python - <<'EOF'\nimport numpy as np\na = np.zeros((100000, 100000))\nb = a.copy()\nEOF\n"])
        return "batch_mem", head + body
    if label == "network":
        nodes = w.pick([8, 16, 32, 64])
        head = _sbatch(w, {"nodes": str(nodes), "ntasks-per-node": str(w.pick([16, 32, 48])), "time": _hours(w)})
        body = w.pick([
            f"mpirun -np {nodes * 32} ./{w.pick(['alltoall_bench', 'fft3d', 'halo_exchange'])} {w.n(1, 99)}\n",
            f"wget -q https://{w.pick(['data.example.org', 'ftp.example.net'])}/{w.name()}.tar.gz\n"
            f"curl -sO https://example.org/{w.name()}.csv\n",
            f"rsync -av {w.pick(['user', 'me'])}@{w.pick(['dtn.example.edu', 'remote.example.org'])}"
            f":/data/{w.name()}/ ./in/\n"
            f"aws s3 cp s3://{w.name()}-bucket/ ./in/ --recursive\n",
        ])
        return "batch_network", head + body
    if label == "io":
        head = _sbatch(w, {"nodes": "1", "ntasks": "1", "time": _hours(w),
                           "partition": w.pick(["bigscratch", "standard", "transfer"])})
        body = w.pick([
            f"cp -r /project/{w.name()} /scratch/$USER/\n"
            f"tar czf /archive/{w.name()}.tar.gz /scratch/$USER/{w.name()}\n",
            f"for f in /scratch/$USER/*.nc; do\n  ncks -v {w.pick(['tas', 'pr'])} $f ${{f%.nc}}_sub.nc\ndone\n",
            "h5repack -f GZIP=6 in.h5 out.h5\n"
            f"dd if=/dev/zero of=/scratch/$USER/test bs=1M count={w.n(1000, 100000)}\n",
        ])
        return "batch_io", head + body
    if label == "other":
        return "batch_other", _sbatch(w, {"ntasks": "1", "time": "00:05:00"}) + "echo $SLURM_JOB_ID\nhostname\ndate\n"
    body = w.pick([
        f"while true; do\n  squeue -u $USER >> queue.log\n  sleep {w.n(10, 600)}\ndone\n",
        f"jupyter lab --no-browser --port={w.n(8000, 9999)} --ip=0.0.0.0\n",
        f"python {w.func()}.py &\nsleep infinity\n",
    ])
    return "batch_not_a_job", _sbatch(w, {"ntasks": "1", "time": _hours(w)}) + body


def _variant(w: _Writer, text: str, kind: str) -> tuple[str, bytes]:
    roll = w.rng.random()
    if kind == "python" and roll < VARIANT_SHARES["py2"]:
        statements = re.sub(r"^(\s*)print\((.*)\)\s*$", r"\1print \2", text, flags=re.MULTILINE)
        return "py2", ("print 'job started'\n" + statements).encode("utf-8")
    roll -= VARIANT_SHARES["py2"]
    if roll < VARIANT_SHARES["crlf"]:
        return "crlf", text.replace("\n", "\r\n").encode("utf-8")
    roll -= VARIANT_SHARES["crlf"]
    if roll < VARIANT_SHARES["latin1"]:
        return "latin1", ("# auteur: Jos\xe9 M\xfcller\n" + text).encode("latin-1", errors="replace")
    return "plain", text.encode("utf-8")


def generate(n: int, seed: int, kinds: tuple[str, ...] = ("python", "shell")) -> list[dict]:
    """n scripts (records: file, class, not_a_job, kind, recipe, variant, content)."""
    rng = np.random.default_rng(seed)
    w = _Writer(rng)
    labels, shares = list(CLASS_SHARES), np.array(list(CLASS_SHARES.values()))
    shell_share = SHELL_SHARE if len(kinds) == 2 else float(kinds == ("shell",))
    records = []
    for i in range(n):
        label = labels[int(rng.choice(len(labels), p=shares / shares.sum()))]
        kind = "shell" if rng.random() < shell_share else "python"
        not_a_job = label == "not_a_job"
        if kind == "shell":
            recipe, text = _shell(w, label)
            label = w.pick(["network", "cpu", "io"]) if not_a_job else label
            suffix = w.pick([".sbatch", ".sh", ".slurm"])
        else:
            if not_a_job:
                label, recipe, text = _not_a_job(w)
            else:
                recipe, text = {"cpu": _cpu, "mem": _mem, "network": _network, "io": _io, "other": _other}[label](w)
            suffix = ".py"
        variant, content = _variant(w, text, kind)
        name = f"{recipe}_{i:05d}{suffix}"
        records.append({"file": name, "class": label, "not_a_job": not_a_job, "kind": kind, "recipe": recipe,
                        "variant": variant, "content": content})
    return records


def write_synthetic(out: Path | str, n: int, seed: int = 0, fmt: str | None = None, progress=None) -> Path:
    """Write n generated scripts as `out/labels.csv` + `out/files/`; return the truth file beside them.

    `fmt`: None for Python and batch scripts, `python` or `shell` for one kind only."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise InputError(f"n: expected a positive number of scripts, got {n!r}")
    kinds = {None: ("python", "shell"), "python": ("python",), "shell": ("shell",)}.get(fmt)
    if kinds is None:
        raise InputError(f"format: expected python or shell (or none for both), got {fmt!r}")
    out = Path(out)
    files = out / "files"
    files.mkdir(parents=True, exist_ok=True)
    records = generate(n, seed, kinds)
    with open(out / "labels.csv", "w", newline="") as handle, open(out / TRUTH_FILE, "w", newline="") as truth:
        rows = csv.writer(handle, lineterminator="\n")
        truths = csv.writer(truth, lineterminator="\n")
        rows.writerow(["file", "class", "stored_as"])
        truths.writerow(["file", "class", "not_a_job", "kind", "recipe", "variant"])
        for i, record in enumerate(records, start=1):
            stored = f"files/{record['file']}.txt"
            (out / stored).write_bytes(record["content"])
            rows.writerow([record["file"], record["class"], stored])
            truths.writerow([record["file"], record["class"], str(record["not_a_job"]).lower(), record["kind"],
                             record["recipe"], record["variant"]])
            if progress and i % 100 == 0:
                progress(100)
    if progress and n % 100:
        progress(n % 100)
    return out / TRUTH_FILE


DEFAULT_GENERATED = 600


def default_data(data_dir: Path | str, progress=None) -> str:
    """The default data of `make run`: the bundled real scripts and generated ones (made once under
    `data_dir`), as a JSON list of the two labels.csv folders."""
    from jobaware.resource.train import real_sample_path

    generated = Path(data_dir) / f"resource_generated_{DEFAULT_GENERATED}"
    if not (generated / TRUTH_FILE).is_file():
        write_synthetic(generated, DEFAULT_GENERATED, seed=0, progress=progress)
    return json.dumps([str(real_sample_path().parent), str(generated)])
