"""Is it a job at all? A job has a start and an end; a script that never ends by design is `not_a_job`.

Rule (Python): the script is `not_a_job` when code that runs when it is started (module level, class bodies,
and every function or method referenced from there, transitively, by name; naming a class reaches `__init__`,
`start` reaches `run`) contains
- a `while` loop on a constant true test (`while True`, `while 1`) or a `for` over `itertools.count()` /
  `itertools.cycle()`, whose body has no way out: no `break` of that loop, no `return` (inside a function),
  no `raise`, no call of `sys.exit` / `exit` / `quit` / `os._exit` / `os.abort`; generator functions are
  exempt (their consumer decides when to stop), and catching KeyboardInterrupt is no way out; or
- a call that serves forever: `serve_forever`, `run_forever`, `loop_forever`, `infinity_polling`,
  `mainloop`, `exec_`, `reactor.run`, `IOLoop...start`, `signal.pause`, `rospy/rclpy.spin`, `uvicorn.run`,
  `waitress.serve`, `web.run_app`, or `.run()` / `.run_server()` on a Flask, FastAPI, Dash, Quart, Sanic or
  Bottle application.
Batch scripts: see `shell` (endless `while true`, `sleep infinity`, foreground `tail -f`). The reason names
the line. A loop that merely waits for input or for a condition is not flagged: only what is certain.
"""

from __future__ import annotations

import ast
import time

from jobaware.resource.resolve import Resolver

FOREVER_CALLS = frozenset({"serve_forever", "run_forever", "loop_forever", "infinity_polling", "mainloop",
                           "exec_"})
APP_FACTORIES = frozenset({"Flask", "FastAPI", "Dash", "Quart", "Sanic", "Bottle", "Starlette"})
EXIT_CALLS = frozenset({("sys", "exit"), ("builtins", "exit"), ("builtins", "quit"), ("os", "_exit"),
                        ("os", "abort")})
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def _own_nodes(statements: list[ast.AST], into_classes: bool = False):
    """Nodes of these statements; a nested function (or class, unless asked) is yielded but not entered."""
    stack = list(reversed(statements))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if isinstance(node, ast.ClassDef) and not into_classes:
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _endless_test(loop: ast.AST, resolver: Resolver) -> bool:
    if isinstance(loop, ast.While):
        test = loop.test
        if isinstance(test, ast.Constant):
            return bool(test.value)
        return isinstance(test, ast.Name) and test.id == "True"
    if isinstance(loop, ast.For | ast.AsyncFor) and isinstance(loop.iter, ast.Call):
        return resolver.call_parts(loop.iter)[-2:] in (["itertools", "count"], ["itertools", "cycle"])
    return False


def _has_way_out(loop: ast.AST, in_function: bool, resolver: Resolver) -> bool:
    stack = [(child, 0) for child in loop.body]
    while stack:
        node, nested = stack.pop()
        if isinstance(node, ast.Break) and nested == 0:
            return True
        if isinstance(node, ast.Return) and in_function:
            return True
        if isinstance(node, ast.Raise):
            return True
        if isinstance(node, ast.Call) and tuple(resolver.call_parts(node)[-2:]) in EXIT_CALLS:
            return True
        if isinstance(node, _SCOPES):
            continue
        inner = nested + 1 if isinstance(node, _LOOPS) else nested
        stack.extend((child, inner) for child in ast.iter_child_nodes(node))
    return False


def _forever_call(call: ast.Call, resolver: Resolver) -> str | None:
    parts = [p.removesuffix("()") for p in resolver.call_parts(call)]
    last = parts[-1]
    if last in FOREVER_CALLS:
        return f"{last}()"
    if parts[-2:] in (["reactor", "run"], ["signal", "pause"], ["rospy", "spin"], ["rclpy", "spin"],
                      ["uvicorn", "run"], ["waitress", "serve"], ["web", "run_app"], ["aiohttp", "run_app"]):
        return ".".join(parts[-2:]) + "()"
    if last == "start" and "IOLoop" in parts:
        return "IOLoop.start()"
    if last in ("run", "run_server") and len(parts) >= 2 and parts[-2] in APP_FACTORIES:
        return f"{parts[-2]} application .{last}()"
    return None


def never_ends_python(tree: ast.Module, resolver: Resolver, deadline: float) -> str | None:
    """Why this module never ends (with the line), or None."""
    functions: dict[str, list[ast.AST]] = {}
    classes: set[str] = set()
    for i, node in enumerate(ast.walk(tree)):
        if i % 4096 == 0 and time.monotonic() > deadline:
            return None
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            functions.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.ClassDef):
            classes.add(node.name)
    scopes: list[tuple[list[ast.AST], bool, bool]] = [(tree.body, False, False)]  # statements, in_function, generator
    seen: set[int] = set()
    while scopes:
        if time.monotonic() > deadline:
            return None
        statements, in_function, generator = scopes.pop()
        referenced: set[str] = set()
        for i, node in enumerate(_own_nodes(statements, into_classes=not in_function)):
            if i % 4096 == 4095 and time.monotonic() > deadline:
                return None
            if isinstance(node, ast.Name):
                referenced.add(node.id)
            elif isinstance(node, ast.Attribute):
                referenced.add(node.attr)
            elif isinstance(node, _LOOPS) and not generator and _endless_test(node, resolver) \
                    and not _has_way_out(node, in_function, resolver):
                header = "while True" if isinstance(node, ast.While) else "for over an endless iterator"
                return f"line {node.lineno}: `{header}` with no break, return, raise or exit"
            elif isinstance(node, ast.Call):
                reason = _forever_call(node, resolver)
                if reason:
                    return f"line {node.lineno}: {reason} serves forever"
        if referenced & classes:
            referenced.add("__init__")  # creating an instance runs its constructor
        if "start" in referenced:
            referenced.add("run")  # Thread.start() runs run()
        for name in referenced:
            for function in functions.get(name, []):
                if id(function) not in seen:
                    seen.add(id(function))
                    is_generator = any(isinstance(n, ast.Yield | ast.YieldFrom) for n in _own_nodes(function.body))
                    scopes.append((function.body, True, is_generator))
    return None
