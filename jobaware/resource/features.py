"""Features of one parsed script: the seed's five counts, the rich features, the normalized AST tokens.

The seed's five counts (loops, fdefs, fcalls, loads, asmts) are those of job-classification's gen_tags.py,
reproduced exactly: `ast.For` + `ast.While`, `ast.FunctionDef`, `ast.Call`, every `ast.Load` context met by
`ast.walk`, `ast.Assign`. One correction keeps them equal to the seed's values under Python >= 3.9: a
subscript whose slice is a tuple holding a slice (`a[:, 0]`) carries an extra `Load` on the tuple that the
seed's Python (ExtSlice) did not have; it is not counted. Without a tree (status tokens_only, too_large,
too_deep) the counts are estimated from tokens (`for`/`while` statements, `def`, a name or closing bracket
followed by `(`, names read, `=` at bracket depth 0); batch scripts count the Python they embed.

Rich features (a sparse name -> value dict, vectorised by the model): node-type histogram (`node:<Type>`),
imported modules (`import:<root>`, `import_cat:<category>`), identifier sub-words (`word:<w>`: names,
attributes, function, class and argument names split at `_` and case changes), calls made
(`call:<root>.<name>`) and their
categories from `catalog` (`api:<category>`, also `api_loop:<category>` for calls inside loops or
comprehensions), loop counts and nesting depth, comprehensions, recursion, literal sizes (largest integer,
largest `range(N)`, largest constant array shape in an allocation, string and collection sizes, SQL / URL /
file-extension string literals), the parse status and size, and for batch scripts the `#SBATCH` directives
(`sbatch:*`) and the commands run (`sh:*`).

The normalized token sequence (the sequence model's input) is the pre-order walk of the tree: node type names,
where a name bound to an import is replaced by its module (`mod:numpy`), a builtin by `b:<name>`, a
catalogued attribute by `.<attr>`, a constant by its type (large integers as `int:big`); every other
identifier disappears. Without a tree the lexical tokens are used the same way (keywords, operators,
modules, builtins); batch scripts give `sh:` directive and command tokens followed by their Python's tokens.
"""

from __future__ import annotations

import ast
import math
import re
import time
from dataclasses import dataclass, field

from jobaware.resource import catalog
from jobaware.resource.jobness import never_ends_python
from jobaware.resource.lexer import NAME, NEWLINE, NUMBER, OP, STRING, Token
from jobaware.resource.parsing import ParsedScript
from jobaware.resource.resolve import BUILTINS, Resolver
from jobaware.resource.shell import ShellScript, duration_minutes, size_mb

SEED_FEATURES = ("loops", "fdefs", "fcalls", "loads", "asmts")
MAX_SEQUENCE = 4096
MAX_LOG10 = 400.0  # literal sizes beyond 10**400 count as 10**400
MAX_VALUE = 1e12
_PYTHON_KEYWORDS = frozenset("""False None True and as assert async await break class continue def del elif else
except finally for from global if import in is lambda nonlocal not or pass raise return try while with
yield print exec""".split())
_SQL = re.compile(r"\b(SELECT|INSERT\s+INTO|UPDATE|DELETE\s+FROM|CREATE\s+TABLE)\b", re.IGNORECASE)
_URL = re.compile(r"\b(https?|ftp|s3|gs)://", re.IGNORECASE)
_IP = re.compile(r"\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b")
_EXTENSION = re.compile(r"\.(csv|tsv|txt|json|xml|h5|hdf5|he5|nc|nc4|dat|bin|npy|npz|pkl|pickle|parquet|xlsx|xls|"
                        r"png|jpg|pdf|log|gz|zip|tar|db|sqlite|fits|mat|vtk|out)\b", re.IGNORECASE)
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
_ATTR_VOCABULARY = (frozenset(catalog.METHOD_CATEGORY)
                    | {name for _, names, _ in catalog.QUALIFIED_RULES if names for name in names})


@dataclass
class ScriptFeatures:
    kind: str
    status: str
    detail: str
    seed: dict[str, int]
    rich: dict[str, float]
    tokens: list[str]
    not_a_job: bool
    not_a_job_reason: str
    complete: bool
    imports: list[str] = field(default_factory=list)


def identifier_words(identifier: str) -> list[str]:
    """Lower-case sub-words of 3+ letters: `fetchAllRows` / `fetch_all_rows` -> fetch, all, rows."""
    return [w.lower() for w in _WORD.findall(identifier) if len(w) >= 3]


