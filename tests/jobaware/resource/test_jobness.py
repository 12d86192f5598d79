import ast
import time

import pytest

from jobaware.resource.jobness import never_ends_python
from jobaware.resource.reader import read_scripts
from jobaware.resource.resolve import Resolver
from tests.jobaware.resource.conftest import SCRIPTS


def verdict(source: str) -> str | None:
    tree = ast.parse(source)
    return never_ends_python(tree, Resolver(list(ast.walk(tree))), time.monotonic() + 5)


@pytest.mark.parametrize("source, where", [
    ("while True:\n    serve()\n", "line 1: `while True`"),
    ("while 1:\n    pass\n", "line 1"),
    ("import sys\ntry:\n    while True:\n        x = 1\nexcept KeyboardInterrupt:\n    sys.exit(0)\n", "line 3"),
    ("def main():\n    while True:\n        for i in range(3):\n            break\n\n"
     "if __name__ == '__main__':\n    main()\n", "line 2"),
    ("import itertools\nfor i in itertools.count():\n    work(i)\n", "endless iterator"),
    ("import socketserver\nsocketserver.TCPServer(('', 1), H).serve_forever()\n", "serve_forever() serves forever"),
    ("from flask import Flask\napp = Flask(__name__)\napp.run(port=80)\n", "Flask application .run()"),
    ("import asyncio\nloop = asyncio.get_event_loop()\nloop.run_forever()\n", "run_forever()"),
    ("from twisted.internet import reactor\nreactor.run()\n", "reactor.run()"),
    ("import threading\nclass W(threading.Thread):\n    def run(self):\n        while True:\n            poll()\n"
     "W().start()\n", "line 4"),
    ("class Server:\n    def __init__(self):\n        while True:\n            self.accept()\nServer()\n", "line 3"),
])
def test_scripts_that_never_end(source, where):
    reason = verdict(source)
    assert reason is not None and where in reason


@pytest.mark.parametrize("source", [
    "while True:\n    if done():\n        break\n",
    "import sys\nwhile True:\n    if done():\n        sys.exit(0)\n",
    "def f():\n    while True:\n        return 1\nf()\n",
    "while True:\n    raise SystemExit\n",
    "def gen():\n    while True:\n        yield 1\nfor x in gen():\n    pass\n",
    "def unused():\n    while True:\n        pass\n",
    "class Lib:\n    def serve(self):\n        while True:\n            pass\n",
    "while not finished:\n    step()\n",
    "import socket\ns = socket.socket()\nfor i in range(10):\n    s.recv(10)\n",
])
def test_scripts_that_end_or_may_end(source):
    assert verdict(source) is None


def test_real_scripts_flagged_are_the_udp_servers():
    table, _, _ = read_scripts([str(SCRIPTS)])
    flagged = set()
    for name, content in zip(table["file"], table["content"], strict=True):
        try:
            if verdict(content.decode("utf-8")):
                flagged.add(name)
        except SyntaxError:
            continue
    assert flagged == {"udpserver.py", "rudpserver.py"}
