"""import-linter contract types that know the registered capabilities (`pyproject.toml` names them under
`contract_types`): a capability's slice is covered by the layer contracts by registering, with no edit of the
contracts. `lint-imports` (run by tests/test_layers.py) checks them with the built-in ones."""

from __future__ import annotations

import importlib

from grimp import ImportGraph
from importlinter.application import contract_utils, output
from importlinter.application.contract_utils import AlertLevel
from importlinter.contracts.independence import IndependenceContract
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck
from importlinter.domain.helpers import module_expressions_to_modules
from importlinter.domain.imports import ModuleExpression


def slices() -> list[str]:
    """The package of every registered capability: `jobaware.<key>`."""
    capabilities = importlib.import_module("jobaware.capabilities")
    return [f"jobaware.{key}" for key in capabilities.keys()]


class SlicesIndependent(IndependenceContract):
    """The registered slices import nothing of each other, directly or not (an independence contract whose modules
    are the registry's slices)."""

    type_name = "slices_independent"
    modules = fields.SetField(subfield=fields.ModuleExpressionField(), required=False)

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        self.modules = {ModuleExpression(name) for name in slices()}
        return super().check(graph, verbose)


class SliceAccess(Contract):
    """`source_modules` (and their descendants, those inside a slice or under `excluded_modules` excepted: the slices'
    own contract covers them, and a layer above has its own) import of a registered slice only its modules named in
    `allowed` (and their descendants), directly."""

    type_name = "slice_access"
    source_modules = fields.SetField(subfield=fields.ModuleExpressionField())
    excluded_modules = fields.SetField(subfield=fields.StringField(), required=False)
    allowed = fields.SetField(subfield=fields.StringField(), required=False)
    ignore_imports = fields.SetField(subfield=fields.ImportExpressionField(), required=False)
    unmatched_ignore_imports_alerting = fields.EnumField(AlertLevel, default=AlertLevel.ERROR)

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        removal = contract_utils.remove_ignored_imports_and_report(
            graph=graph, ignore_imports=self.ignore_imports, unmatched_alerting=self.unmatched_ignore_imports_alerting)
        packages = slices()

        def slice_of(name: str) -> str | None:
            return next((p for p in packages if name == p or name.startswith(p + ".")), None)

        allowed = set(self.allowed or ())
        sources = set()
        for module in module_expressions_to_modules(graph, self.source_modules):
            sources |= {module.name, *graph.find_descendants(module.name)}
        broken = []
        excluded = tuple(self.excluded_modules or ())
        for source in sorted(s for s in sources if slice_of(s) is None and not _within(s, excluded)):
            for imported in sorted(graph.find_modules_directly_imported_by(source)):
                package = slice_of(imported)
                if package is None:
                    continue
                part = imported.removeprefix(package).lstrip(".")
                if not any(part == name or part.startswith(name + ".") for name in allowed):
                    lines = graph.get_import_details(importer=source, imported=imported)
                    broken.append((source, imported, [d["line_number"] for d in lines]))
        return ContractCheck(kept=not broken, warnings=list(removal.warnings),
                             ignored_import_count=removal.ignored_import_count, metadata={"broken": broken})

    def render_broken_contract(self, check: ContractCheck) -> None:
        what = f"only {', '.join(sorted(self.allowed))} of a slice" if self.allowed else "no slice"
        for source, imported, lines in check.metadata["broken"]:
            output.print(f"{source} imports {imported} (line {', '.join(map(str, lines))}); it may import {what}")


def _within(name: str, packages) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


class Below(Contract):
    """The platform (every module of the root package outside the `layers`) reaches none of the `layers`, directly or
    through others, but by the `ignore_imports` (the CLI's own reach up)."""

    type_name = "below"
    layers = fields.ListField(subfield=fields.StringField())
    ignore_imports = fields.SetField(subfield=fields.ImportExpressionField(), required=False)
    unmatched_ignore_imports_alerting = fields.EnumField(AlertLevel, default=AlertLevel.ERROR)

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        removal = contract_utils.remove_ignored_imports_and_report(
            graph=graph, ignore_imports=self.ignore_imports, unmatched_alerting=self.unmatched_ignore_imports_alerting)
        layers = list(self.layers)
        platform = sorted(m for m in graph.modules if "." in m and not _within(m, layers))
        broken = []
        for module in platform:
            for layer in layers:
                chain = graph.find_shortest_chain(importer=module, imported=layer, as_packages=True)
                if chain:
                    broken.append(list(chain))
        return ContractCheck(kept=not broken, warnings=list(removal.warnings),
                             ignored_import_count=removal.ignored_import_count, metadata={"broken": broken})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for chain in check.metadata["broken"]:
            output.print(f"{chain[0]} reaches {chain[-1]} ({' -> '.join(chain)}): the platform may not")
