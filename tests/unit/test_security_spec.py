"""Findings 3, 5, 9, 10, 12 and 18 (security audit): inventory values and what a host shell
does with them. Rendered scripts and the operations' commands run in a real sh here."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpufleet.operations.python import _MINIFORGE
from gpufleet.operations.stdin import secret_lines
from gpufleet.spec import NodeSpec, SpecError
from gpufleet.stages import python_env
from gpufleet.templates import render
from tests.operations.helpers import operation_commands


def refused(data: dict) -> str:
    with pytest.raises(SpecError) as caught:
        NodeSpec.from_host_data(data)
    return str(caught.value)


HOSTILE_NAMES = ["tf$(touch PWNED)", "tf`touch PWNED`", 'tf";touch PWNED;"', "tf\ntouch PWNED"]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_finding05_hostile_env_name_runs_no_command(tmp_path, name):
    assert "env_name" in refused({"env_name": name})
    # Rendered all the same (a spec built without checks): sh runs the wrapper and env.sh,
    # and no command hidden in the name runs.
    spec = NodeSpec(env_prefix=str(tmp_path / "prefix"), env_name=name)
    env_file = python_env.env_file(spec)
    wrapper = tmp_path / "gpufleet-python"
    wrapper.write_text(render("gpufleet-python.j2", env_dir=spec.env_dir, env_file=env_file))
    env_sh = tmp_path / "env.sh"
    env_sh.write_text(render("gpufleet-env.sh.j2", env_dir=spec.env_dir))
    activate = tmp_path / "activate.sh"
    activate.write_text(render("conda-activate.sh.j2", env_dir=spec.env_dir, env_file=env_file))
    for script in ([str(wrapper), "-c", "print(1)"], ["-c", f". {env_sh}"], [str(activate)]):
        subprocess.run(["sh", *script], cwd=tmp_path, capture_output=True, timeout=30)
    assert not (tmp_path / "PWNED").exists()


# Each wrong value, and the fix its refusal names (finding 18: "refused with a fix").
FIX_ENV_NAME = (
    "Fix: letters, digits, _ . - (starting with a letter or digit, at most 64), e.g. 'tf'."
)
FIX_ENV_PREFIX = (
    "Fix: use letters, digits and _ . + - between single slashes, with no '..' and no trailing "
    "slash, e.g. /opt/gpufleet."
)
FIX_RESULTS_DIR = (
    "Fix: give a directory of gpufleet's own, e.g. the default '/var/lib/gpufleet/results'."
)
FIX_TEXTFILE_DIR = (
    "Fix: give a directory of gpufleet's own, e.g. the default '/var/lib/prometheus/node-exporter'."
)
FIX_PAYLOAD_DIR = (
    "Fix: give a directory of gpufleet's own, e.g. the default '/opt/gpufleet/validation'."
)
FIX_MOK_KEY_PATH = "Fix: start it with '/'."
FIX_TENSORFLOW_PACKAGE = (
    "Fix: e.g. 'tensorflow[and-cuda]' or 'tensorflow-cpu' (the version comes from tf_version)."
)
FIX_KERNEL_HEADERS_PACKAGE = "Fix: 'auto' or e.g. 'linux-headers-generic'."
FIX_PIP_TRUSTED_HOST = "Fix: e.g. 'pypi-mirror.example.net'."
FIX_URL = "Fix: give the full URL, e.g. http://proxy.example:3128."
FIX_URL_CHARACTERS = (
    "Fix: give the full URL, e.g. http://proxy.example:3128, with such characters "
    "percent-encoded (%20 for a space)."
)
FIX_MINIFORGE_VERSION = (
    "Fix: a release name from github.com/conda-forge/miniforge/releases, or leave it unset "
    "(the pinned one)."
)
FIX_MINIFORGE_SHA256 = (
    "Fix: leave it unset (the pinned release's sums) or give one per architecture."
)
FIX_MINIFORGE_ARCH = "Fix: use x86_64, aarch64, ppc64le."
FIX_REBOOT_TIMEOUT_S = "Fix: give a real figure."
FIX_PERIODIC_SCHEDULE = (
    "Fix: e.g. 'daily', 'hourly' or 'Mon..Fri *-*-* 03:00' (check it: systemd-analyze calendar)."
)
FIX_THRESHOLD_NAME = "did you mean 'xla_speedup_min'?"
FIX_THRESHOLD_VALUE = "Fix: e.g. thresholds = {'xla_speedup_min': 1.2}."


@pytest.mark.parametrize(
    ("data", "fix"),
    [
        ({"env_name": "../../../../usr"}, FIX_ENV_NAME),
        ({"env_name": ""}, FIX_ENV_NAME),
        ({"env_prefix": "/opt/x$(id)"}, FIX_ENV_PREFIX),
        ({"env_prefix": "/opt/../etc"}, FIX_ENV_PREFIX),
        ({"env_prefix": "/opt/gpufleet/"}, FIX_ENV_PREFIX),
        ({"results_dir": "/"}, FIX_RESULTS_DIR),
        ({"results_dir": "/etc"}, FIX_RESULTS_DIR),
        ({"results_dir": "/tmp/results"}, FIX_RESULTS_DIR),
        ({"textfile_dir": "/"}, FIX_TEXTFILE_DIR),
        ({"payload_dir": "/usr"}, FIX_PAYLOAD_DIR),
        ({"mok_key_path": "keys/mok.priv"}, FIX_MOK_KEY_PATH),
        ({"mok_key_path": "/k\nPOST_BUILD=x"}, FIX_ENV_PREFIX),
        ({"tensorflow_package": ""}, FIX_TENSORFLOW_PACKAGE),
        ({"tensorflow_package": "--index-url=http://evil.example/simple"}, FIX_TENSORFLOW_PACKAGE),
        ({"tensorflow_package": "https://evil.example/tf.whl"}, FIX_TENSORFLOW_PACKAGE),
        ({"kernel_headers_package": "--version"}, FIX_KERNEL_HEADERS_PACKAGE),
        ({"kernel_headers_package": "-oAPT::x=1"}, FIX_KERNEL_HEADERS_PACKAGE),
        ({"kernel_headers_package": ""}, FIX_KERNEL_HEADERS_PACKAGE),
        ({"pip_trusted_host": "*"}, FIX_PIP_TRUSTED_HOST),
        ({"pip_trusted_host": "--index-url"}, FIX_PIP_TRUSTED_HOST),
        ({"pip_index_url": "https://pypi.example:99999/simple"}, FIX_URL),
        ({"pip_index_url": "https://pypi.example/simple\n"}, FIX_URL_CHARACTERS),
        ({"nvidia_repo_url": "https://m.example/re pos"}, FIX_URL_CHARACTERS),
        ({"miniforge_version": ""}, FIX_MINIFORGE_VERSION),
        ({"miniforge_version": "../../x"}, FIX_MINIFORGE_VERSION),
        ({"miniforge_version": "1;id"}, FIX_MINIFORGE_VERSION),
        ({"miniforge_sha256": {}}, FIX_MINIFORGE_SHA256),
        ({"miniforge_sha256": {"x86-64": "0" * 64}}, FIX_MINIFORGE_ARCH),
        ({"reboot_timeout_s": 10**12}, FIX_REBOOT_TIMEOUT_S),
        ({"periodic_schedule": "daily; rm -rf /"}, FIX_PERIODIC_SCHEDULE),
        # review §3 row 7: plain words had systemd's charset, so the timer failed on the host
        ({"periodic_schedule": "every day"}, FIX_PERIODIC_SCHEDULE),
        ({"periodic_schedule": "daily 03:00"}, FIX_PERIODIC_SCHEDULE),
        ({"apt_proxy": "http://u:p@[::1"}, FIX_URL),
        ({"thresholds": {"xla_speedup_minimum": 1.2}}, FIX_THRESHOLD_NAME),
        ({"thresholds": {"xla_speedup_min": "fast"}}, FIX_THRESHOLD_VALUE),
        ({"thresholds": {"xla_speedup_min": -1}}, FIX_THRESHOLD_VALUE),
        ({"thresholds": {"xla_speedup_min": float("nan")}}, FIX_THRESHOLD_VALUE),
        ({"env_name": "tf\udcff"}, FIX_ENV_NAME),
    ],
)
def test_finding18_wrong_values_are_refused_with_a_fix(data, fix):
    message = refused(data)
    assert next(iter(data)) in message
    assert fix in message, message
    assert "Traceback" not in message


def test_finding18_good_values_still_pass():
    NodeSpec.from_host_data(
        {
            "env_name": "tf-2.21_gpu",
            "env_prefix": "/srv/gpufleet",
            "tensorflow_package": "tensorflow[and-cuda]",
            "kernel_headers_package": "linux-headers-generic-hwe-22.04",
            "pip_trusted_host": "pypi-mirror.example.net:8080",
            "pip_index_url": "https://u:p%40w@pypi.example.net/simple?token=abc",
            "apt_proxy": "http://u:pw@[fd00::1]:3128",
            "miniforge_sha256": {"x86_64": "a" * 64},
            "periodic_schedule": "Mon..Fri *-*-* 03:00",
            "results_dir": "/var/lib/gpufleet/results",
        }
    )


def test_finding12_option_like_package_is_a_package_for_apt():
    commands, _ = operation_commands(
        "apt.install", {"deb.DebPackages": {}}, packages=["dkms", "--version"]
    )
    raw = commands[0].get_raw_value()
    assert " -- dkms --version" in raw
    if shutil.which("apt-get"):
        # What apt does with it after "--": no "apt 2.x" version banner, a missing package.
        out = subprocess.run(
            ["apt-get", "-s", "install", "--", "--version"], capture_output=True, text=True
        )
        assert out.returncode != 0
        assert not out.stdout.startswith("apt ")


def test_finding12_pip_requirement_after_double_dash():
    commands, _ = operation_commands(
        "python.pip_tool",
        {"probes.PathExists": {"path=/t/bin/uv": False}},
        python="/t/bin/python",
        package="--index-url=http://evil.example/simple",
        executable="/t/bin/uv",
    )
    assert "--no-input -- --index-url=http://evil.example/simple" in commands[0].get_raw_value()


def miniforge_command(url: str, sha256: str, root: Path):
    facts = {"probes.PathExists": {f"path={root}/bin/conda": False}}
    (command,) = operation_commands(
        "python.miniforge", facts, url=url, sha256=sha256, root=str(root)
    )[0]
    return command


def run(command, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command.get_raw_value(),
        shell=True,
        input=command.connector_arguments["_stdin"],
        capture_output=True,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path / "tmp")},
    )


@pytest.mark.skipif(not shutil.which("curl"), reason="needs curl")
def test_finding03_installer_is_checked_and_run_as_one_private_copy(tmp_path):
    (tmp_path / "tmp").mkdir()
    installer = tmp_path / "Miniforge3.sh"
    installer.write_text('mkdir -p "$4/bin" && echo ran > "$4/bin/conda"\n')
    good = hashlib.sha256(installer.read_bytes()).hexdigest()
    root = tmp_path / "miniforge3"
    wrong = run(miniforge_command(installer.as_uri(), "0" * 64, root), tmp_path)
    assert wrong.returncode == 1
    assert f"has sha256 {good}, expected {'0' * 64}" in wrong.stderr
    assert not root.exists()  # never run
    assert not list((tmp_path / "tmp").iterdir())  # and the mismatching file is gone
    command = miniforge_command(installer.as_uri(), good, root)
    # One command downloads, checks and runs: nothing in between, no path anyone can guess.
    assert "curl" in command.get_raw_value() and "bash" in command.get_raw_value()
    assert "/var/cache" not in command.get_raw_value()
    ok = run(command, tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert (root / "bin" / "conda").read_text() == "ran\n"
    assert not list((tmp_path / "tmp").iterdir())


def test_finding03_script_runs_the_checked_copy():
    # The check and the run name the same private file, in the same shell.
    assert 'sha256sum < "$tmp/installer.sh"' in _MINIFORGE
    assert 'bash "$tmp/installer.sh"' in _MINIFORGE


def test_finding10_host_without_a_hash_for_its_arch_is_refused(tmp_path):
    from tests.unit.fake_fleet import FakeGpuHost, write_inventory
    from tests.unit.test_deploy_run import run_pyinfra

    sums = {"x86_64": NodeSpec().miniforge_sha256["x86_64"]}
    # require_cuda_build off: an arm64 GPU host is otherwise refused before this check (no CUDA
    # TensorFlow on PyPI for aarch64).
    inventory = {"miniforge_sha256": sums, "require_cuda_build": False}
    hosts = {"arm": FakeGpuHost(arch="aarch64", inventory=inventory)}
    result = run_pyinfra(write_inventory(tmp_path / "inventory.py", hosts), "--dry")
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "miniforge_sha256 has no entry for this host's architecture 'aarch64'" in output
    assert "Traceback" not in output


def test_finding09_secrets_reach_pip_through_its_environment_not_argv(tmp_path):
    index = "https://u:1NDEXPW@pypi.example/simple"
    proxy = "http://u:PR0XYPW@proxy.example:3128"
    facts = {
        "files.FileContents": {"path=/e/stamp": None},
        "env_check.EnvProblems": {"python=/e/bin/python, requirements=['tensorflow==2.21.0']": []},
    }
    commands, _ = operation_commands(
        "python.pip_install_checked",
        facts,
        python="/e/bin/python",
        requirement="tensorflow==2.21.0",
        tf_version="2.21.0",
        lock="/e/lock.txt",
        lock_text="tensorflow==2.21.0 --hash=sha256:" + "0" * 64 + "\n",
        stamp="/e/stamp",
        check_python="/e/bin/python",
        index_url=index,
        proxy=proxy,
    )
    pip = next(c for c in commands if "pip install" in str(c.get_raw_value()))
    for secret in ("1NDEXPW", "PR0XYPW"):
        assert secret not in pip.get_raw_value()
    # Run its front (the secret-reading wrapper) with `env` in place of python: the values
    # arrive in the environment.
    front = pip.get_raw_value().split(" /e/bin/python ")[0]
    out = subprocess.run(
        f"{front} env",
        shell=True,
        input=pip.connector_arguments["_stdin"],
        capture_output=True,
        text=True,
    )
    assert f"PIP_INDEX_URL={index}" in out.stdout
    assert f"https_proxy={proxy}" in out.stdout
    assert secret_lines(proxy=proxy, index_url=index) == pip.connector_arguments["_stdin"]


def test_finding20_host_escape_sequences_do_not_reach_the_terminal():
    # Deploy side of finding 20: the probe's answers (printed in plans and refusals).
    from gpufleet.stages.host_probe import parse_probe

    state = parse_probe(
        [
            "##gpufleet-probe:os",
            "ID=ubuntu",
            'PRETTY_NAME="Ubuntu\x1b]0;TITLE-SET-BY-HOST\x07 22.04\x9b31m"',
            "##gpufleet-probe:kernel",
            "5.15.0-91-generic\x1b[2J",
        ]
    )
    assert state.os_pretty == "Ubuntu]0;TITLE-SET-BY-HOST 22.0431m"
    assert state.kernel == "5.15.0-91-generic[2J"


def test_finding09_download_urls_and_proxy_are_not_in_the_command_line():
    url = "https://u:K3YPW@mirror.example/k.pub?token=K3YTOKEN"
    proxy = "http://u:PR0XYPW@proxy.example:3128"
    repository, _ = operation_commands(
        "apt.repository",
        {"probes.KeyringFingerprints": {"path=/k.gpg": []}, "probes.FileDigest": {"path=/s": None}},
        key_url=url,
        fingerprint="EB693B3035CD5710E231E123A4B469963BF863CC",
        keyring="/k.gpg",
        sources="/s",
        sources_text="Types: deb\nURIs: https://mirror.example/\nSuites: /\n",
        proxy=proxy,
    )
    (miniforge,) = operation_commands(
        "python.miniforge",
        {"probes.PathExists": {"path=/opt/x/bin/conda": False}},
        url=url,
        sha256="0" * 64,
        root="/opt/x",
        proxy=proxy,
    )[0]
    for command in (repository[0], miniforge):
        for secret in ("K3YPW", "K3YTOKEN", "PR0XYPW"):
            assert secret not in command.get_raw_value()
            assert secret in command.connector_arguments["_stdin"]


def test_finding08_messages_show_urls_with_login_and_query_hidden():
    message = refused({"nvidia_repo_url": "ftp://repouser:REPOPASS3@mirror.example/cuda"})
    assert "'ftp://***@mirror.example/cuda'" in message and "REPOPASS3" not in message
    message = refused({"pip_index_url": "gopher://pypi.example/simple?token=QTOKEN8"})
    assert "'gopher://pypi.example/simple?***'" in message and "QTOKEN8" not in message
    assert "hunter2" not in refused({"apt_proxy": "user:hunter2@proxy:3128"})


@pytest.mark.parametrize(
    "schedule",
    [
        "daily",
        "weekly",
        "Sat,Sun 10:00",
        "*:0/15",
        "*-*-* 03:00:00 UTC",
        "Mon *-*-* 3:00 Europe/Berlin",
    ],
)
def test_systemd_calendar_forms_are_accepted(schedule: str) -> None:
    assert NodeSpec.from_host_data({"periodic_schedule": schedule}).periodic_schedule == schedule
