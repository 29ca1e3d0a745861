"""NodeSpec: defaults, type and value checks, unknown keys, combinations, pyinfra host data."""

from __future__ import annotations

import dataclasses

import pytest
from pyinfra.api import Config, HiddenValue, Inventory, State

from gpufleet.matrix import MatrixError
from gpufleet.spec import KEY_DOCS, NodeSpec, SpecError, defaults, spec_for_host
from gpufleet.spec import model as spec_module


def error_of(data: dict) -> str:
    with pytest.raises(SpecError) as info:
        NodeSpec.from_host_data(data)
    return str(info.value)


# --- defaults ---------------------------------------------------------------------------


def test_defaults():
    spec = NodeSpec.from_host_data({})
    assert spec == NodeSpec()
    assert spec.tf_version == "2.21.0"
    assert spec.driver_branch is None and spec.cuda_version is None
    assert spec.kernel_module_flavor == "auto"
    assert (spec.python_env, spec.python_version, spec.use_uv) == ("conda", "3.11", False)
    assert (spec.env_name, spec.env_prefix) == ("tf", "/opt/gpufleet")
    assert spec.tensorflow_package == "tensorflow[and-cuda]" and spec.require_cuda_build
    assert spec.pip_index_url is None and spec.apt_proxy is None
    assert spec.nvidia_repo_url == "https://developer.download.nvidia.com/compute/cuda/repos"
    assert spec.nvidia_repo_key_fingerprint == "EB693B3035CD5710E231E123A4B469963BF863CC"
    assert (spec.reboot, spec.reboot_timeout_s) == ("auto", 600)
    assert spec.secure_boot_plan == "none" and spec.fabric_manager == "auto"
    assert spec.install_cuda_toolkit and spec.install_cudnn and spec.install_nccl
    assert spec.persistenced and spec.periodic_checks and not spec.node_exporter
    assert spec.payload_dir == "/opt/gpufleet/validation"
    assert spec.textfile_dir == "/var/lib/prometheus/node-exporter"
    assert spec.thresholds == {} and spec.gpu_count is None and not spec.gpu_less
    assert set(spec.miniforge_sha256) == {"x86_64", "aarch64"}


def test_every_key_is_documented_once():
    names = [f.name for f in dataclasses.fields(NodeSpec)]
    assert list(KEY_DOCS) == names
    assert all(doc and "\n" not in doc for doc in KEY_DOCS.values())
    assert set(defaults()) == set(names)
    for name in names:  # the generated docstring table lists every key
        assert f"\n    {name} " in (NodeSpec.__doc__ or "")


def test_mutable_defaults_are_not_shared():
    a, b = NodeSpec(), NodeSpec()
    a.thresholds["x"] = 1
    assert b.thresholds == {}


def test_paths():
    conda = NodeSpec()
    assert conda.conda_root == "/opt/gpufleet/miniforge3"
    assert conda.env_dir == "/opt/gpufleet/miniforge3/envs/tf"
    assert conda.python_bin == "/opt/gpufleet/miniforge3/envs/tf/bin/python"
    venv = NodeSpec.from_host_data({"python_env": "venv", "env_name": "ml"})
    assert venv.env_dir == "/opt/gpufleet/venvs/ml"
    assert conda.miniforge_installer_url("aarch64") == (
        "https://github.com/conda-forge/miniforge/releases/download/25.3.0-3/"
        "Miniforge3-25.3.0-3-Linux-aarch64.sh"
    )
    mirror = NodeSpec.from_host_data({"miniforge_url": "http://mirror/Miniforge3.sh"})
    assert mirror.miniforge_installer_url("x86_64") == "http://mirror/Miniforge3.sh"


# --- keys that are not ours -------------------------------------------------------------


def test_pyinfra_and_user_keys_are_ignored():
    data = {
        "ssh_user": "ubuntu",
        "ssh_port": 22,
        "_sudo": True,
        "_env": {"A": "b"},
        "docker_identifier": "x",
        "chroot_directory": "/srv",
        "fake_responses": {},
        "x_rack": "r12",
    }
    assert NodeSpec.from_host_data(data) == NodeSpec()


