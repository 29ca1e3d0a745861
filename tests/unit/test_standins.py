"""Stand-in NVIDIA packages: names, versions and relations from the repository record (never
from the resolver), texts as recorded, debs built."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gpufleet import matrix
from gpufleet.matrix.drivers import DRIVER_BRANCHES, version_tuple
from gpufleet.matrix.repo_record import record
from gpufleet.sandbox.standins import build_nvidia_repo
from gpufleet.sandbox.standins.catalog import (
    DISTRO_ARCHIVE_DEPENDS,
    linux_headers,
    standin_packages,
)
from gpufleet.sandbox.standins.debs import build_deb
from gpufleet.sandbox.standins.driver_tree import driver_packages
from gpufleet.sandbox.standins.model import StandinError, StandinPackage, render

RECORDED = Path(__file__).parents[2] / "gpufleet" / "sandbox" / "standins" / "recorded"
KERNEL = "6.1.0-18-amd64"


def recorded_version(name: str, branch: int, repo: str = "ubuntu2204/x86_64") -> str:
    """The record's newest version of a driver-branch package (what apt installs from the
    stand-ins, and what DRIVER_BRANCHES names as the branch's latest)."""
    versions = [p.version for p in record().find(repo, name, branch)]
    return max(versions, key=lambda v: version_tuple(v.rsplit("-", 1)[0]))


def catalog_list(**overrides: object) -> list[StandinPackage]:
    """Every stand-in (a name may come at several versions, as libnccl2 does)."""
    args: dict[str, object] = {
        "repo_distro": "ubuntu2204",
        "repo_arch": "x86_64",
        "kernel_release": KERNEL,
        "branches": (570, 580),
        "tf_version": "2.21.0",
    }
    args.update(overrides)
    return standin_packages(**args)  # type: ignore[arg-type]


def catalog(**overrides: object) -> dict[str, StandinPackage]:
    return {p.name: p for p in catalog_list(**overrides)}


@pytest.mark.parametrize("branch", [570, 580])
@pytest.mark.parametrize("flavor", ["open", "proprietary"])
def test_every_package_the_matrix_names_is_there_at_its_version(branch: int, flavor: str) -> None:
    packages = catalog()
    res = matrix.resolve(
        "2.21.0",
        os_id="ubuntu",
        os_version="22.04",
        driver_branch=branch,
        kernel_module_flavor=flavor,
        gpu_device_ids=["22a3"],
    )
    assert res.fabricmanager_package and (res.pinning_package or branch == 570)
    served = {(p.name, p.version) for p in catalog_list()}
    for spec in matrix.apt_specs(res):
        name, _, version = spec.partition("=")
        assert name in packages, spec
        if version:
            assert (name, version) in served, spec
    for name in res.driver_packages:
        assert packages[name].version == recorded_version(name, branch)


def test_fabric_manager_is_the_real_unsuffixed_package_from_580() -> None:
    packages = catalog()
    # NVIDIA/gpu-driver-container#451: nvidia-fabricmanager-580 is only a name it provides.
    assert "nvidia-fabricmanager-580" not in packages
    assert packages["nvidia-fabricmanager"].provides == ("nvidia-fabricmanager-580",)
    assert packages["nvidia-fabricmanager"].version == recorded_version("nvidia-fabricmanager", 580)
    assert "/usr/bin/nv-fabricmanager" in {f.path for f in packages["nvidia-fabricmanager"].files}
    assert "nvidia-fabricmanager-570" in packages and "libnvidia-nscq" in packages


def test_every_recorded_package_is_a_stand_in_with_its_recorded_fields() -> None:
    served = {(s.name, s.version): s for s in catalog_list()}
    for p in record().packages("ubuntu2204/x86_64"):
        if p.branch not in (None, 570, 580):
            assert (p.package, p.version) not in served, p.package
            continue
        stand_in = served[(p.package, p.version)]
        assert stand_in.provides == tuple(x.strip() for x in p.field("Provides").split(",") if x)
        recorded_deps = [d.strip() for d in p.field("Depends").split(",") if d.strip()]
        assert set(stand_in.depends) <= set(recorded_deps), p.package


@pytest.mark.parametrize(
    ("distro", "branch"), [("ubuntu2204", 580), ("ubuntu2204", 570), ("ubuntu2004", 575)]
)
def test_the_newest_recorded_driver_is_the_branch_latest(distro: str, branch: int) -> None:
    # What the deploy installs on a sandbox host (the newest stand-in) is the matrix's latest.
    name = "cuda-drivers" if branch >= 580 else f"cuda-drivers-{branch}"
    newest = recorded_version(name, branch, f"{distro}/x86_64")
    assert newest.rsplit("-", 1)[0] == DRIVER_BRANCHES[branch].latest