def _log10(value: float | int) -> float:
    """log10(1 + value) for any non-negative int or float (huge integers included), capped at MAX_LOG10."""
    try:
        result = math.log10(1 + max(value, 0))
    except (OverflowError, ValueError):
        return MAX_LOG10
    return min(result, MAX_LOG10) if math.isfinite(result) else MAX_LOG10


# ---------------------------------------------------------------- seed counts


def seed_counts_tree(nodes: list[ast.AST]) -> dict[str, int]:
    """The seed's counts over the nodes of `ast.walk(tree)`."""
    counts = dict.fromkeys(SEED_FEATURES, 0)
    for node in nodes:
        if isinstance(node, ast.For | ast.While):
            counts["loops"] += 1
        elif isinstance(node, ast.FunctionDef):
            counts["fdefs"] += 1
        elif isinstance(node, ast.Call):
            counts["fcalls"] += 1
        elif isinstance(node, ast.Load):
            counts["loads"] += 1
        elif isinstance(node, ast.Assign):
            counts["asmts"] += 1
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple) \
                and any(isinstance(e, ast.Slice) for e in node.slice.elts):
            counts["loads"] -= 1  # Python < 3.9 had ExtSlice here, without a Load context
    return counts


def seed_counts_tokens(tokens: list[Token]) -> dict[str, int]:
    counts = dict.fromkeys(SEED_FEATURES, 0)
    depth, statement_start, previous = 0, True, None
    for i, token in enumerate(tokens):
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        if token.kind == OP and token.text in "([{":
            if token.text == "(" and previous is not None and (
                    (previous.kind == NAME and previous.text not in _PYTHON_KEYWORDS - {"print", "exec"})
                    or (previous.kind == OP and previous.text in (")", "]"))):
                before = tokens[i - 2] if i >= 2 else None
                if not (before is not None and before.kind == NAME and before.text in ("def", "class")):
                    counts["fcalls"] += 1
            depth += 1
        elif token.kind == OP and token.text in ")]}":
            depth = max(depth - 1, 0)
        elif token.kind == NAME:
            if statement_start and token.text in ("for", "while"):
                counts["loops"] += 1
            elif token.text == "def":
                counts["fdefs"] += 1
            elif token.text not in _PYTHON_KEYWORDS or token.text in ("print", "exec", "True", "False", "None"):
                stored = following is not None and following.kind == OP and following.text == "=" and depth == 0
                bound = previous is not None and previous.kind == NAME and previous.text in (
                    "def", "class", "import", "as", "from", "global", "nonlocal")
                attribute = previous is not None and previous.kind == OP and previous.text == "."
                if not stored and not bound and not attribute and token.text not in ("True", "False", "None"):
                    counts["loads"] += 1
        elif token.kind == OP and token.text == "=" and depth == 0:
            counts["asmts"] += 1
        statement_start = token.kind == NEWLINE or (token.kind == OP and token.text in (";", ":") and depth == 0)
        previous = token
    return counts


# ---------------------------------------------------------------- rich features from a tree