def test_unknown_key_did_you_mean():
    message = error_of({"tf_verison": "2.21.0"})
    assert "unknown inventory key 'tf_verison'" in message
    assert "Did you mean 'tf_version'?" in message
    assert "'x_'" in message


def test_unknown_key_without_close_match():
    message = error_of({"colour": "blue"})
    assert "unknown inventory key 'colour'" in message and "Did you mean" not in message


# --- types and values -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("tf_version", 2.21, "a string"),
        ("driver_branch", "580", "an integer or unset (None)"),
        ("gpu_count", True, "an integer or unset (None)"),
        ("use_uv", "yes", "true/false"),
        ("reboot_timeout_s", 1.5, "an integer"),
        ("thresholds", ["a"], "a mapping"),
        ("miniforge_sha256", {"x86_64": 1}, "a mapping"),
    ],
)
def test_wrong_types(key, value, expected):
    message = error_of({key: value})
    assert message.startswith(f"{key} = {value!r} has the wrong type")
    assert f"expected {expected}" in message and "Fix:" in message


@pytest.mark.parametrize(
    ("key", "choices"),
    [
        ("kernel_module_flavor", "auto, open, proprietary"),
        ("python_env", "conda, venv"),
        ("reboot", "auto, never, always"),
        ("secure_boot_plan", "none, ubuntu-signed, mok"),
        ("fabric_manager", "auto, on, off"),
    ],
)
def test_enum_refusals(key, choices):
    message = error_of({key: "bogus"})
    assert f"{key} = 'bogus' is not one of {choices}" in message and "Fix:" in message


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"env_prefix": "opt/gpufleet"}, "not an absolute path"),
        ({"results_dir": "results"}, "not an absolute path"),
        ({"nvidia_repo_url": "developer.download.nvidia.com"}, "not an http(s):// or file:// URL"),
        ({"python_version": "3"}, "not a version like '3.11'"),
        ({"cuda_version": "twelve"}, "not a version like '3.11'"),
        ({"reboot_timeout_s": 0}, "leaves no time"),
        ({"min_free_disk_gib": -1}, "is negative"),
        ({"nvidia_repo_key_fingerprint": "3BF863CC"}, "not a 40-hex-digit fingerprint"),
        ({"miniforge_sha256": {"x86_64": "abc"}}, "not a lower-case sha256"),
    ],
)
def test_bad_values(data, fragment):
    assert fragment in error_of(data)


def test_number_for_a_version_says_quote_it():
    # what `pyinfra --data python_version=3.10` produces: JSON turns it into the float 3.1
    message = error_of({"python_version": 3.1})
    assert "expected a string" in message and "quote it, e.g. python_version = '3.1'" in message


def test_secret_value_is_not_echoed():
    message = error_of({"apt_proxy": "user:hunter2@proxy:3128"})
    assert "hunter2" not in message and "'***'" in message


def test_every_problem_reported_at_once():
    message = error_of({"reboot": "sometimes", "tf_verison": "2.21.0", "use_uv": 1})
    assert message.startswith("3 inventory problems:")


# --- combinations -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"secure_boot_plan": "mok"}, "needs mok_key_path and mok_cert_path"),
        ({"secure_boot_plan": "mok", "mok_key_path": "/k"}, "needs mok_key_path and mok_cert_path"),
        ({"gpu_less": True, "gpu_count": 2}, "gpu_less = True contradicts gpu_count = 2"),
        ({"use_uv": True}, "use_uv = True needs python_env = 'venv'"),
        ({"tensorflow_package": "tensorflow-cpu"}, "set require_cuda_build = False"),
        ({"python_version": "3.14"}, "outside TensorFlow 2.21.0's range 3.10..3.13"),
        ({"tf_version": "2.15.1", "python_version": "3.12"}, "range 3.9..3.11"),
        ({"tf_version": "2.14.0"}, "not in the version matrix (known: 2.15.1"),
        ({"driver_branch": 470}, "driver_branch = 470 is not a known branch"),
        ({"cuda_version": "11.8"}, "cuda_version = '11.8' is not known"),
    ],
)
def test_impossible_combinations(data, fragment):
    assert fragment in error_of(data)