def test_the_catalog_does_not_ask_the_resolver(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the stand-ins must come from the record, not from resolve()")

    monkeypatch.setattr(matrix, "resolve", refuse)
    assert "nvidia-open" in catalog()


def test_every_dependency_is_in_the_repository() -> None:
    packages = catalog()
    provided = set(packages) | {v for p in packages.values() for v in p.provides}
    provided |= set(DISTRO_ARCHIVE_DEPENDS)  # from Ubuntu's archive, through the apt proxy
    for package in packages.values():
        for dep in package.depends:
            assert dep.split(" ", 1)[0] in provided, (package.name, dep)


def test_driver_metapackage_reaches_nvidia_smi_and_persistenced() -> None:
    packages = catalog()

    def closure(name: str) -> set[str]:
        seen, todo = set(), [name]
        while todo:
            current = todo.pop()
            if current not in seen:
                seen.add(current)
                todo += [d.split(" ", 1)[0] for d in packages[current].depends]
        return seen

    for top, branch in (("nvidia-open-570", 570), ("nvidia-open", 580), ("cuda-drivers", 580)):
        reached = closure(top)
        files = {f.path for name in reached for f in packages[name].files}
        assert f"nvidia-utils-{branch}" in reached
        assert {"/usr/bin/nvidia-smi", "/usr/bin/nvidia-persistenced"} <= files
        assert "/lib/systemd/system/nvidia-persistenced.service" in files
        assert "dkms" not in reached  # on purpose: the real `dkms` pulls a compiler


def test_nothing_installs_a_kernel_module_and_all_say_stand_in() -> None:
    for package in catalog().values():
        assert not any(f.path.endswith((".ko", ".ko.xz", ".ko.zst")) for f in package.files)
        assert "gpufleet sandbox stand-in" in package.control(1)


def test_branch_suffixed_subpackages_replace_each_other_but_metapackages_do_not() -> None:
    packages = catalog()
    assert packages["nvidia-utils-570"].conflicts == ("nvidia-utils",)
    assert packages["nvidia-utils-580"].provides == ("nvidia-utils",)
    assert "nvidia-dkms-580-open" in packages["nvidia-dkms-580"].conflicts
    assert packages["nvidia-open-580"].conflicts == ()
    version = recorded_version("nvidia-open", 580)
    assert packages["nvidia-open"].depends == (f"nvidia-open-580 (= {version})",)


def test_debian_repository_uses_debian_revisions() -> None:
    packages = catalog(repo_distro="debian12")
    assert packages["nvidia-utils-580"].version == recorded_version(
        "nvidia-open", 580, "debian12/x86_64"
    )
    assert packages["nvidia-utils-580"].version.endswith("-1")
    assert packages["nvidia-driver-pinning-580"].version == "580-1"


def test_pinning_package_pins_its_branch() -> None:
    package = catalog()["nvidia-driver-pinning-580"]
    (prefs,) = package.files
    assert prefs.path == "/etc/apt/preferences.d/nvidia-driver-pinning-580"
    assert "Pin: version 580.*\nPin-Priority: 1000" in prefs.content
    assert package.provides == package.conflicts == ("nvidia-driver-pinning",)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"repo_distro": "ubuntu1804"}, "repo_distro 'ubuntu1804' is not one of"),
        ({"repo_arch": "ppc64le"}, "repo_arch 'ppc64le' is not one of"),
        ({"kernel_release": "custom"}, "does not start with a version number"),
        ({"branches": (565,)}, "has no driver packages of branch 565"),
        ({"tf_version": "1.15"}, "the matrix refuses"),
    ],
)
def test_bad_input_is_refused_with_a_fix(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(StandinError, match=message) as caught:
        catalog(**overrides)
    assert "Fix" in str(caught.value)


def test_invalid_names_and_versions_are_refused() -> None:
    with pytest.raises(StandinError, match="not a valid Debian package name"):
        StandinPackage("Bad_Name", "1.0-1", "amd64", "x")
    with pytest.raises(StandinError, match="not a valid Debian version"):
        StandinPackage("good", "v1", "amd64", "x")


def run_script(tmp_path: Path, text: str, *args: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "script"
    script.write_text(text)
    return subprocess.run(["sh", str(script), *args], capture_output=True, text=True, timeout=10)


def test_nvidia_smi_version_matches_the_recorded_real_output(tmp_path: Path) -> None:
    text = render(
        "nvidia-smi.sh",
        PACKAGE="nvidia-utils-580",
        DRIVER_VERSION="580.95.05",
        NVML_VERSION="580.95",
        CUDA_VERSION="13.0",
        BRANCH="580",
    )
    done = run_script(tmp_path, text, "--version")
    assert done.returncode == 0
    assert done.stdout == (RECORDED / "nvidia_smi_version_580.95.05.txt").read_text()


@pytest.mark.parametrize(
    "args", [(), ("-L",), ("--query-gpu=name,driver_version", "--format=csv"), ("-q", "-x")]
)
def test_nvidia_smi_fails_like_the_real_one_without_a_driver(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    packages = driver_packages(580, version="580.95.05-0ubuntu1", arch="amd64")
    utils = next(p for p in packages if p.name == "nvidia-utils-580")
    (smi,) = utils.files
    done = run_script(tmp_path, smi.content, *args)
    assert done.returncode == 9
    assert done.stdout == (RECORDED / "nvidia_smi_no_driver.txt").read_text()
    assert "GPU 0" not in done.stdout


def test_nvidia_smi_of_each_branch_reports_its_own_driver(tmp_path: Path) -> None:
    packages = catalog()
    for branch in (570, 580):
        (smi,) = packages[f"nvidia-utils-{branch}"].files
        lines = run_script(tmp_path, smi.content, "--version").stdout.splitlines()
        driver = recorded_version(f"nvidia-open-{branch}", branch).rsplit("-", 1)[0]
        assert lines[0] == f"NVIDIA-SMI version  : {driver}"
        assert lines[2] == f"DRIVER version      : {driver}"
        assert lines[3] == f"CUDA Version        : {DRIVER_BRANCHES[branch].max_cuda}"


def test_nvcc_stand_in_prints_the_recorded_release_and_compiles_nothing(tmp_path: Path) -> None:
    nvcc_pkg = catalog()["cuda-nvcc-12-5"]
    nvcc = next(f for f in nvcc_pkg.files if f.path == "/usr/local/cuda-12.5/bin/nvcc")
    assert "update-alternatives --install /usr/local/cuda cuda /usr/local/cuda-12.5" in (
        nvcc_pkg.postinst
    )
    version = run_script(tmp_path, nvcc.content, "--version")
    assert "Cuda compilation tools, release 12.5, V12.5.82" in version.stdout
    compile_attempt = run_script(tmp_path, nvcc.content, "-o", "a.out", "x.cu")
    assert compile_attempt.returncode == 1 and "stand-in" in compile_attempt.stderr


def test_persistenced_stand_in_stays_up_and_says_so(tmp_path: Path) -> None:
    compute = catalog()["nvidia-compute-utils-580"]
    daemon = next(f for f in compute.files if f.path == "/usr/bin/nvidia-persistenced")
    unit = next(f for f in compute.files if f.path.endswith("nvidia-persistenced.service"))
    assert "ExecStart=/usr/bin/nvidia-persistenced" in unit.content
    assert "WantedBy=multi-user.target" in unit.content
    script = tmp_path / "daemon"
    script.write_text(daemon.content)
    process = subprocess.Popen(["sh", str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        assert "gpufleet sandbox stand-in" in process.stdout.readline()
        assert process.poll() is None  # still running
    finally:
        process.terminate()
        process.wait(timeout=5)


def test_built_deb_holds_the_control_fields_and_files(tmp_path: Path) -> None:
    package = linux_headers(KERNEL, "amd64")
    deb = build_deb(package, tmp_path, tmp_path / "work")
    assert deb.name == "linux-headers-6.1.0-18-amd64_6.1.0-1_amd64.deb"
    info = subprocess.run(["dpkg-deb", "-f", str(deb)], capture_output=True, text=True).stdout
    assert "Package: linux-headers-6.1.0-18-amd64\n" in info
    assert "Version: 6.1.0-1\n" in info
    assert "gpufleet sandbox stand-in" in info
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True).stdout
    assert "root/root" in listing
    assert "./lib/modules/6.1.0-18-amd64/build -> /usr/src/linux-headers-6.1.0-18-amd64" in listing
    assert "README.gpufleet-standin" in listing


def test_cuda_release_without_recorded_nvcc_still_has_its_directory() -> None:
    packages = catalog()
    nvcc_pkg = packages["cuda-nvcc-12-8"]
    assert [f.path for f in nvcc_pkg.files] == ["/usr/local/cuda-12.8/README.gpufleet-standin"]
    assert packages["cuda-toolkit-12-8"].version == "12.8.1-1"


def test_rebuilt_debs_are_byte_identical(tmp_path: Path) -> None:
    # A caching apt proxy keeps .debs by URL: a rebuild at the next `up` must match them.
    package = catalog()["nvidia-utils-580"]
    first = build_deb(package, tmp_path, tmp_path / "one")
    (tmp_path / "again").mkdir()
    second = build_deb(package, tmp_path / "again", tmp_path / "two")
    assert first.read_bytes() == second.read_bytes()
    # Times are clamped, not taken from the build's clock (which would differ between ups).
    listing = subprocess.run(
        ["dpkg-deb", "-c", str(first)],
        capture_output=True,
        text=True,
        env={**os.environ, "TZ": "UTC"},
    )
    assert listing.stdout.count(" 2026-01-01 00:00 ") == len(listing.stdout.splitlines())


def test_maintainer_scripts_and_shipped_scripts_parse() -> None:
    scripts = []
    for package in catalog().values():
        scripts += [package.postinst, package.prerm]
        scripts += [f.content for f in package.files if f.content.startswith("#!/bin/sh")]
    for script in filter(None, scripts):
        done = subprocess.run(["sh", "-n"], input=script, capture_output=True, text=True)
        assert done.returncode == 0, (script, done.stderr)


def test_repository_needs_at_least_one_branch(tmp_path: Path) -> None:
    with pytest.raises(StandinError, match="branches is empty"):
        build_nvidia_repo(
            tmp_path,
            repo_distro="ubuntu2204",
            repo_arch="x86_64",
            kernel_release=KERNEL,
            branches=(),
        )
