import csv

import pytest

from jobaware.resource.capability import FEATURE_VERSION
from jobaware.resource.features import extract, identifier_words, seed_counts_tokens
from jobaware.resource.lexer import python_tokens
from jobaware.resource.parsing import parse_script
from jobaware.resource.reader import read_scripts
from tests.jobaware.resource.conftest import SCRIPTS, SEED_FEATURES


def features(source: str, name: str = ""):
    return extract(parse_script(source.encode(), name))


def test_the_seeds_five_counts_are_reproduced_exactly_on_every_real_script():
    upstream = {row["name"]: {k: int(v) for k, v in row.items() if k != "name"}
                for row in csv.DictReader(open(SEED_FEATURES))}
    table, _, _ = read_scripts([str(SCRIPTS)])
    assert len(upstream) == len(table) == 134
    mismatched = {name: (extract(parse_script(content, name)).seed, upstream[name])
                  for name, content in zip(table["file"], table["content"], strict=True)
                  if extract(parse_script(content, name)).seed != upstream[name]}
    assert mismatched == {}


def test_an_extended_slice_counts_as_the_seeds_python_counted_it():
    # name and subscript are loads; a[1, 2]'s tuple is one too, a[:, 0] was an ExtSlice (no context) before 3.9
    assert features("a[:, 0]\n").seed["loads"] == 2
    assert features("a[1, 2]\n").seed["loads"] == 3


@pytest.mark.parametrize("source, category", [
    ("import numpy as np\nx = np.zeros((1000, 1000))\n", "alloc"),
    ("from collections import defaultdict\nd = defaultdict(list)\nfor i in r:\n    d[i].append(i)\n", "container"),
    ("import numpy as np\nnp.linalg.eig(a)\n", "compute"),
    ("with open('x.csv') as f:\n    f.read()\n", "file_io"),
    ("import h5py\nf = h5py.File('a.h5')\nf.create_dataset('x', data=a)\n", "hdf_netcdf"),
    ("from netCDF4 import Dataset\nDataset('a.nc')\n", "hdf_netcdf"),
    ("import socket\ns = socket.socket()\ns.recv(1)\n", "socket"),
    ("from socket import *\ns = socket(AF_INET, SOCK_DGRAM)\ns.recvfrom(1024)\n", "socket"),
    ("import requests\nrequests.get('http://x')\n", "http"),
    ("import MySQLdb as mysql\ndb = mysql.connect()\nc = db.cursor()\nc.fetchall()\n", "database"),
    ("from mpi4py import MPI\ncomm = MPI.COMM_WORLD\ncomm.Get_rank()\n", "mpi"),
    ("from multiprocessing import Pool\nPool(4).map(f, r)\n", "multiproc"),
])
def test_calls_are_resolved_through_imports_and_assignments_into_categories(source, category):
    assert features(source).rich.get(f"api:{category}", 0) >= 1


def test_rich_features():
    f = features(
        "import numpy as np\nimport os\nimport requests\n"
        "def fib(n):\n    return fib(n - 1) + fib(n - 2) if n > 1 else n\n"
        "grid = np.zeros((2000, 3000))\n"
        "for i in range(100000):\n    for j in range(10):\n        while x:\n            requests.get(url)\n"
        "rows = [r for r in open('data.csv')]\n"
        "q = 'SELECT * FROM t'\n")
    r = f.rich
    assert r["import:numpy"] == r["import:requests"] == r["import:os"] == 1 and r["import_cat:http"] == 1
    assert r["call:numpy.zeros"] == 1 and r["call:requests.get"] == 1 and r["call:builtins.open"] == 1
    assert r["api_loop:http"] == 1 and "api_loop:alloc" not in r
    assert r["loops"] == 3 and r["while_loops"] == 1 and r["loop_depth_max"] == 3 and r["comprehensions"] == 1
    assert r["recursive_calls"] == 2 and r["functions"] == 1
    assert r["lit:alloc_log10"] == pytest.approx(6.778, abs=1e-3)  # 2000 x 3000 elements
    assert r["lit:range_log10"] == pytest.approx(5.0, abs=1e-3)
    assert r["lit:sql"] == 1 and r["lit:ext:csv"] == 1
    assert r["node:For"] == 2 and r["node:While"] == 1 and r["status:ok"] == 1
    assert r["word:grid"] == 1 and r["word:rows"] == 1
    assert f.imports == ["numpy", "os", "requests"]


def test_normalized_tokens_keep_structure_modules_and_api_but_no_identifiers():
    f = features("import numpy as np\nmy_matrix = np.zeros(123456)\nprint(len(my_matrix))\n")
    assert f.tokens[:3] == ["Module", "Import", "alias"]
    assert {"mod:numpy", ".zeros", "int:big", "b:print", "b:len", "Call", "Assign"} <= set(f.tokens)
    assert not any("my_matrix" in t for t in f.tokens)


def test_batch_scripts_give_directive_and_command_features_and_tokens():
    f = features("#!/bin/bash\n#SBATCH --nodes=4\n#SBATCH --ntasks-per-node=32\n#SBATCH --mem=500G\n"
                 "#SBATCH --partition=bigmem\nmodule load hdf5\nmpirun -np 128 ./halo\nwget http://x/y\n")
    r = f.rich
    assert r["sbatch:nodes_log2"] == pytest.approx(2.3219, abs=1e-3) and r["sbatch:total_cpus_log2"] > 7
    assert r["sbatch:mem_gb_log2"] > 8.9 and r["sbatch:partition=bigmem"] == 1 and r["sh:module:hdf5"] == 1
    assert r["sh:launcher:mpirun"] == 1 and r["sh:cmd:download"] == 1 and r["sh:url_args"] == 1
    assert "sh:launch:mpirun" in f.tokens and f.kind == "shell"


def test_token_fallback_estimates_the_seed_counts():
    source = "import os\ndef f(x):\n    for i in x:\n        y = g(i)\n    while q:\n        h(y)\nprint(f(os.sep)\n"
    estimated = seed_counts_tokens(python_tokens(source, 10_000, float("inf")).tokens)
    assert estimated == {"loops": 2, "fdefs": 1, "fcalls": 4, "loads": estimated["loads"], "asmts": 1}
    assert estimated["loads"] >= 6


def test_identifier_words_and_version():
    assert identifier_words("fetchAllRows") == ["fetch", "all", "rows"]
    assert identifier_words("read_HDF5_file") == ["read", "hdf", "file"]
    assert FEATURE_VERSION.startswith("resource-features-")
