"""What `make image` hands to the build: this machine's pip settings as one pip.conf plus the local paths they
name, and where the CPU torch wheel comes from."""

from __future__ import annotations

import configparser

from jobaware import containers


def test_pip_settings_merge_files_and_variables_and_mount_what_they_name(tmp_path, monkeypatch):
    index = tmp_path / "mirror" / "simple"
    index.mkdir(parents=True)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    constraint = tmp_path / "pins.txt"
    constraint.write_text("six==1.17.0\n")
    config = tmp_path / "pip.conf"
    config.write_text(f"[global]\nextra-index-url = file://{index} https://pypi.example/simple\n"
                      f"constraint = {constraint}\n[install]\nno-compile = yes\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    conf, paths = containers.pip_settings(tmp_path)
    merged = configparser.ConfigParser()
    merged.read(conf)
    assert merged["global"]["find-links"] == str(wheels) and merged["global"]["constraint"] == str(constraint)
    assert f"file://{index}" in merged["global"]["extra-index-url"] and merged["install"]["no-compile"] == "yes"
    assert {index.parent, wheels, constraint} <= set(paths)  # a local index with its files/ beside simple/
    assert not any("pypi.example" in str(p) for p in paths)


def test_the_cpu_torch_wheel_comes_from_a_local_folder_that_holds_it(tmp_path, monkeypatch):
    empty, wheels = tmp_path / "empty", tmp_path / "wheels"
    empty.mkdir()
    wheels.mkdir()
    monkeypatch.setenv("PIP_FIND_LINKS", str(empty))
    assert containers.torch_find_links().startswith("https://download.pytorch.org/whl/cpu")
    (wheels / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    monkeypatch.setenv("PIP_FIND_LINKS", f"{empty} {wheels}")
    assert containers.torch_find_links() == str(wheels)
