"""Security finding 11: the environment is installed only from hashed locks (--require-hashes)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from pyinfra.api import OperationError

from gpufleet.matrix import TF_RELEASES, locks
from gpufleet.matrix.locks import (
    LOCK_DIR,
    LOCKED_PACKAGES,
    LockError,
    lock_name,
    lock_text,
    normalize,
    parse_lock,
    tool_lock_text,
)
from gpufleet.operations.env_check import checked_pins
from gpufleet.sandbox.state import SandboxError
from gpufleet.sandbox.wheelhouse import build_wheelhouse, host_lock
from gpufleet.stages.python_env import HOST_REQUIREMENTS, UV_REQUIREMENT
from tests.operations.helpers import run_operation
from tests.wheels import local_index, sha256_of, tiny_wheel

LOCK_PATH = "/opt/gpufleet/venvs/tf/etc/gpufleet/requirements.lock.txt"
STAMP = "path=/opt/gpufleet/venvs/tf/etc/gpufleet/installed.txt"
HASH = "--hash=sha256:" + "a" * 64


def env_key(lock: str, requirement: str) -> str:
    """The EnvProblems read pip_install_checked makes: every pin of the lock (finding 5)."""
    try:
        pins = checked_pins(requirement, locks.parse_lock(lock))
    except locks.LockError:  # refused before the environment is read
        pins = []
    return f"python=/opt/gpufleet/venvs/tf/bin/python, requirements={pins!r}"


def install_commands(lock: str, requirement: str = "tensorflow[and-cuda]==2.21.0") -> list[str]:
    commands, _ = run_operation(
        "python.pip_install_checked",
        {
            "files.FileContents": {STAMP: None},
            "env_check.EnvProblems": {env_key(lock, requirement): []},
        },
        python="/opt/gpufleet/venvs/tf/bin/python",
        requirement=requirement,
        tf_version="2.21.0",
        lock=LOCK_PATH,
        lock_text=lock,
        stamp=STAMP.removeprefix("path="),
        check_python="/usr/local/bin/gpufleet-python",
    )
    return commands


def test_finding11_pip_installs_only_hashed_locked_packages() -> None:
    commands = install_commands(lock_text("tensorflow[and-cuda]", "2.21.0"))
    install = next(command for command in commands if " -m pip install " in command)
    assert "--require-hashes --no-deps" in install
    assert install.endswith(f" -r {LOCK_PATH}")
    # Nothing is installed by name beside the lock (the old command named TensorFlow, NVML, tomli
    # and a constraints file, and let pip pick every other dependency from the index).
    assert "--constraint" not in install and "tensorflow" not in install.split(" -r ")[0]

    unhashed = f"tensorflow==2.21.0 {HASH}\nnumpy==2.2.6\n"
    with pytest.raises(OperationError, match=r"lock line 2 is not `name==version --hash"):
        install_commands(unhashed)
    unpinned = f"tensorflow==2.21.0 {HASH}\nnumpy>=2 {HASH}\n"
    with pytest.raises(OperationError, match=r"lock line 2 .*'numpy>=2"):
        install_commands(unpinned)
    with pytest.raises(OperationError, match=r"the lock does not pin tensorflow\[and-cuda\]"):
        install_commands(f"tensorflow==2.20.0 {HASH}\n")
    with pytest.raises(OperationError, match="pins no package"):
        install_commands("# nothing\n")


def test_a_pair_without_a_lock_is_refused_with_how_to_make_it() -> None:
    with pytest.raises(LockError) as refused:
        lock_text("tf-nightly", "2.21.0")
    message = str(refused.value)
    assert "no hashed pip lock for tf-nightly==2.21.0 (tf-nightly-2.21.0.txt" in message
    assert "scripts/make-locks --package 'tf-nightly' --tf-version 2.21.0" in message
    assert "tensorflow-cpu-2.21.0.txt" in message  # what is shipped instead


def test_lock_names() -> None:
    assert lock_name("tensorflow[and-cuda]", "2.21.0") == "tensorflow-and-cuda-2.21.0.txt"
    assert lock_name("Tensorflow_CPU", "2.16.1") == "tensorflow-cpu-2.16.1.txt"
    with pytest.raises(LockError, match="not a package name"):
        lock_name("--index-url=http://x", "2.21.0")


def shipped_locks() -> list[Path]:
    return sorted(LOCK_DIR.glob("*.txt"))


def test_every_release_and_package_has_a_lock() -> None:
    wanted = {lock_name(p, v) for v in TF_RELEASES for p in LOCKED_PACKAGES}
    assert {path.name for path in shipped_locks()} == wanted


@pytest.mark.parametrize("path", shipped_locks(), ids=lambda p: p.name)
def test_every_shipped_lock_pins_and_hashes_every_package_at_the_matrix_versions(
    path: Path,
) -> None:
    pins = parse_lock(path.read_text())  # refuses any line without == and a sha256
    assert all(pin.hashes for pin in pins)
    by_name: dict[str, set[str]] = {}
    for pin in pins:
        by_name.setdefault(pin.name, set()).add(pin.version)
    package = next(p for p in LOCKED_PACKAGES if path.name.startswith(lock_name(p, "")[:-5]))
    version = path.name.removesuffix(".txt").rsplit("-", 1)[1]
    release = TF_RELEASES[version]
    assert by_name[normalize(package.split("[")[0])] == {version}
    if package == "tensorflow[and-cuda]":
        for wheel, pinned in release.wheels.items():
            assert by_name[wheel] == {pinned}, wheel
    else:
        assert not any(name.endswith("-cu12") for name in by_name)
    for line in HOST_REQUIREMENTS:
        requirement = Requirement(line)
        assert by_name[requirement.name] == {str(requirement.specifier).removeprefix("==")}


def test_the_wheelhouse_gets_the_locks_pins_for_the_hosts_python() -> None:
    lock = lock_text("tensorflow-cpu", "2.21.0")
    on_310 = host_lock(lock, "3.10", ["manylinux_2_17_x86_64"]).splitlines()
    on_312 = host_lock(lock, "3.12", ["manylinux_2_17_x86_64"]).splitlines()
    names_310 = [line.split("==")[0] for line in on_310]
    assert len(names_310) == len(set(names_310))  # one version of each package per host
    assert "tensorflow-cpu" in names_310 and "tomli" in names_310
    assert "tomli" not in [line.split("==")[0] for line in on_312]
    assert all(" --hash=sha256:" in line for line in on_310)
    numpy_310 = next(line for line in on_310 if line.startswith("numpy=="))
    numpy_312 = next(line for line in on_312 if line.startswith("numpy=="))
    assert numpy_310.split()[0] != numpy_312.split()[0]  # the lock forks numpy by Python


def test_wheelhouse_downloads_the_lock_with_require_hashes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with local_index(tmp_path / "index", monkeypatch) as (_, wheel):
        pin = f"gpufleet-tiny==1.0 --hash=sha256:{sha256_of(wheel)}\n"
        house = build_wheelhouse(tmp_path / "www", tmp_path / "cache", lock_text=pin, bootstrap=())
        assert [w.name for w in house.wheels] == [wheel.name]
        wrong = "gpufleet-tiny==1.0 --hash=sha256:" + "0" * 64 + "\n"
        with pytest.raises(SandboxError, match=r"(?s)pip download .*DO NOT MATCH THE HASHES"):
            build_wheelhouse(tmp_path / "www2", tmp_path / "cache2", lock_text=wrong, bootstrap=())


def pip_install_lock(venv: Path, wheels: Path, lock: str) -> subprocess.CompletedProcess[str]:
    """The deploy's pip command (its options), on a local find-links folder, in ``venv``."""
    lock_file = venv.parent / "lock.txt"
    lock_file.write_text(lock)
    # This interpreter's pip installs into the venv (pip --python): the venv needs no pip of
    # its own, which saves creating one through ensurepip (about 8 s).
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "--isolated",  # no pip.conf / PIP_* of this machine
            "--disable-pip-version-check",
            "--no-input",
            "--require-hashes",
            "--no-deps",
            "--no-index",
            "--find-links",
            str(wheels),
            "-r",
            str(lock_file),
        ],
        capture_output=True,
        text=True,
        check=False,
    )


