"""Each supported OS: its archive's interpreters, the TensorFlow a venv there can run, the
driver branches NVIDIA publishes for it, and the refusals naming the fix."""

from __future__ import annotations

import pytest

from gpufleet import matrix
from gpufleet.matrix.locks import lock_text
from gpufleet.matrix.os_python import newest_tf_for, os_pythons, venv_python_conflict
from gpufleet.sandbox.inventory import os_data
from gpufleet.sandbox.standins.catalog import standin_branches, standin_packages
from gpufleet.sandbox.wheelhouse import host_lock
from gpufleet.spec import NodeSpec, SpecError

TF = matrix.TF_RELEASES


def test_newest_tensorflow_per_python() -> None:
    assert newest_tf_for("3.8") is None  # no release in the matrix has cp38 wheels
    assert newest_tf_for("3.9") == "2.20.0"  # 2.21 needs Python >= 3.10
    assert newest_tf_for("3.10") == "2.21.0"
    assert newest_tf_for("3.12") == "2.21.0"


def test_each_os_offers_its_archives_interpreters() -> None:
    assert os_pythons("ubuntu", "20.04") == {"python3": "3.8", "python3.9": "3.9"}
    assert os_pythons("ubuntu", "22.04") == {"python3": "3.10"}
    assert os_pythons("ubuntu", "24.04") == {"python3": "3.12"}
    assert os_pythons("debian", "12.7") == {"python3": "3.11"}


def test_tf_2_21_venv_on_focal_is_refused_naming_conda_and_the_older_tf_with_python3_9() -> None:
    message = venv_python_conflict(TF["2.21.0"], "ubuntu", "20.04", "python3")
    assert message is not None
    assert message.startswith("TensorFlow 2.21.0 needs Python >= 3.10;")
    assert "a venv on Ubuntu 20.04 would use python3 (3.8)" in message
    assert "python_env: conda" in message
    assert "tf_version <= 2.20.0 with python_interpreter: python3.9" in message
    # python3.9 alone would not do for 2.21, so it is not offered as a fix on its own
    assert "or python_interpreter: python3.9" not in message


def test_tf_2_21_on_focals_python3_9_is_refused_too() -> None:
    message = venv_python_conflict(TF["2.21.0"], "ubuntu", "20.04", "python3.9")
    assert message is not None
    assert "would use python3.9 (3.9)" in message
    assert "tf_version <= 2.20.0 with python_interpreter: python3.9" in message


def test_tf_2_20_on_focals_python3_names_python3_9() -> None:
    message = venv_python_conflict(TF["2.20.0"], "ubuntu", "20.04", "python3")
    assert message is not None
    assert "TensorFlow 2.20.0 needs Python >= 3.9" in message
    assert "or python_interpreter: python3.9" in message


@pytest.mark.parametrize(
    ("tf", "os_version", "interpreter"),
    [
        ("2.20.0", "20.04", "python3.9"),
        ("2.21.0", "22.04", "python3"),
        ("2.21.0", "24.04", "python3"),
        ("2.16.1", "24.04", "python3"),
    ],
)
def test_possible_venvs_are_accepted(tf: str, os_version: str, interpreter: str) -> None:
    assert venv_python_conflict(TF[tf], "ubuntu", os_version, interpreter) is None


def test_an_interpreter_the_archive_lacks_is_refused_listing_what_it_has() -> None:
    message = venv_python_conflict(TF["2.21.0"], "ubuntu", "20.04", "python3.11")
    assert message is not None
    assert "python_interpreter 'python3.11' is not in Ubuntu 20.04's own archive" in message
    assert "python3 (3.8), python3.9 (3.9)" in message
    assert "python_env: conda" in message


def test_a_tf_too_old_for_nobles_python_3_12_names_the_newer_tf() -> None:
    message = venv_python_conflict(TF["2.15.1"], "ubuntu", "24.04", "python3")
    assert message is not None
    assert "TensorFlow 2.15.1 supports Python up to 3.11" in message
    assert "tf_version: 2.21.0 with python_interpreter: python3" in message
    assert "python_env: conda (python_version: '3.11')" in message


def test_python_interpreter_must_be_a_plain_interpreter_command() -> None:
    venv = {"python_env": "venv", "tf_version": "2.20.0"}
    assert NodeSpec.from_host_data(
        {**venv, "python_interpreter": "python3.9"}
    ).venv_interpreter == ("python3.9")
    for bad in ("/usr/bin/python3", "python3.9; rm -rf /", "python2.7", "python3.9 -I"):
        with pytest.raises(SpecError, match="is not a Python command of the OS's archive"):
            NodeSpec.from_host_data({**venv, "python_interpreter": bad})


def test_python_interpreter_is_refused_where_conda_or_uv_bring_their_own_python() -> None:
    with pytest.raises(SpecError, match="only applies to python_env = 'venv' without uv"):
        NodeSpec.from_host_data({"python_interpreter": "python3.9"})  # conda by default
    with pytest.raises(SpecError, match="only applies to python_env = 'venv' without uv"):
        NodeSpec.from_host_data(
            {"python_env": "venv", "use_uv": True, "python_interpreter": "python3.9"}
        )
    assert NodeSpec.from_host_data({"python_env": "venv"}).venv_interpreter == "python3"
    assert NodeSpec.from_host_data({}).venv_interpreter is None


