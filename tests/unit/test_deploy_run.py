"""deploy/gpu_node.py run (not just planned) on @fake hosts: what stops a run, what it hides."""

from __future__ import annotations

import json

import pytest

from tests.unit.deploy_plan_fleet import run_pyinfra
from tests.unit.fake_fleet import H100, FakeGpuHost, write_inventory


@pytest.mark.parametrize(
    ("bad_data", "message"),
    [
        (
            {"tf_verison": "2.21.0"},
            "unknown inventory key 'tf_verison'. Did you mean 'tf_version'?",
        ),
        ({"tf_version": "2.99.0"}, "TensorFlow '2.99.0' is not in the version matrix"),
        ({"driver_branch": 535}, "535"),
    ],
)
def test_bad_inventory_value_stops_the_run_before_any_host_is_touched(tmp_path, bad_data, message):
    hosts = {
        "good": FakeGpuHost(gpus=(H100,)),
        "bad": FakeGpuHost(gpus=(H100,), inventory=bad_data),
    }
    result = run_pyinfra(write_inventory(tmp_path / "inventory.py", hosts), "-y")
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert message in output, output[-3000:]
    assert "host @fake/bad:" in output
    assert "Fix:" in output
    assert "Beginning operation run" not in output
    assert "Traceback" not in output


def test_refused_host_is_untouched_while_the_others_are_provisioned(tmp_path):
    proxy = "http://fleet:s3cr3t-pw@proxy.example.net:3128"
    index = "https://fleet:1nd3x-pw@pypi.example.net/simple"
    hosts = {
        "good": FakeGpuHost(inventory={"apt_proxy": proxy, "pip_index_url": index}),
        "secure-boot": FakeGpuHost(secure_boot=True, inventory={"apt_proxy": proxy}),
    }
    result = run_pyinfra(write_inventory(tmp_path / "inventory.py", hosts), "-y", "-vv", "--json")
    output = result.stderr
    assert result.returncode == 1, output[-3000:]
    assert json.loads(result.stdout)["results"]["failed_hosts"] == ["@fake/secure-boot"]
    assert "Beginning operation run" in output
    # -vv prints every command: the refused host ran only the read-only probe.
    commands = [line for line in output.splitlines() if ">>> " in line]
    good = [line for line in commands if line.startswith("[@fake/good]")]
    refused = [line for line in commands if line.startswith("[@fake/secure-boot]")]
    # the bounded apt-get update (a multi-line sh -c script: its label ends it)
    lines = output.splitlines()
    assert any(line.rstrip().endswith("gpufleet-apt-update 120 480") for line in lines)
    assert sum("##gpufleet-probe:os" in line for line in good) == 1  # one probe per host and run
    assert len(refused) == 1
    assert "##gpufleet-probe:os" in refused[0]
    # The index and proxy go on stdin: no pip command line names them, masked or not.
    # (-vv prints whole commands, over several lines for the sh -c scripts.)
    assert "-m pip install --disable-pip-version-check" in output
    assert "--index-url" not in output and "proxy.example.net" not in output
    assert "gpufleet preflight refused this host: Secure Boot is enabled" in output
    # Credentials never appear, though they were written to the proxy file (on stdin).
    assert "s3cr3t-pw" not in result.stdout + output
    assert "1nd3x-pw" not in result.stdout + output


def test_reboot_never_with_nouveau_enables_services_and_reports_the_pending_reboot(tmp_path):
    hosts = {"nouveau": FakeGpuHost(nouveau=True, inventory={"reboot": "never"})}
    result = run_pyinfra(write_inventory(tmp_path / "inventory.py", hosts), "-y", "-vv")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    commands = [line.split(">>> ", 1)[1] for line in output.splitlines() if ">>> " in line]
    assert "systemctl enable nvidia-persistenced.service" in commands
    assert not any(c.startswith("systemctl start nvidia-persistenced") for c in commands)
    assert not any("reboot" in c for c in commands if "sleep 1" in c)
    assert "reboot pending: nouveau is loaded (reboot policy 'never'" in output
