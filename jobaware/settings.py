"""Settings files read into pydantic models: a site's adapter policy, a search space. YAML or TOML (by the file's
ending), every field checked; every error is one line that names the file (or what was read) and the field."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from jobaware.errors import InputError, one_line

M = TypeVar("M", bound=BaseModel)


def load(model: type[M], source: Path | str | dict | None, what: str) -> M:
    """`source` checked as `model`: a YAML or TOML file (a Path), YAML text (a str), a mapping, or None for the
    defaults. `what` names the settings in messages: `policy` gives `policy.yaml: colour: unknown field (valid: ...)`."""
    where = str(source) if isinstance(source, Path) else what
    raw = source
    if isinstance(source, Path):
        try:
            raw = source.read_text()
        except OSError as exc:
            raise InputError(f"{source}: cannot read the {what} file ({exc.strerror or exc})") from None
    if isinstance(raw, str):
        toml = isinstance(source, Path) and source.suffix.lower() == ".toml"
        try:
            raw = tomllib.loads(raw) if toml else yaml.safe_load(raw)
        except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
            raise InputError(f"{where}: not {'TOML' if toml else 'YAML'} ({str(exc).splitlines()[0]})") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected a mapping of {what} fields, got {type(raw).__name__}")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        unknown = f"unknown field (valid: {', '.join(model.model_fields)})"
        raise InputError(f"{where}: {one_line(exc, limit=3, unknown=unknown)}") from None