def test_pip_require_hashes_installs_the_locked_wheel_and_refuses_a_wrong_hash(
    tmp_path: Path,
) -> None:
    wheel = tiny_wheel(tmp_path / "wheels")
    good = hashlib.sha256(wheel.read_bytes()).hexdigest()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    lock = f"gpufleet-tiny==1.0 \\\n    --hash=sha256:{good}\n"
    parse_lock(lock)  # the lock format gpufleet checks is the one pip takes
    wrong = pip_install_lock(venv, tmp_path / "wheels", lock.replace(good, "0" * 64))
    assert wrong.returncode != 0
    assert "THESE PACKAGES DO NOT MATCH THE HASHES" in wrong.stderr
    imported = [str(venv / "bin" / "python"), "-c", "import gpufleet_tiny"]
    assert subprocess.run(imported, capture_output=True, check=False).returncode != 0
    done = pip_install_lock(venv, tmp_path / "wheels", lock)
    assert done.returncode == 0, done.stderr
    got = [str(venv / "bin" / "python"), "-c", "import gpufleet_tiny; print(gpufleet_tiny.VALUE)"]
    assert subprocess.run(got, capture_output=True, text=True, check=True).stdout == "42\n"


def uv_commands(lock: str) -> list[str]:
    commands, _ = run_operation(
        "python.pip_tool",
        {"probes.PathExists": {"path=/t/bin/uv": False}},
        python="/t/bin/python",
        package=UV_REQUIREMENT,
        executable="/t/bin/uv",
        lock="/t/gpufleet-uv.lock.txt",
        lock_text=lock,
    )
    return commands


def test_finding11_uv_is_installed_from_its_hashed_lock() -> None:
    lock = tool_lock_text(UV_REQUIREMENT)
    pins = parse_lock(lock)
    assert [(pin.name, pin.version) for pin in pins] == [("uv", "0.13.8")]
    assert len(pins[0].hashes) > 1  # one per platform's wheel (and the sdist)
    install = uv_commands(lock)[0]
    assert install.endswith("--no-input --require-hashes --no-deps -r /t/gpufleet-uv.lock.txt")
    with pytest.raises(OperationError, match=r"the lock does not pin uv==0\.13\.8"):
        uv_commands("uv==0.13.7 --hash=sha256:" + "a" * 64 + "\n")
    with pytest.raises(LockError, match=r"no hashed pip lock for uv==0\.0\.1"):
        tool_lock_text("uv==0.0.1")