def test_allowed_combinations():
    NodeSpec.from_host_data(
        {"secure_boot_plan": "mok", "mok_key_path": "/k.priv", "mok_cert_path": "/k.der"}
    )
    NodeSpec.from_host_data({"gpu_less": True, "gpu_count": 0})
    sandbox = NodeSpec.from_host_data(
        {
            "python_env": "venv",
            "use_uv": True,
            "tensorflow_package": "tensorflow-cpu",
            "require_cuda_build": False,
        }
    )
    assert sandbox.use_uv
    # the system Python of a plain venv is not ours to choose: no range check
    NodeSpec.from_host_data({"python_env": "venv", "python_version": "3.14"})


# --- secrets ----------------------------------------------------------------------------


def test_apt_proxy_with_credentials_is_hidden():
    spec = NodeSpec.from_host_data({"apt_proxy": "http://user:pw@proxy:3128"})
    hidden = spec.apt_proxy_hidden
    assert isinstance(hidden, HiddenValue)
    assert str(hidden) == "*MASKED*" and hidden.unmask() == "http://user:pw@proxy:3128"
    assert "pw@" not in repr(spec)
    plain = NodeSpec.from_host_data({"apt_proxy": "http://proxy:3128"})
    assert plain.apt_proxy_hidden == "http://proxy:3128"
    assert NodeSpec().apt_proxy_hidden is None


def test_pip_index_url_with_token_is_hidden():
    spec = NodeSpec.from_host_data({"pip_index_url": "https://__token__:abc@pypi.example/simple"})
    assert isinstance(spec.pip_index_url_hidden, HiddenValue)
    assert "abc@" not in repr(spec)


# --- resolve ----------------------------------------------------------------------------


def test_resolve_wraps_the_matrix():
    spec = NodeSpec.from_host_data({"driver_branch": 535})
    with pytest.raises(MatrixError, match="Fix: set driver_branch to 555 or newer"):
        spec.resolve(os_id="ubuntu", os_version="22.04", arch="x86_64", gpu_device_ids=["2330"])
    r = spec.resolve(os_id="ubuntu", os_version="22.04", arch="x86_64", gpu_device_ids=["20b2"])
    assert r.driver_branch == 535 and r.warnings


def test_resolve_passes_python_only_when_we_choose_it():
    spec = NodeSpec.from_host_data({"tf_version": "2.15.1", "python_version": "3.11"})
    r = spec.resolve(os_id="debian", os_version="12", arch="aarch64", gpu_device_ids=[])
    assert (r.repo_distro, r.repo_arch, r.cuda) == ("debian12", "sbsa", "12.2")


def test_gpu_less_resolves_without_gpus():
    spec = NodeSpec.from_host_data({"gpu_less": True})
    r = spec.resolve(os_id="ubuntu", os_version="24.04", arch="x86_64", gpu_device_ids=["2330"])
    assert r.gpu_names == ()


# --- pyinfra host data ------------------------------------------------------------------


def make_host(name: str, host_data: dict, all_data: dict | None = None, **groups):
    inventory = Inventory(([(name, host_data)], all_data or {}), **groups)
    State(inventory, Config())
    return inventory.get_host(name)


def test_spec_for_host_merges_pyinfra_data():
    spec_module._CACHE.clear()
    host = make_host(
        "gpu1",
        {"ssh_user": "ubuntu", "driver_branch": 570, "_sudo": True},
        {"python_env": "venv"},
        h100=(["gpu1"], {"reboot": "never", "gpu_count": 8}),
    )
    spec = spec_for_host(host)
    assert (spec.driver_branch, spec.python_env, spec.reboot, spec.gpu_count) == (
        570,
        "venv",
        "never",
        8,
    )
    assert spec_for_host(host) is spec  # cached
    host.data.driver_branch = 580  # override data set in a deploy: the cache notices
    assert spec_for_host(host).driver_branch == 580


def test_spec_for_host_names_the_host():
    spec_module._CACHE.clear()
    host = make_host("gpu2", {"rebot": "never"})
    with pytest.raises(SpecError, match=r"^host gpu2: unknown inventory key 'rebot'\."):
        spec_for_host(host)
