"""MkDocs hooks: the command reference and the HTTP API reference, written at build time from the code itself.

`reference/commands.md` walks the click tree of `jobaware.cli` (what `jobaware --help` shows: hidden commands and
options left out). `reference/http-api.md` reads each service's OpenAPI document, as BentoML builds it from the
route tables of `jobaware.serving`. Neither page is kept in the repository, so neither can go stale.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import re

from mkdocs.structure.files import File

COMMANDS_PAGE = "reference/commands.md"
API_PAGE = "reference/http-api.md"
BENTOML_ERRORS = {"InvalidArgument", "NotFound", "InternalServerError", "TaskStatusResponse"}


def on_files(files, config):
    # the CLI and the services read the site's settings when imported: none of a build host's
    os.environ.setdefault("JOBAWARE_CONFIG", "/nonexistent")
    files.append(File.generated(config, COMMANDS_PAGE, content=commands_page()))
    files.append(File.generated(config, API_PAGE, content=api_page()))
    return files


# ---------------------------------------------------------------- the command reference
def visible_commands(group, path=("jobaware",)):
    """(path, command) of every command `--help` lists below `group`, groups before their commands."""
    for name, sub in group.commands.items():
        if sub.hidden:
            continue
        yield (*path, name), sub
        if hasattr(sub, "commands"):
            yield from visible_commands(sub, (*path, name))


def cell(text) -> str:
    return " ".join(str(text).split()).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def usage(path, command) -> str:
    params = [p for p in command.params if not getattr(p, "hidden", False)]
    words = [*path, "[OPTIONS]" if any(p.param_type_name == "option" for p in params) else ""]
    if hasattr(command, "commands"):
        words.append("COMMAND [ARGS]...")
    words += [(p.metavar or p.name.upper()) + ("..." if p.nargs == -1 else "")
              for p in params if p.param_type_name == "argument"]
    return " ".join(w for w in words if w)


def param_row(param, ctx) -> str:
    """A row as `--help` shows the parameter: its names and value, its help with default, range, env and required."""
    record = param.get_help_record(ctx)
    if record is None:
        return ""
    names, text = record
    return f"| `{' '.join(names.split())}` | {cell(text)} |"  # a code span: its pipes split no cell


def example_as_code(text: str | None) -> str:
    """A command's help, its closing `Example: jobaware ...` line as code."""
    return re.sub(r"^Example: (.+)$", r"Example: `\1`", (text or "").strip(), flags=re.MULTILINE)


def command_section(path, command, ctx) -> list[str]:
    depth = "##" if len(path) == 2 else "###"
    lines = [f"{depth} {' '.join(path)}", "", f"```\n{usage(path, command)}\n```", ""]
    lines += [example_as_code(command.help), ""]
    params = [p for p in command.params if not getattr(p, "hidden", False)]
    if params:
        lines += ["| argument or option | what |", "|---|---|"]
        lines += [row for row in (param_row(p, ctx) for p in params) if row] + [""]
    if hasattr(command, "commands"):
        subs = [name for name, sub in command.commands.items() if not sub.hidden]
        lines += ["Commands: " + ", ".join(f"`{name}`" for name in subs) + ".", ""]
    return lines


def commands_page() -> str:
    from jobaware.cli import command

    root = command()
    lines = ["# Command reference", "",
             "Written at build time from the command line itself (`docs/hooks.py` walks `jobaware.cli`), so it",
             "says what `jobaware ... --help` says. Every command's help ends with an example.", "",
             "```", usage(("jobaware",), root), "```", "", example_as_code(root.help), ""]
    ctx = root.context_class(root, info_name="jobaware")
    for path, sub in visible_commands(root):
        lines += command_section(path, sub, ctx)
    return "\n".join(lines)


# ---------------------------------------------------------------- the HTTP API reference
def services() -> list:
    """Every BentoML service of `jobaware.serving`, in module order."""
    import bentoml

    import jobaware.serving

    found = []
    for module in pkgutil.iter_modules(jobaware.serving.__path__):
        loaded = importlib.import_module(f"jobaware.serving.{module.name}")
        found += [value for value in vars(loaded).values() if isinstance(value, bentoml.Service)]
    return found


