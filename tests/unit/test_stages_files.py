"""What the stages write on hosts, run for real here: activation settings, wrapper, payload."""

from __future__ import annotations

import hashlib
import io
import subprocess
import tarfile
from pathlib import Path

from gpufleet.operations.payload import make_archive
from gpufleet.stages.driver import headers_packages
from gpufleet.templates import render


def _fake_env(tmp_path: Path) -> tuple[Path, Path]:
    env = tmp_path / "env"
    site = env / "lib" / "python3.11" / "site-packages"
    for lib in ("cublas", "cudnn", "nccl"):
        (site / "nvidia" / lib / "lib").mkdir(parents=True)
    (site / "nvidia" / "cuda_nvcc" / "bin").mkdir(parents=True)
    (env / "bin").mkdir()
    python = env / "bin" / "python"
    # Stands in for the env's interpreter: prints what it was started with.
    python.write_text(
        '#!/bin/sh\nprintf "%s\\n" "$LD_LIBRARY_PATH" "$XLA_FLAGS" "$PATH" '
        '"$TF_FORCE_GPU_ALLOW_GROWTH" "$@"\n'
    )
    python.chmod(0o755)
    return env, site


def test_wrapper_sets_the_cuda_wheel_environment(tmp_path):
    env, site = _fake_env(tmp_path)
    env_file = tmp_path / "env.sh"
    env_file.write_text(render("gpufleet-env.sh.j2", env_dir=str(env)))
    wrapper = tmp_path / "gpufleet-python"
    wrapper.write_text(render("gpufleet-python.j2", env_dir=str(env), env_file=str(env_file)))
    wrapper.chmod(0o755)

    run = subprocess.run(
        [str(wrapper), "-c", "pass"],
        env={"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": "/opt/other"},
        capture_output=True,
        text=True,
        check=True,
    )
    ld_path, xla_flags, path, growth, *args = run.stdout.splitlines()
    assert sorted(ld_path.split(":")[:3]) == sorted(
        str(site / "nvidia" / lib / "lib") for lib in ("cublas", "cudnn", "nccl")
    )
    assert ld_path.endswith(":/opt/other")
    assert xla_flags == f"--xla_gpu_cuda_data_dir={site}/nvidia/cuda_nvcc"
    assert path.split(":")[0] == f"{site}/nvidia/cuda_nvcc/bin"
    assert growth == "true"
    assert args == ["-c", "pass"]


def test_settings_do_not_pile_up_when_sourced_twice(tmp_path):
    env, _ = _fake_env(tmp_path)
    env_file = tmp_path / "env.sh"
    env_file.write_text(render("gpufleet-env.sh.j2", env_dir=str(env)))
    script = f'. "{env_file}"; . "{env_file}"; echo "$LD_LIBRARY_PATH"; echo "$XLA_FLAGS"'
    out = subprocess.run(
        ["sh", "-c", script],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert len(out[0].split(":")) == 3
    assert out[1].count("--xla_gpu_cuda_data_dir") == 1


def test_unattended_upgrades_blacklist_is_valid_apt_config(tmp_path):
    text = render("unattended-upgrades-nvidia.conf.j2", prefixes=("nvidia-", "libcudnn"))
    assert text.splitlines()[2:] == [
        "Unattended-Upgrade::Package-Blacklist {",
        '    "nvidia-";',
        '    "libcudnn";',
        "};",
    ]


def test_payload_archive_is_reproducible_and_skips_caches(tmp_path):
    source = tmp_path / "validation"
    (source / "workloads" / "__pycache__").mkdir(parents=True)
    (source / "__init__.py").write_text("")
    (source / "workloads" / "mirrored.py").write_text("print('hi')\n")
    (source / "workloads" / "__pycache__" / "mirrored.cpython-311.pyc").write_bytes(b"\0")
    first = make_archive(source)
    (source / "workloads" / "mirrored.py").touch()  # a new mtime must not change the archive
    assert hashlib.sha256(make_archive(source)).digest() == hashlib.sha256(first).digest()
    with tarfile.open(fileobj=io.BytesIO(first), mode="r:gz") as tar:
        assert tar.getnames() == ["__init__.py", "workloads", "workloads/mirrored.py"]


def test_payload_archive_puts_each_package_under_its_name(tmp_path):
    for name in ("gpufleet", "validation"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
    archive = make_archive(
        {"validation": tmp_path / "validation", "gpufleet": tmp_path / "gpufleet"}
    )
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        assert tar.getnames() == [
            "gpufleet",
            "gpufleet/__init__.py",
            "validation",
            "validation/__init__.py",
        ]


def test_headers_follow_the_running_kernel():
    assert headers_packages("ubuntu", "22.04", "5.15.0-91-generic", "auto") == [
        "linux-headers-5.15.0-91-generic",
        "linux-headers-generic",
    ]
    assert headers_packages("ubuntu", "22.04", "6.5.0-35-generic", "auto")[1] == (
        "linux-headers-generic-hwe-22.04"
    )
    assert headers_packages("ubuntu", "24.04", "6.8.0-1012-aws", "auto")[1] == "linux-headers-aws"
    assert headers_packages("debian", "12", "6.1.0-18-cloud-amd64", "auto")[1] == (
        "linux-headers-cloud-amd64"
    )
    assert headers_packages("debian", "12", "6.1.0-18-amd64", "linux-headers-amd64") == [
        "linux-headers-6.1.0-18-amd64",
        "linux-headers-amd64",
    ]


def test_host_requirements_carry_pyprojects_pins():
    """The environment gets nvidia-ml-py and (before 3.11) tomli at the pins gpufleet runs with."""
    import tomllib
    from packaging.requirements import Requirement

    from gpufleet.stages.python_env import HOST_REQUIREMENTS

    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    pinned = {Requirement(r).name: Requirement(r) for r in project["project"]["dependencies"]}
    wanted = {Requirement(r).name: Requirement(r) for r in HOST_REQUIREMENTS}
    assert sorted(wanted) == ["nvidia-ml-py", "tomli"]
    for name, requirement in wanted.items():
        # the same version; pyproject pins tomli on every Python (the payload's runner/ ships
        # it to 3.10 nodes), the environment only where Python has no tomllib
        assert requirement.specifier == pinned[name].specifier
    tomli_marker = wanted["tomli"].marker
    assert tomli_marker is not None
    assert tomli_marker.evaluate({"python_version": "3.10"})
    assert not tomli_marker.evaluate({"python_version": "3.11"})