def test_focal_defaults_to_r575_the_newest_branch_nvidia_publishes_there() -> None:
    focal = matrix.resolve("2.20.0", os_id="ubuntu", os_version="20.04", gpu_device_ids=["20b2"])
    assert focal.driver_branch == 575
    assert focal.pinning_package is None  # no nvidia-driver-pinning-575: apt preferences
    assert focal.driver_packages == ["nvidia-open-575"]
    jammy = matrix.resolve("2.21.0", os_id="ubuntu", os_version="22.04", gpu_device_ids=["20b2"])
    assert jammy.driver_branch == 580


def test_r580_on_focal_is_refused_naming_the_branch_to_use() -> None:
    with pytest.raises(matrix.MatrixError) as raised:
        matrix.resolve("2.20.0", os_id="ubuntu", os_version="20.04", driver_branch=580)
    message = str(raised.value)
    assert "driver branch 580 is not published in NVIDIA's ubuntu2004 repository" in message
    assert "set driver_branch to 575 or older" in message
    with pytest.raises(matrix.MatrixError, match="not published in NVIDIA's ubuntu2004"):
        matrix.resolve("2.20.0", os_id="ubuntu", os_version="20.04", cuda_version="13.0")


def test_sandbox_hosts_get_the_newest_tf_their_images_interpreter_runs() -> None:
    assert os_data("ubuntu20.04") == {
        "python_interpreter": "python3.9",
        "tf_version": "2.20.0",
        "driver_branch": 575,  # group_data/all.py's 580 is not published for 20.04
    }
    assert os_data("ubuntu22.04") == {}  # python3 3.10, TF 2.21.0: the defaults
    assert os_data("ubuntu24.04") == {}  # python3 3.12, TF 2.21.0
    assert os_data("unknown") == {}


def test_the_focal_standin_repository_has_r575_and_tf_2_20s_stack_and_no_r580_or_dcgm() -> None:
    assert standin_branches("ubuntu2004") == (570, 575)
    assert standin_branches("ubuntu2404") == (570, 580)
    packages = {
        f"{p.name}={p.version}"
        for p in standin_packages(
            repo_distro="ubuntu2004",
            repo_arch="x86_64",
            kernel_release="5.4.0-200-generic",
            branches=standin_branches("ubuntu2004"),
            tf_version="2.20.0",
        )
    }
    names = {spec.split("=", 1)[0] for spec in packages}
    assert {"nvidia-open-575", "cuda-drivers-575", "cuda-toolkit-12-5"} <= names
    assert "libnccl2=2.25.1-1+cuda12.4" in packages  # TF 2.20's NCCL, built for CUDA 12.4
    assert "nvidia-driver-575-open=575.57.08-0ubuntu1" in packages
    assert not any("580" in name for name in names)
    assert not any(name.startswith("datacenter-gpu-manager") for name in names)


def test_the_shipped_tf_2_20_lock_pins_a_full_set_for_focals_python_3_9() -> None:
    # The locks are universal (every Python from the release's minimum, by markers): the one
    # the sandbox's focal host installs and the wheelhouse serves is this one, for cp39.
    pins = host_lock(lock_text("tensorflow-cpu", "2.20.0"), "3.9", ["manylinux_2_17_x86_64"])
    names = [line.split("==")[0] for line in pins.splitlines()]
    assert "tensorflow-cpu" in names and "numpy" in names and "tomli" in names
    assert len(names) == len(set(names))


PY = "/opt/gpufleet/venvs/tf/bin/python"
PIP_LOCK = "/opt/gpufleet/venvs/tf/etc/gpufleet/pip.lock.txt"


def _pip_commands(found: str | None) -> list:
    from gpufleet.matrix.locks import tool_lock_text
    from tests.operations.helpers import run_operation

    commands, _ = run_operation(
        "python.pip_at_least",
        {"probes.PipVersion": {f"python={PY}": found}},
        python=PY,
        minimum="20.3",
        requirement="pip==26.0.1",
        lock=PIP_LOCK,
        lock_text=tool_lock_text("pip==26.0.1"),
    )
    return commands


def test_focals_pip_20_0_2_is_upgraded_from_the_hashed_lock_and_a_new_one_left_alone() -> None:
    for found in ("20.0.2", None):  # None: the venv is made in this run
        (command,) = _pip_commands(found)
        text = command["command"] if isinstance(command, dict) else command
        assert f"{PY} -m pip install" in text
        assert f"--require-hashes --no-deps -r {PIP_LOCK}" in text
    assert _pip_commands("26.0.1") == []
    assert _pip_commands("22.0.2") == []


def test_pip_version_fact_reads_pips_own_line() -> None:
    from gpufleet.operations.probes import PipVersion

    fact = PipVersion()
    line = "pip 20.0.2 from /opt/gpufleet/venvs/tf/lib/python3.9/site-packages/pip (python 3.9)"
    assert fact.process([line]) == "20.0.2"
    assert fact.process([]) is None
    assert fact.process(["/x/python: No module named pip"]) is None
