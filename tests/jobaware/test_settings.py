"""Settings files into pydantic models: YAML, TOML, text or a mapping; every error one line naming where."""

from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, Field

from jobaware.errors import InputError
from jobaware.settings import load


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rate: int = Field(10, ge=1)
    mode: str = "dry-run"


def test_yaml_toml_text_mappings_and_none(tmp_path):
    (tmp_path / "s.yaml").write_text("rate: 3\n")
    (tmp_path / "s.toml").write_text('mode = "act"\n')
    assert load(Settings, tmp_path / "s.yaml", "policy").rate == 3
    assert load(Settings, tmp_path / "s.toml", "policy").mode == "act"
    assert load(Settings, "rate: 4", "policy").rate == 4 and load(Settings, {"rate": 5}, "policy").rate == 5
    assert load(Settings, None, "policy") == Settings() and load(Settings, "", "policy") == Settings()


@pytest.mark.parametrize("text, suffix, words", [
    ("rate: 0\n", ".yaml", "s.yaml: rate: input should be greater than or equal to 1, got 0"),
    ("colour: red\n", ".yaml", "s.yaml: colour: unknown field (valid: rate, mode)"),
    ("rate: [1\n", ".yaml", "s.yaml: not YAML ("),
    ("rate = \n", ".toml", "s.toml: not TOML ("),
    ("- 1\n", ".yaml", "s.yaml: expected a mapping of policy fields, got list"),
])
def test_every_error_is_one_line_naming_the_file_and_the_field(tmp_path, text, suffix, words):
    path = tmp_path / f"s{suffix}"
    path.write_text(text)
    with pytest.raises(InputError) as error:
        load(Settings, path, "policy")
    assert str(error.value).startswith(str(path)) and words in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(InputError, match="cannot read the policy file"):
        load(Settings, Path(tmp_path / "missing.yaml"), "policy")
