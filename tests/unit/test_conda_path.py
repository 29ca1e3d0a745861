"""The conda path, checked against conda's and Miniforge's own documentation and source: the
installer's batch flags, `conda create` from conda-forge alone, and a mirror for air-gapped
sites in the Miniforge's .condarc (conda_channel_url -> channel_alias)."""

from __future__ import annotations

import shlex

import pytest
import yaml

from gpufleet.operations.python import _MINIFORGE
from gpufleet.spec import NodeSpec, SpecError
from gpufleet.templates import render
from tests.operations.helpers import run_operation

ENV = "/opt/gpufleet/miniforge3/envs/tf"


def test_miniforge_installer_runs_in_batch_mode_into_the_prefix() -> None:
    # constructor's header.sh (the Miniforge installer): -b batch mode without prompts, -u
    # update an existing installation, -p PREFIX the install prefix (no spaces allowed).
    assert 'bash "$tmp/installer.sh" -b -u -p "$2"' in _MINIFORGE


def test_conda_create_is_non_interactive_from_conda_forge_only_with_an_explicit_python() -> None:
    commands, _ = run_operation(
        "python.conda_env",
        {"probes.PathExists": {f"path={ENV}/bin/python": False}},
        conda="/opt/gpufleet/miniforge3/bin/conda",
        env_dir=ENV,
        python_version="3.11",
    )
    words = shlex.split(commands[0])
    assert words[:2] == ["/opt/gpufleet/miniforge3/bin/conda", "create"]
    assert {"--yes", "--quiet", "--override-channels"} <= set(words)
    assert words[words.index("--channel") + 1] == "conda-forge"
    assert words[words.index("--prefix") + 1] == ENV
    assert words[-2:] == ["python=3.11", "pip"]
    assert "defaults" not in words


def test_conda_create_refuses_a_channel_or_python_that_is_not_plain() -> None:
    from pyinfra.api import OperationError

    for bad in ({"channel": "conda-forge --offline"}, {"python_version": "3.11; rm"}):
        with pytest.raises(OperationError):
            run_operation(
                "python.conda_env",
                {"probes.PathExists": {f"path={ENV}/bin/python": False}},
                **{"conda": "/c/bin/conda", "env_dir": ENV, "python_version": "3.11", **bad},
            )


def test_condarc_maps_conda_forge_to_the_mirror_and_lists_no_defaults() -> None:
    url = "https://user:pa%40ss@conda-mirror.example.net/mirrors"
    text = render("condarc.j2", conda_root="/opt/gpufleet/miniforge3", channel_alias=url)
    config = yaml.safe_load(text)
    assert config == {"channels": ["conda-forge"], "channel_alias": url}
    assert "defaults" not in config["channels"]


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("https://m.example/conda-forge", "ends with /conda-forge"),
        ("https://m.example/x?token=t", "has a query or fragment"),
        ("https://m.example/x'y", "holds a space, quote"),
        ("ftp://m.example/x", "is not an http(s):// or file:// URL"),
    ],
)
def test_conda_channel_url_is_refused_unless_a_plain_base_url(value: str, error: str) -> None:
    with pytest.raises(SpecError, match="conda_channel_url") as raised:
        NodeSpec.from_host_data({"conda_channel_url": value})
    assert error in str(raised.value)
    assert "token=t" not in str(raised.value)


def test_conda_channel_url_accepts_a_mirror_with_a_login() -> None:
    spec = NodeSpec.from_host_data({"conda_channel_url": "https://u:p@m.example/conda"})
    assert spec.conda_channel_url == "https://u:p@m.example/conda"