class _TreeReader:
    """One iterative pass over a tree: every rich feature and the normalized tokens."""

    def __init__(self, tree: ast.Module, deadline: float):
        self.deadline = deadline
        self.complete = True
        nodes = []
        for i, node in enumerate(ast.walk(tree)):
            nodes.append(node)
            if i % 4096 == 0 and time.monotonic() > deadline:
                self.complete = False
                break
        self.seed = seed_counts_tree(nodes)
        self.resolver = Resolver(nodes)
        self.rich: dict[str, float] = {}
        self.tokens: list[str] = []

    def add(self, key: str, value: float = 1.0) -> None:
        self.rich[key] = self.rich.get(key, 0.0) + value

    def peak(self, key: str, value: float) -> None:
        self.rich[key] = max(self.rich.get(key, 0.0), value)

    def read(self, tree: ast.Module) -> None:
        for module in self.resolver.imported:
            self.add(f"import:{module.split('.')[0]}")
            category = catalog.module_category(module)
            if category:
                self.add(f"import_cat:{category}")
        functions: list[str] = []
        loop_depths: list[int] = []
        stack: list[tuple[ast.AST, int, bool, str | None]] = [(tree, 0, False, None)]
        visited = 0
        while stack:
            node, depth, in_loop, function = stack.pop()
            visited += 1
            if visited % 4096 == 0 and time.monotonic() > self.deadline:
                self.complete = False
                break
            if isinstance(node, ast.expr_context):
                continue
            name = type(node).__name__
            if not isinstance(node, ast.Module):
                self.add(f"node:{name}")
            self._token(node, name)
            identifier = _identifier(node)
            if identifier:
                for word in identifier_words(identifier):
                    self.add(f"word:{word}")
            child_depth, child_loop, child_function = depth, in_loop, function
            if isinstance(node, ast.For | ast.AsyncFor | ast.While):
                child_depth, child_loop = depth + 1, True
                loop_depths.append(depth + 1)
                self.add("loops")
                if isinstance(node, ast.While):
                    self.add("while_loops")
            elif isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
                child_loop = True
                self.add("comprehensions")
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                child_depth, child_loop = 0, False
                child_function = getattr(node, "name", None)
                if child_function:
                    functions.append(child_function)
            elif isinstance(node, ast.ClassDef):
                self.add("classes")
            elif isinstance(node, ast.Call):
                self._call(node, in_loop, function)
            elif isinstance(node, ast.Constant):
                self._constant(node.value)
            elif isinstance(node, ast.List | ast.Tuple | ast.Set):
                self.peak("lit:collection_log10", _log10(len(node.elts)))
            elif isinstance(node, ast.Dict):
                self.peak("lit:collection_log10", _log10(len(node.keys)))
            children = list(ast.iter_child_nodes(node))
            if isinstance(node, ast.For | ast.AsyncFor):
                # the iterable is evaluated once, outside the loop
                stack.extend((c, child_depth, child_loop, child_function) for c in reversed(children)
                             if c is not node.iter)
                stack.append((node.iter, depth, in_loop, function))
            else:
                stack.extend((c, child_depth, child_loop, child_function) for c in reversed(children))
        self.rich["functions"] = float(len(functions))
        if loop_depths:
            self.rich["loop_depth_max"] = float(max(loop_depths))
            self.rich["loop_depth_mean"] = sum(loop_depths) / len(loop_depths)

    def _token(self, node: ast.AST, name: str) -> None:
        tokens = self.tokens
        if len(tokens) >= MAX_SEQUENCE:
            return
        if isinstance(node, ast.Name):
            if node.id in self.resolver.aliases:
                tokens.append(f"mod:{self.resolver.aliases[node.id][0]}")
            elif node.id in BUILTINS:
                tokens.append(f"b:{node.id}")
            else:
                tokens.append("Name")
        elif isinstance(node, ast.Attribute):
            tokens.append(f".{node.attr}" if node.attr in _ATTR_VOCABULARY else "Attribute")
        elif isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, bool) or value is None:
                tokens.append(f"const:{value}")
            elif isinstance(value, int):
                tokens.append("int:big" if abs(value) >= 10_000 else "int")
            else:
                tokens.append(type(value).__name__)
        else:
            tokens.append(name)

    def _call(self, call: ast.Call, in_loop: bool, function: str | None) -> None:
        parts = self.resolver.call_parts(call)
        clean = [p.removesuffix("()") for p in parts]
        root = clean[0]
        self.add(f"call:{root}.{clean[-1]}" if len(clean) > 1 else f"call:{root}")
        if in_loop:
            self.add("calls_in_loops")
        if root == "local" and function and clean[-1] == function:
            self.add("recursive_calls")
        category = catalog.call_category(parts)
        if category:
            self.add(f"api:{category}")
            if in_loop:
                self.add(f"api_loop:{category}")
        if clean[-2:] in (["builtins", "range"], ["builtins", "xrange"]):
            for arg in call.args:
                number = isinstance(arg, ast.Constant) and isinstance(arg.value, int | float)
                if number and not isinstance(arg.value, bool):
                    self.peak("lit:range_log10", _log10(abs(arg.value)))
        if category == "alloc" and call.args:
            size = _constant_size(call.args[0])
            if size:
                self.peak("lit:alloc_log10", _log10(size))
        if clean[-1] == "open" and len(call.args) >= 2 and isinstance(call.args[1], ast.Constant) \
                and isinstance(call.args[1].value, str):
            mode = call.args[1].value
            self.add("lit:open_write" if any(c in mode for c in "wax+") else "lit:open_read")

    def _constant(self, value) -> None:
        if isinstance(value, bool) or value is None:
            return
        if isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)):
            self.peak("lit:max_number_log10", _log10(abs(value)))
        elif isinstance(value, str | bytes):
            self.add("lit:str_chars", float(len(value)))
            _string_features(value if isinstance(value, str) else value.decode("latin-1"), self.add)


