"""Host-output parsers on real recorded output: mokutil, NVIDIA module version, nvcc, dkms,
lsmod, df and nvidia-smi compute apps (sources in tests/fixtures/*/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.parsers import (
    parse_dkms_status,
    parse_driver_version,
    parse_mokutil_sb_state,
    parse_nvcc_version,
)
from gpufleet.parsers.system import (
    DkmsEntry,
    DriverVersion,
    GpuProcess,
    NvccVersion,
    parse_df_avail,
    parse_gpu_processes,
    parse_lsmod_has,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MY_KINDS = ("lspci", "mokutil", "driver_version", "nvcc", "dkms", "lsmod", "df", "gpu_processes")


def fixture(kind: str, name: str) -> str:
    return (FIXTURES / kind / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("kind", MY_KINDS)
def test_every_fixture_names_its_source(kind):
    sources = (FIXTURES / kind / "SOURCES.md").read_text(encoding="utf-8")
    files = sorted(p.name for p in (FIXTURES / kind).glob("*.txt"))
    assert files, f"no fixtures in {kind}"
    missing = [name for name in files if f"| {name} |" not in sources]
    assert not missing, f"{kind}/SOURCES.md does not name the source of {missing}"


# --- mokutil --sb-state -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("enabled.txt", True),
        ("disabled_setup_mode.txt", False),
        ("not_supported.txt", None),
        ("efi_variables_not_supported.txt", None),
    ],
)
def test_mokutil_sb_state(name, expected):
    assert parse_mokutil_sb_state(fixture("mokutil", name)) is expected


@pytest.mark.parametrize("text", ["", "\n", "mokutil: command not found", "SecureBoot"])
def test_mokutil_empty_or_garbage_is_unknown(text):
    assert parse_mokutil_sb_state(text) is None


# --- NVIDIA kernel module version -------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "version", "flavor"),
    [
        ("proc_open_565_ubuntu2404.txt", "565.57.01", "open"),
        ("proc_open_525_arch.txt", "525.60.11", "open"),
        ("proc_open_555_two_part_version.txt", "555.58", "open"),
        ("proc_proprietary_384.txt", "384.98", "proprietary"),
        ("proc_proprietary_550.txt", "550.90.07", "proprietary"),
        ("modinfo_open_590.txt", "590.44.01", "open"),
        ("modinfo_open_515_truncated_first_line.txt", "515.48.07", "open"),
        ("modinfo_proprietary_430.txt", "430.40", "proprietary"),
    ],
)
def test_driver_version(name, version, flavor):
    parsed = parse_driver_version(fixture("driver_version", name))
    assert parsed == DriverVersion(version=version, flavor=flavor)
    assert parsed.branch == int(version.split(".")[0])


def test_gcc_version_line_is_not_the_driver_version():
    # The second line of /proc/driver/nvidia/version holds "gcc version 13.3.0".
    text = fixture("driver_version", "proc_open_565_ubuntu2404.txt")
    gcc_only = text.splitlines()[1]
    assert parse_driver_version(gcc_only) is None


def test_modinfo_without_license_has_unknown_flavor():
    lines = fixture("driver_version", "modinfo_open_590.txt").splitlines()
    without_license = "\n".join(line for line in lines if not line.startswith("license:"))
    assert parse_driver_version(without_license) == DriverVersion("590.44.01", None)


@pytest.mark.parametrize("name", ["modinfo_module_not_found.txt", "modinfo_gdrdrv_not_nvidia.txt"])
def test_no_nvidia_module_gives_none(name):
    assert parse_driver_version(fixture("driver_version", name)) is None


@pytest.mark.parametrize(
    "text", ["", "cat: /proc/driver/nvidia/version: No such file or directory"]
)
def test_driver_version_empty_or_missing_file(text):
    assert parse_driver_version(text) is None


def test_driver_version_to_dict():
    parsed = parse_driver_version(fixture("driver_version", "proc_proprietary_550.txt"))
    assert parsed is not None
    assert parsed.to_dict() == {"version": "550.90.07", "flavor": "proprietary"}


# --- nvcc --version ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "release", "version"),
    [
        ("cuda_12_6.txt", "12.6", "12.6.77"),
        ("cuda_11_2.txt", "11.2", "11.2.152"),
        ("cuda_11_1.txt", "11.1", "11.1.105"),
        ("cuda_11_0_bu.txt", "11.0", "11.0.221"),
        ("cuda_7_5_no_build_line.txt", "7.5", "7.5.17"),
    ],
)
def test_nvcc_version(name, release, version):
    assert parse_nvcc_version(fixture("nvcc", name)) == NvccVersion(release, version)


def test_nvcc_version_comes_from_v_token_not_build_line():
    # "Build cuda_12.6.r12.6/compiler.34841621_0" must not leak into the version.
    parsed = parse_nvcc_version(fixture("nvcc", "cuda_12_6.txt"))
    assert parsed is not None and parsed.version == "12.6.77"


def test_nvcc_release_line_without_v_token():
    line = fixture("nvcc", "cuda_12_6.txt").splitlines()[3].split(", V")[0]
    assert line == "Cuda compilation tools, release 12.6"
    assert parse_nvcc_version(line) == NvccVersion("12.6", None)


def test_nvcc_compiler_version_that_is_not_the_toolkit_version_is_dropped():
    # CUDA 5.0's nvcc printed its own compiler version after the release.
    assert parse_nvcc_version("Cuda compilation tools, release 5.0, V0.2.1221") == NvccVersion(
        "5.0", None
    )


@pytest.mark.parametrize("text", ["", "sh: 1: nvcc: not found"])
def test_nvcc_missing(text):
    assert parse_nvcc_version(text) is None


# --- dkms status ------------------------------------------------------------------------------


def test_dkms_2x_comma_format():
    entries = parse_dkms_status(fixture("dkms", "v2_three_kernels.txt"))
    assert [e.kernel for e in entries] == [
        "4.17.11-200.fc28.x86_64",
        "4.17.12-200.fc28.x86_64",
        "4.17.14-202.fc28.x86_64",
    ]
    assert entries[0] == DkmsEntry(
        module="nvidia",
        version="396.45",
        kernel="4.17.11-200.fc28.x86_64",
        arch="x86_64",
        status="installed",
    )


def test_dkms_2x_ubuntu():
    assert parse_dkms_status(fixture("dkms", "v2_ubuntu.txt")) == [
        DkmsEntry("nvidia", "460.91.03", "5.11.0-36-generic", "x86_64", "installed")
    ]


def test_dkms_note_in_parentheses():
    (entry,) = parse_dkms_status(fixture("dkms", "v2_original_module_exists.txt"))
    assert (entry.status, entry.note) == ("installed", "original_module exists")


def test_dkms_3x_slash_format():
    entries = parse_dkms_status(fixture("dkms", "v3_nvidia_and_other_module.txt"))
    assert [(e.module, e.version, e.kernel, e.arch, e.status) for e in entries] == [
        ("nvidia", "535.86.05", "6.5.0-060500rc5-generic", "x86_64", "installed"),
        ("rtl8852bu", "1.19.3", "6.5.0-060500rc5-generic", "x86_64", "installed"),
    ]


def test_dkms_3x_warning():
    (entry,) = parse_dkms_status(fixture("dkms", "v3_warning_diff.txt"))
    assert entry.module == "i915-sriov-dkms"
    assert entry.version == "2025.03.26"
    assert entry.status == "installed"
    assert entry.note == "WARNING! Diff between built and installed module!"


def test_dkms_added_has_no_kernel():
    assert parse_dkms_status(fixture("dkms", "v3_added.txt")) == [
        DkmsEntry("dkms_test", "1.0", None, None, "added")
    ]


@pytest.mark.parametrize(
    "name", ["v2_error_missing_dkms_conf.txt", "v3_error_missing_dkms_conf.txt"]
)
def test_dkms_error_lines_are_ignored(name):
    assert parse_dkms_status(fixture("dkms", name)) == []


def test_dkms_errors_mixed_with_entries():
    text = fixture("dkms", "v2_error_missing_dkms_conf.txt") + fixture("dkms", "v2_ubuntu.txt")
    assert [e.version for e in parse_dkms_status(text)] == ["460.91.03"]


def test_dkms_entry_to_dict():
    (entry,) = parse_dkms_status(fixture("dkms", "v3_added.txt"))
    assert entry.to_dict() == {
        "module": "dkms_test",
        "version": "1.0",
        "kernel": None,
        "arch": None,
        "status": "added",
        "note": None,
    }


# --- lsmod, df, compute apps ------------------------------------------------------------------


def test_lsmod_first_column_only():
    text = fixture("lsmod", "nvidia_loaded_no_nouveau.txt")
    assert parse_lsmod_has(text, "nvidia") is True
    assert parse_lsmod_has(text, "nouveau") is False
    # "nvidia" in ipmi_msghandler's used-by list does not make ipmi_devintf loaded.
    assert parse_lsmod_has(text, "ipmi_devintf") is False
    assert parse_lsmod_has(text, "ipmi-msghandler") is True


def test_lsmod_error_output_has_no_modules():
    assert parse_lsmod_has(fixture("lsmod", "lsmod_no_proc_modules_error.txt"), "nouveau") is False


def test_df_avail():
    assert parse_df_avail(fixture("df", "avail_root_debian_vm.txt")) == 83405512704


@pytest.mark.parametrize("text", ["", "df: /nonexistent: No such file or directory"])
def test_df_avail_missing(text):
    assert parse_df_avail(text) is None


def test_gpu_processes_header_names_columns():
    processes = parse_gpu_processes(fixture("gpu_processes", "uuid_and_name_with_header.txt"))
    assert processes[0] == GpuProcess(
        pid=None,
        process_name="vgpu",
        used_memory_mib=None,
        gpu_uuid="GPU-d0180485-9584-433c-6782-c335d5df2cb3",
    )
    assert len(processes) == 3


def test_gpu_processes_default_columns_without_header():
    # Row format of --format=csv,noheader[,nounits], e.g. "44378, tritonserver, 1836 MiB".
    assert parse_gpu_processes("44378, tritonserver, 1836 MiB\n52114, /usr/bin/python3, 6294") == [
        GpuProcess(44378, "tritonserver", 1836),
        GpuProcess(52114, "/usr/bin/python3", 6294),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "No devices were found",
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.",
    ],
)
def test_gpu_processes_none_or_failure(text):
    assert parse_gpu_processes(text) == []
