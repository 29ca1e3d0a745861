"""`gpufleet matrix`: output and exit codes."""

from __future__ import annotations

import json

import pytest

from gpufleet.cli import main as gpufleet_main
from gpufleet.commands.matrix import main


def test_resolves_h100(capsys):
    assert main(["--tf", "2.21.0", "--os", "ubuntu:22.04", "--gpu", "2330"]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA H100 80GB HBM3" in out
    assert "CUDA           12.5 (TF built with 12.5); cuDNN 9.3.0.75; NCCL 2.27.7" in out
    assert "branch 580 (open modules), minimum 555.42.02" in out
    assert "  nvidia-driver-pinning-580\n  nvidia-open\n" in out
    assert "  nvidia-cudnn-cu12==9.3.0.75" in out


def test_refuses_h100_on_535(capsys):
    argv = ["--tf", "2.21.0", "--os", "ubuntu:22.04", "--gpu", "2330", "--driver-branch", "535"]
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("refused: TensorFlow 2.21.0 wheels carry no sm_90 code")
    assert "Fix: set driver_branch to 555 or newer" in captured.err


def test_a100_on_535_warns(capsys):
    assert main(["--gpu", "20b2", "--driver-branch", "535"]) == 0
    out = capsys.readouterr().out
    assert "warning: driver branch 535 is older than 555.42.02" in out


def test_json_output(capsys):
    assert main(["--gpu", "20b2,22a3", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is True and data["fabricmanager_package"] == "nvidia-fabricmanager"
    assert "datacenter-gpu-manager-4-cuda13=1:4.5.1-1" in data["dcgm_packages"]
    assert data["apt_packages"][:2] == ["nvidia-driver-pinning-580", "nvidia-open"]
    assert "libnvidia-nscq" in data["apt_packages"]
    assert data["wheel_constraints"]["nvidia-nccl-cu12"] == "2.27.7"


def test_json_refusal_lists_every_conflict(capsys):
    assert main(["--tf", "2.9.0", "--os", "centos:7", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False and len(data["conflicts"]) == 2


def test_constraints(capsys):
    assert main(["--tf", "2.18.0", "--constraints"]) == 0
    out = capsys.readouterr().out
    assert "nvidia-nccl-cu12==2.21.5\n" in out


def test_bad_os_argument(capsys):
    # malformed input is bad usage (2), as argparse's errors; 1 is kept for "refused"
    assert main(["--os", "ubuntu22.04"]) == 2
    assert "must be ID:VERSION" in capsys.readouterr().err


def test_usage_error_exits_2():
    with pytest.raises(SystemExit) as info:
        main(["--driver-branch", "five-eighty"])
    assert info.value.code == 2


def test_reachable_from_the_gpufleet_command(capsys):
    assert gpufleet_main(["matrix", "--gpu", "1db1"]) == 0
    assert "(proprietary modules)" in capsys.readouterr().out