def _identifier(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return node.name
    if isinstance(node, ast.arg):
        return node.arg
    return None


def _constant_size(node: ast.AST) -> int:
    """Elements of a constant shape argument: 1000 -> 1000, (1000, 1000) -> 10**6, [1, 2, 3] -> 3."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return abs(node.value)
    if isinstance(node, ast.Tuple):
        sizes = [_constant_size(e) for e in node.elts[:16] if not isinstance(e, ast.Tuple)]
        return math.prod(sizes) if sizes and all(sizes) else 0
    if isinstance(node, ast.List):
        return len(node.elts)
    return 0


def _string_features(text: str, add) -> None:
    head = text[:4096]
    if _SQL.search(head):
        add("lit:sql")
    if _URL.search(head):
        add("lit:url")
    if _IP.search(head):
        add("lit:ip")
    for extension in {m.group(1).lower() for m in _EXTENSION.finditer(head)}:
        add(f"lit:ext:{extension}")


# ---------------------------------------------------------------- rich features from tokens


def _token_features(tokens: list[Token], deadline: float) -> tuple[dict[str, float], list[str], list[str]]:
    """Imports, calls and literals read from tokens when there is no tree."""
    rich: dict[str, float] = {}
    sequence: list[str] = []
    aliases: dict[str, str] = {}
    imported: list[str] = []

    def add(key: str, value: float = 1.0) -> None:
        rich[key] = rich.get(key, 0.0) + value

    i, n, depth = 0, len(tokens), 0
    statement_start = True
    while i < n:
        if i % 4096 == 0 and time.monotonic() > deadline:
            break
        token = tokens[i]
        if token.kind == NAME and statement_start and token.text in ("import", "from"):
            j, modules, names = _read_import(tokens, i)
            for module in modules:
                imported.append(module)
            for alias, target in names.items():
                aliases[alias] = target
            sequence.append(f"kw:{token.text}")
            sequence.extend(f"mod:{m.split('.')[0]}" for m in modules)
            i = j
            statement_start = True
            continue
        if token.kind == NAME:
            if token.text not in _PYTHON_KEYWORDS:
                for word in identifier_words(token.text):
                    add(f"word:{word}")
            dotted = [token.text]
            j = i + 1
            while j + 1 < n and tokens[j].kind == OP and tokens[j].text == "." and tokens[j + 1].kind == NAME:
                dotted.append(tokens[j + 1].text)
                j += 2
            for attribute in dotted[1:]:
                for word in identifier_words(attribute):
                    add(f"word:{word}")
            is_call = j < n and tokens[j].kind == OP and tokens[j].text == "("
            head = dotted[0]
            if head in _PYTHON_KEYWORDS and len(dotted) == 1:
                sequence.append(f"kw:{head}")
                if head in ("for", "while") and statement_start:
                    add("loops")
                    if head == "while":
                        add("while_loops")
            else:
                resolved = aliases.get(head, "builtins." + head if head in BUILTINS else "?").split(".")
                parts = resolved + dotted[1:] if resolved != ["?"] else ["?"] + dotted[1:]
                if head in aliases:
                    sequence.append(f"mod:{resolved[0]}")
                else:
                    sequence.append(f"b:{head}" if head in BUILTINS else "Name")
                sequence.extend(f".{d}" if d in _ATTR_VOCABULARY else "Attribute" for d in dotted[1:])
                if is_call:
                    if parts == ["?"]:
                        parts = ["?", head]
                    add(f"call:{parts[0]}.{parts[-1]}")
                    category = catalog.call_category(parts)
                    if category:
                        add(f"api:{category}")
                    sequence.append("Call")
            i = j
            statement_start = False
            continue
        if token.kind == STRING:
            add("lit:str_chars", float(len(token.text)))
            _string_features(token.text, add)
            sequence.append("str")
        elif token.kind == NUMBER:
            sequence.append("int" if token.text.isdigit() else "float")
            digits = re.sub(r"[^0-9.]", "", token.text.split("e")[0].split("E")[0]) or "0"
            whole = digits.split(".")[0] or "0"
            size = _log10(float(digits)) if len(whole) < 300 and digits.count(".") <= 1 else min(len(whole), MAX_LOG10)
            rich["lit:max_number_log10"] = max(rich.get("lit:max_number_log10", 0.0), size)
        elif token.kind == OP:
            depth += 1 if token.text in "([{" else -1 if token.text in ")]}" else 0
            depth = max(depth, 0)
            sequence.append(f"op:{token.text}")
        statement_start = token.kind == NEWLINE or (token.kind == OP and token.text in (";", ":") and depth == 0)
        i += 1
    for module in imported:
        add(f"import:{module.split('.')[0]}")
        category = catalog.module_category(module)
        if category:
            add(f"import_cat:{category}")
    return rich, sequence, imported


def _read_import(tokens: list[Token], i: int) -> tuple[int, list[str], dict[str, str]]:
    """`import a.b as c, d` / `from a.b import x as y`: (next index, modules, alias -> dotted target)."""
    words: list[Token] = []
    j = i
    while j < len(tokens) and tokens[j].kind != NEWLINE:
        words.append(tokens[j])
        j += 1
    texts = [w.text for w in words if w.text not in ("(", ")")]
    modules, names = [], {}
    if texts and texts[0] == "from" and "import" in texts:
        module = "".join(texts[1 : texts.index("import")]).lstrip(".")
        if module:
            modules.append(module)
            rest = " ".join(texts[texts.index("import") + 1 :]).split(",")
            for item in rest:
                bits = item.split()
                if bits and bits[0] != "*":
                    names[bits[-1] if len(bits) == 3 and bits[1] == "as" else bits[0]] = f"{module}.{bits[0]}"
    elif texts and texts[0] == "import":
        for item in " ".join(texts[1:]).replace(" . ", ".").split(","):
            bits = item.replace(" .", ".").replace(". ", ".").split()
            if not bits:
                continue
            modules.append(bits[0])
            names[bits[-1] if len(bits) == 3 and bits[1] == "as" else bits[0].split(".")[0]] = (
                bits[0] if len(bits) == 3 else bits[0].split(".")[0])
    return j + 1, modules, names


# ---------------------------------------------------------------- batch scripts


def _shell_features(script: ShellScript) -> tuple[dict[str, float], list[str]]:
    rich: dict[str, float] = {}
    tokens: list[str] = [f"sh:scheduler:{script.scheduler or 'none'}"]

    def add(key: str, value: float = 1.0) -> None:
        rich[key] = rich.get(key, 0.0) + value

    d = script.directives
    number = lambda key: _leading_int(d.get(key, ""))  # noqa: E731
    nodes, ntasks, cpus = number("nodes"), number("ntasks"), number("cpus-per-task")
    per_node = number("ntasks-per-node")
    gpus = _gpus(d)
    mem = size_mb(d["mem"]) if d.get("mem") else None
    mem_per_cpu = size_mb(d["mem-per-cpu"]) if d.get("mem-per-cpu") else None
    minutes = duration_minutes(d["time"]) if d.get("time") else None
    total_cpus = max(ntasks or (nodes or 1) * (per_node or 1), 1) * (cpus or 1)
    values = {"nodes": nodes, "ntasks": ntasks, "cpus_per_task": cpus, "ntasks_per_node": per_node, "gpus": gpus,
              "total_cpus": total_cpus if d else None, "mem_gb": mem / 1024 if mem else None,
              "mem_per_cpu_gb": mem_per_cpu / 1024 if mem_per_cpu else None,
              "time_hours": minutes / 60 if minutes else None}
    if mem is not None and total_cpus:
        values["mem_per_core_gb"] = mem / 1024 / max(total_cpus / max(nodes or 1, 1), 1)
    elif mem_per_cpu is not None:
        values["mem_per_core_gb"] = mem_per_cpu / 1024
    for key, value in values.items():
        if value is not None:
            rich[f"sbatch:{key}_log2"] = math.log2(1 + value)
            tokens.append(f"sh:dir:{key}:{_bucket(value)}")
    for flag in ("exclusive", "array", "constraint", "dependency"):
        if flag in d:
            add(f"sbatch:{flag}")
            tokens.append(f"sh:dir:{flag}")
    if d.get("partition"):
        for partition in d["partition"].lower().split(","):
            add(f"sbatch:partition={partition.strip()}")
    rich["sbatch:directives"] = float(len(d))
    rich["sbatch:ignored"] = float(script.ignored_directives)
    for command in script.commands:
        add(f"sh:cmd:{command.category}")
        add(f"sh:prog:{command.program}")
        tokens.append(f"sh:{command.category}")
        if command.launcher:
            add(f"sh:launcher:{command.launcher}")
            tokens.append(f"sh:launch:{command.launcher}")
            if command.launcher_tasks:
                rich["sh:launcher_tasks_log2"] = max(rich.get("sh:launcher_tasks_log2", 0.0),
                                                      math.log2(1 + command.launcher_tasks))
        if command.category == "module" and command.args[:1] in (["load"], ["add"]):
            for module in command.args[1:]:
                add(f"sh:module:{module.split('/')[0].lower()}")
        if command.background:
            add("sh:background")
        if any(_URL.search(a) for a in command.args):
            add("sh:url_args")
    for module in script.python_modules:
        add(f"sh:pymodule:{module.split('.')[0]}")
    rich["sh:loops"] = float(script.loops)
    rich["sh:loop_depth_max"] = float(script.max_loop_depth)
    rich["sh:python_scripts"] = float(len(script.python_scripts))
    return rich, tokens


def _leading_int(text: str) -> int | None:
    match = re.match(r"^\s*(\d{1,9})(?!\d)", text or "")
    return int(match.group(1)) if match else None


def _gpus(d: dict[str, str]) -> int | None:
    for key in ("gpus", "gpus-per-node", "gres"):
        value = d.get(key)
        if value:
            match = re.search(r"(?:gpu(?::[\w-]+)?:)?(?<!\d)(\d{1,6})\s*$", value)
            if key != "gres" or "gpu" in value:
                return int(match.group(1)) if match else 1
    return None


def _bucket(value: float) -> str:
    return str(int(math.log2(1 + value)))


# ---------------------------------------------------------------- one script


def extract(parsed: ParsedScript) -> ScriptFeatures:
    """Every feature of one parsed script."""
    deadline = parsed.deadline or time.monotonic() + 5
    seed = dict.fromkeys(SEED_FEATURES, 0)
    rich: dict[str, float] = {}
    tokens: list[str] = []
    imports: list[str] = []
    reason = ""
    complete = parsed.complete
    python_parts = [parsed] if parsed.kind == "python" else parsed.embedded
    if parsed.kind == "shell" and parsed.shell is not None:
        rich, tokens = _shell_features(parsed.shell)
        reason = parsed.shell.never_ends or ""
    for part in python_parts:
        part_seed, part_rich, part_tokens, part_imports, part_reason, part_complete = _python_features(part, deadline)
        for key, value in part_seed.items():
            seed[key] += value
        for key, value in part_rich.items():
            peak = key.endswith(("_log10", "_max"))
            rich[key] = max(rich.get(key, 0.0), value) if peak else rich.get(key, 0.0) + value
        tokens.extend(part_tokens)
        imports.extend(part_imports)
        reason = reason or part_reason
        complete = complete and part_complete
    for key, value in seed.items():
        rich[f"count:{key}"] = float(value)
    if "lit:str_chars" in rich:
        rich["lit:str_chars_log10"] = _log10(rich.pop("lit:str_chars"))
    rich[f"status:{parsed.status}"] = 1.0
    rich["size:bytes_log10"] = _log10(parsed.n_bytes)
    rich["size:lines_log10"] = _log10(parsed.text.count("\n") + 1)
    if parsed.decode_errors:
        rich["decode_errors"] = 1.0
    if reason:
        rich["never_ends"] = 1.0
    if len(tokens) > MAX_SEQUENCE:
        tokens = tokens[:MAX_SEQUENCE]
    # last guard: every value finite and bounded, whatever the script held
    rich = {k: min(max(v, -MAX_VALUE), MAX_VALUE) if math.isfinite(v) else 0.0 for k, v in rich.items()}
    return ScriptFeatures(parsed.kind, parsed.status, parsed.detail, seed, rich, tokens, bool(reason), reason,
                          complete, sorted(set(imports)))


def _python_features(parsed: ParsedScript, deadline: float):
    if parsed.tree is not None:
        reader = _TreeReader(parsed.tree, deadline)
        reader.read(parsed.tree)
        reason = never_ends_python(parsed.tree, reader.resolver, deadline) or ""
        return reader.seed, reader.rich, reader.tokens, reader.resolver.imported, reason, reader.complete
    if parsed.tokens:
        rich, sequence, imported = _token_features(parsed.tokens, deadline)
        return seed_counts_tokens(parsed.tokens), rich, sequence, imported, "", time.monotonic() <= deadline
    return dict.fromkeys(SEED_FEATURES, 0), {}, [], [], "", True
