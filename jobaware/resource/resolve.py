"""Resolve names in a Python syntax tree to dotted module paths, statically.

Imports give aliases (`import numpy as np`: np -> numpy; `from h5py import File`: File -> h5py.File);
simple assignments and `with ... as x` give origins (`s = socket.socket()`: s -> socket.socket()).
Resolution is flow-insensitive (the last binding seen wins) and never looks past the script itself.
Builtins resolve to `builtins.<name>`, functions and classes defined in the script to `local.<name>`,
anything else to `?` followed by the attributes used on it.
"""

from __future__ import annotations

import ast
import builtins

BUILTINS = frozenset(dir(builtins)) | {"file", "raw_input", "xrange", "unicode", "long", "execfile", "reduce"}
MAX_PARTS = 8


class Resolver:
    """Aliases, origins and local definitions of one module, read in one pass over its nodes."""

    def __init__(self, nodes: list[ast.AST]):
        self.aliases: dict[str, list[str]] = {}
        self.origins: dict[str, ast.expr] = {}
        self.local: set[str] = set()
        self.imported: list[str] = []
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self.imported.append(alias.name)
                    if alias.asname:
                        self.aliases[alias.asname] = alias.name.split(".")
                    else:
                        root = alias.name.split(".")[0]
                        self.aliases[root] = [root]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                self.imported.append(node.module)
                for alias in node.names:
                    if alias.name != "*":
                        self.aliases[alias.asname or alias.name] = node.module.split(".") + [alias.name]
            elif isinstance(node, ast.ImportFrom) and node.level:
                for alias in node.names:
                    if alias.name != "*":
                        self.local.add(alias.asname or alias.name)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self.local.add(node.name)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self.origins[node.targets[0].id] = node.value
            elif isinstance(node, ast.withitem) and isinstance(node.optional_vars, ast.Name):
                self.origins[node.optional_vars.id] = node.context_expr

    def parts(self, node: ast.AST, depth: int = 0) -> list[str]:
        """Dotted parts of an expression: ['numpy', 'zeros'], ['socket', 'socket()', 'recv'], ['?', 'append']."""
        if depth > MAX_PARTS:
            return ["?"]
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return list(self.aliases[node.id])
            if node.id in self.origins and depth < MAX_PARTS:
                origin = self.origins[node.id]
                if not (isinstance(origin, ast.Name) and origin.id == node.id):
                    resolved = self.parts(origin, depth + 1)
                    if resolved[0] != "?":
                        return resolved
            if node.id in self.local:
                return ["local", node.id]
            if node.id in BUILTINS:
                return ["builtins", node.id]
            return ["?"]
        if isinstance(node, ast.Attribute):
            return self.parts(node.value, depth + 1) + [node.attr]
        if isinstance(node, ast.Call):
            inner = self.parts(node.func, depth + 1)
            return inner[:-1] + [inner[-1] + "()"] if inner != ["?"] else ["?"]
        if isinstance(node, ast.Subscript):
            return self.parts(node.value, depth + 1)
        return ["?"]

    def call_parts(self, call: ast.Call) -> list[str]:
        parts = self.parts(call.func)
        if parts == ["?"] and isinstance(call.func, ast.Name):
            return ["?", call.func.id]
        return parts
