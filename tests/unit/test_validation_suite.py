"""The on-host suite's helpers (validation/host/hostinfo.py) and its outcome mapping, for real."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from gpufleet.report.schema import validate_results
from validation.host import hostinfo
from validation.verdicts.expectations import Expectations
from validation.verdicts.tiers import FULL_WORKLOADS

REPO = Path(__file__).resolve().parent.parent.parent


def test_pci_script_runs_here_and_parses():
    out = subprocess.run(["sh", "-c", hostinfo.PCI_SCRIPT], capture_output=True, text=True)
    devices = hostinfo.parse_sysfs_pci(out.stdout)
    assert out.returncode == 0
    if Path("/sys/bus/pci/devices").is_dir() and any(Path("/sys/bus/pci/devices").iterdir()):
        assert devices and all(d.vendor.startswith("0x") for d in devices)


def test_pci_script_reads_a_fixed_sysfs(tmp_path: Path) -> None:
    """The twin of the test above, whatever this machine's bus holds: the same script over a
    made-up devices folder (a GPU, an NVSwitch, and a function without attributes)."""
    for slot, vendor, device, pci_class in (
        ("0000:18:00.0", "0x10de", "0x2330", "0x030200"),
        ("0000:05:00.0", "0x10de", "0x22a3", "0x068000"),
    ):
        folder = tmp_path / slot
        folder.mkdir()
        for name, value in (("vendor", vendor), ("device", device), ("class", pci_class)):
            (folder / name).write_text(value + "\n")
    (tmp_path / "0000:5e:00.0").mkdir()
    script = hostinfo.PCI_SCRIPT.replace("/sys/bus/pci/devices", str(tmp_path))
    assert script != hostinfo.PCI_SCRIPT
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True)
    devices = hostinfo.parse_sysfs_pci(out.stdout)
    assert [(d.slot, d.is_nvidia_gpu, d.is_nvswitch) for d in devices] == [
        ("0000:05:00.0", False, True),
        ("0000:18:00.0", True, False),
    ]


def test_parse_sysfs_pci_classifies_gpus_and_nvswitches():
    # Lines in PCI_SCRIPT's format: "<slot> <vendor> <device> <class>" as sysfs prints them.
    text = textwrap.dedent("""\
        0000:18:00.0 0x10de 0x2330 0x030200
        0000:05:00.0 0x10de 0x22a3 0x068000
        0000:00:02.0 0x1af4 0x1050 0x030000
        0000:65:00.1 0x10de 0x22bc 0x040300
        garbage line
    """)
    devices = hostinfo.parse_sysfs_pci(text)
    assert [d.slot for d in devices if d.is_nvidia_gpu] == ["0000:18:00.0"]
    assert [d.device_id for d in devices if d.is_nvswitch] == ["22a3"]
    assert len(devices) == 4


def test_parse_os_release_of_this_machine():
    values = hostinfo.parse_os_release(Path("/etc/os-release").read_text())
    assert values["ID"] and values["VERSION_ID"]


def test_apt_blacklist_from_real_apt_config(tmp_path):
    # apt-config itself parses a blacklist written the way unattended-upgrades documents it.
    conf = tmp_path / "apt.conf"
    conf.write_text(
        'Unattended-Upgrade::Package-Blacklist { "nvidia-"; "libnvidia-"; "^cuda-.*"; '
        '"libcudnn"; };\n'
    )
    dump = subprocess.run(
        ["apt-config", "-c", str(conf), "dump"], capture_output=True, text=True, check=True
    ).stdout
    entries = hostinfo.parse_apt_blacklist(dump)
    assert entries == ["nvidia-", "libnvidia-", "^cuda-.*", "libcudnn"]
    for prefix in ("nvidia-", "libnvidia-", "cuda-", "libcudnn"):
        assert hostinfo.blacklist_covers(entries, prefix)
    assert not hostinfo.blacklist_covers(entries, "libnccl")


def test_showhold_and_apt_specs():
    assert hostinfo.parse_showhold("libnccl2\nnvidia-open:amd64\n") == {"libnccl2", "nvidia-open"}
    assert hostinfo.split_apt_spec("libnccl2=2.27.7-1+cuda12.9") == (
        "libnccl2",
        "2.27.7-1+cuda12.9",
    )
    assert hostinfo.split_apt_spec("nvidia-open") == ("nvidia-open", None)


def test_newest_kernel():
    info = hostinfo.HostInfo(
        {},
        "x86_64",
        "5.15.0-91-generic",
        ["5.15.0-91-generic", "5.15.0-105-generic", "5.4.0-1-generic"],
        [],
        False,
        None,
        None,
    )
    assert info.newest_kernel == "5.15.0-105-generic"
    assert info.gpu_missing_reason() == "no NVIDIA GPU on the PCI bus"


# A stand-in payload: tiny `validation.workloads.*` programs that print fixed verdicts, so the
# suite's handling of each verdict is exercised without TensorFlow (they are test doubles, not
# recorded outputs).
STANDIN = """\
import json, sys
status = {status!r}
if status == "crash":
    print("Traceback: boom", file=sys.stderr); sys.exit(1)
text = json.dumps({{"workload": {name!r}, "schema_version": 1, "metrics": {{"speedup": 1.5}},
    "checks": [{{"name": "loss", "status": "pass", "reason": "ok"}}],
    "verdict": {{"status": status, "reason": "stand-in " + status}}}})
print(text)
open(sys.argv[sys.argv.index("--json") + 1], "w").write(text)  # as the real workloads do
"""


def test_workload_verdicts_map_to_check_statuses(tmp_path):
    payload = tmp_path / "payload"
    pkg = payload / "validation" / "workloads"
    pkg.mkdir(parents=True)
    (payload / "validation" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    verdicts = dict.fromkeys(FULL_WORKLOADS, "pass") | {
        "mirrored": "inconclusive",
        "mixed_precision": "not_applicable",
        "xla": "fail",
        "gemm": "crash",
    }
    for name, status in verdicts.items():
        (pkg / f"{name}.py").write_text(STANDIN.format(name=name, status=status))
    expectations = tmp_path / "exp.json"
    expectations.write_text(
        json.dumps(
            Expectations(
                host="h", python=sys.executable, payload_dir=str(payload), target="local://"
            ).to_dict()
        )
    )
    results = tmp_path / "results.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(REPO / "validation"),
            "--hosts=local://",
            f"--expectations={expectations}",
            f"--results-json={results}",
            "--tier=full",  # mixed_precision and xla run in the full tier only
            "-k",
            "workload",
            "-p",
            "no:cacheprovider",
            "-q",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stdout[-2000:]
    document = json.loads(results.read_text())
    validate_results(document)
    outcome = {c["name"]: (c["status"], c["message"]) for c in document["checks"]}
    assert outcome["workloads::mirrored"] == ("inconclusive", "inconclusive: stand-in inconclusive")
    assert outcome["workloads::mixed_precision"] == (
        "skipped",
        "not applicable: stand-in not_applicable",
    )
    assert outcome["workloads::xla"] == ("fail", "xla: stand-in fail")
    status, message = outcome["workloads::gemm"]
    assert status == "fail" and "printed no JSON document (exit 1)" in message
    assert "Traceback: boom" in message
    assert [w["workload"] for w in document["workloads"]] == [
        w for w in FULL_WORKLOADS if w != "gemm"
    ]
    figures = next(c for c in document["checks"] if c["name"] == "workloads::mirrored")["figures"]
    assert figures == {"speedup": 1.5}