def type_of(schema: dict) -> str:
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    if "oneOf" in schema or "anyOf" in schema:
        return " or ".join(type_of(s) for s in schema.get("oneOf") or schema.get("anyOf"))
    if schema.get("type") == "array":
        return f"array of {type_of(schema.get('items', {}))}"
    if "enum" in schema:
        return "one of " + ", ".join(f"`{value}`" for value in schema["enum"])
    return schema.get("type") or schema.get("title", "object")


def fields(schema: dict) -> list[str]:
    properties = schema.get("properties") or {}
    if not properties:
        return [f"A JSON {type_of(schema)}.", ""]
    required = set(schema.get("required", []))
    lines = ["| field | type | required | what |", "|---|---|---|---|"]
    lines += [f"| `{name}` | {cell(type_of(field))} | {'yes' if name in required else ''} | "
              f"{cell(field.get('description', ''))} |" for name, field in properties.items()]
    return lines + [""]


def json_schema(part: dict) -> dict | None:
    return (part or {}).get("content", {}).get("application/json", {}).get("schema")


def api_page() -> str:
    lines = ["# HTTP API", "",
             "Written at build time from each service's OpenAPI document (`docs/hooks.py`), the one a running",
             "service serves at `/docs.json` and shows at `/docs`. Every route answers errors in one shape,",
             '`{"error": "<one line>", "field": "<JSON path>" | null}`: 400 for bad input, 413 over a limit, 415 for',
             "a body that is not JSON, 503 while no champion exists ([the service](service.md)). The services have",
             "no default URL at a site: each is found at `JOBAWARE_<KEY>_URL` ([settings](settings.md)).", ""]
    for service in services():
        document = service.openapi_spec.asdict()
        lines += [f"## {service.name}", "", (service.inner.__doc__ or "").strip(), ""]
        infrastructure = []
        for path, operations in sorted(document["paths"].items()):
            for method, operation in operations.items():
                if "Infrastructure" in operation.get("tags", []):
                    infrastructure.append(f"`{method.upper()} {path}`")
                    continue
                lines += [f"### {method.upper()} {path}", "", (operation.get("description") or "").strip(), ""]
                body = json_schema(operation.get("requestBody"))
                if body:
                    lines += ["Request body:", ""] + fields(body)
                answer = json_schema(operation.get("responses", {}).get("200"))
                if answer:
                    lines += ["Answer (200):", ""] + fields(answer)
        if infrastructure:
            lines += ["Also: " + ", ".join(infrastructure) + " (health and Prometheus metrics).", ""]
        # the objects the routes' fields name by reference (BentoML's own error schemas are not what they answer)
        paths = str(document["paths"])
        for name, schema in document.get("components", {}).get("schemas", {}).items():
            if name not in BENTOML_ERRORS and schema.get("properties") and f"#/components/schemas/{name}'" in paths:
                lines += [f"#### {name}", ""] + fields(schema)
    return "\n".join(lines)


# ---------------------------------------------------------------- the services' limits, in the settings reference
LIMITS_MARKER = "<!-- service limits: written by docs/hooks.py -->"


def on_page_markdown(markdown, page, config, files):
    if LIMITS_MARKER in markdown:
        markdown = markdown.replace(LIMITS_MARKER, limits_table())
    return markdown


def limit_classes(cls=None) -> list:
    """Every `jobaware.bodies.Limits` subclass with an env prefix of its own, once each (the services loaded)."""
    from jobaware.bodies import Limits

    services()  # imports every service and so every slice's limits
    found, todo = [], list(Limits.__subclasses__())
    while todo:
        sub = todo.pop(0)
        todo += sub.__subclasses__()
        if sub.model_config.get("env_prefix") and sub not in found:
            found.append(sub)
    return sorted(found, key=lambda sub: sub.model_config["env_prefix"])


def limits_table() -> str:
    lines = ["| variable | default | bounds | read by |", "|---|---|---|---|"]
    seen = set()
    for cls in limit_classes():
        prefix = cls.model_config["env_prefix"]
        for name, field in cls.model_fields.items():
            variable = f"{prefix}{name}".upper()
            if variable in seen:
                continue
            seen.add(variable)
            bounds = " ".join(f"{kind} {getattr(meta, kind)}" for meta in field.metadata
                              for kind in ("ge", "gt", "le", "lt") if getattr(meta, kind, None) is not None)
            default = "none" if field.default in (None, "") else f"`{cell(field.default)}`"
            lines.append(f"| `{variable}` | {default} | {cell(bounds)} | `{cls.__module__}.{cls.__name__}` |")
    return "\n".join(lines)
