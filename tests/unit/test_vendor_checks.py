"""The suite's vendor-diagnostic checks over recorded real dcgmi and nccl-tests outputs.

A stand-in testinfra host answers each command with a recorded output (tests/fixtures/dcgm,
tests/fixtures/nccl_tests; sources in their SOURCES.md) and the exit code the source gives;
the checks' own code (command, parsing, gate, pytest outcome) runs unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpufleet.parsers import parse_nccl_tests
from gpufleet.report.vendor_section import validate_vendor
from gpufleet.spec import NodeSpec
from validation import test_vendor_diagnostics as checks
from validation.host.hostinfo import HostInfo, PciDevice
from validation.vendor.runs import dcgm_command, nccl_tests_command, split_rc
from validation.verdicts.runstate import nccl_tests_busbw

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
H100 = PciDevice("0000:18:00.0", "0x10de", "2330", "0x030200")
A100 = PciDevice("0000:07:00.0", "0x10de", "20b0", "0x030200")
NVLINK_TOPO_8 = (
    "\t"
    + "\t".join(f"GPU{i}" for i in range(8))
    + "\n"
    + "".join(
        f"GPU{i}\t" + "\t".join(" X " if i == j else "NV12" for j in range(8)) + "\n"
        for i in range(8)
    )
)


@dataclass
class StandinHost:
    """Answers ``run`` by the first key found in the command; ``exists``/``file`` as given."""

    answers: dict[str, tuple[str, int]]
    files: set[str] = field(default_factory=set)
    commands: list[str] = field(default_factory=list)

    def run(self, command: str) -> SimpleNamespace:
        self.commands.append(command)
        for key, (out, rc) in self.answers.items():
            if key in command:
                text = out + (f"\nrc={rc}\n" if "echo rc=$?" in command else "")
                return SimpleNamespace(rc=0 if "echo rc=$?" in command else rc, stdout=text)
        return SimpleNamespace(rc=1, stdout="")

    def exists(self, command: str) -> bool:
        return command in self.files

    def file(self, path: str) -> SimpleNamespace:
        return SimpleNamespace(exists=path in self.files)


def info(*gpus: PciDevice) -> HostInfo:
    return HostInfo({}, "x86_64", "6.1", [], list(gpus), True, None, "/usr/bin/nvidia-smi")


def state() -> SimpleNamespace:
    """The run state the checks write the results' vendor section into."""
    return SimpleNamespace(vendor={"dcgm": None, "nccl_tests": None})


def record_into(box: dict) -> object:
    def record(message: str | None = None, **figures: object) -> None:
        box.update(figures, message=message)

    return record


def dcgm_host(fixture: str, rc: int, mig: str = "Disabled") -> StandinHost:
    text = (FIXTURES / "dcgm" / fixture).read_text()
    return StandinHost({"dcgmi diag": (text, rc), "mig.mode.current": (mig, 0)}, files={"dcgmi"})


def test_commands_and_exit_codes():
    assert dcgm_command(1) == "timeout 300 dcgmi diag -r 1 -j; echo rc=$?"
    assert nccl_tests_command("/opt/x/all_reduce_perf", 8, "8", "8G").startswith(
        "timeout 1200 /opt/x/all_reduce_perf -b 8 -e 8G -f 2 -g 8 2>&1"
    )
    assert split_rc("line\nrc=226\n") == ("line", 226)
    assert split_rc("no code") == ("no code", None)


def test_a_passing_dcgm3_run_passes_and_records_its_figures():
    box: dict = {}
    host = dcgm_host("dcgm3-nvvs-3.1.0-pass-8gpu.txt", 0)
    checks.test_dcgm_diag(host, info(H100), NodeSpec(), "quick", record_into(box), state())
    assert "dcgmi diag -r 1 -j" in host.commands[-1]
    assert box["message"].startswith("dcgmi diag (level 1):")


def test_a_failing_dcgm4_run_fails_naming_the_gpu_and_dcgms_words():
    host = dcgm_host("dcgm4-gb10-r1-software-fail.json", 226)
    with pytest.raises(pytest.fail.Exception) as failed:
        checks.test_dcgm_diag(host, info(H100), NodeSpec(), "quick", record_into({}), state())
    assert (
        "GPU 0" in str(failed.value)
        or "GPU:0" in str(failed.value)
        or "gpu 0" in str(failed.value).lower()
    )
    assert "ersistence" in str(failed.value)


def test_the_full_tier_runs_level_3_unless_the_inventory_says_otherwise():
    host = dcgm_host("dcgm3-t400-r3-skip.json", 0)
    with pytest.raises(pytest.skip.Exception, match="skipped every test"):
        checks.test_dcgm_diag(host, info(H100), NodeSpec(), "full", record_into({}), state())
    assert "dcgmi diag -r 3 -j" in host.commands[-1]
    spec = NodeSpec.from_host_data({"dcgm_diag_level": 2})
    with pytest.raises(pytest.skip.Exception):
        checks.test_dcgm_diag(host, info(H100), spec, "full", record_into({}), state())
    assert "dcgmi diag -r 2 -j" in host.commands[-1]


@pytest.mark.parametrize("output", ["", "Error: unable to connect to host engine\n", "{"])
def test_empty_or_unrecognised_dcgm_output_is_an_error_never_a_pass(output):
    host = StandinHost({"dcgmi diag": (output, 0), "mig": ("Disabled", 0)}, files={"dcgmi"})
    with pytest.raises(pytest.fail.Exception, match="cannot be trusted"):
        checks.test_dcgm_diag(host, info(H100), NodeSpec(), "quick", record_into({}), state())


def test_mig_mode_skips_with_the_reason():
    host = dcgm_host("dcgm3-nvvs-3.1.0-pass-8gpu.txt", 0, mig="Enabled")
    with pytest.raises(pytest.skip.Exception, match="MIG"):
        checks.test_dcgm_diag(host, info(H100), NodeSpec(), "quick", record_into({}), state())
    assert not any("dcgmi diag" in c for c in host.commands)


def test_dcgmi_missing_on_a_gpu_host_fails_with_the_fix():
    host = StandinHost({})
    with pytest.raises(pytest.fail.Exception, match="dcgmi is not installed"):
        checks.test_dcgm_diag(host, info(H100), NodeSpec(), "quick", record_into({}), state())


def nccl_host(fixture: str, rc: int, built: bool = True) -> StandinHost:
    text = (FIXTURES / "nccl_tests" / fixture).read_text()
    binary = f"{NodeSpec().nccl_tests_dir}/bin/all_reduce_perf"
    return StandinHost(
        {"all_reduce_perf": (text, rc), "topo -m": (NVLINK_TOPO_8, 0)},
        files={binary} if built else set(),
    )


def test_a_healthy_8x_h100_all_reduce_passes_its_published_floor():
    box: dict = {}
    host = nccl_host("h100-8gpu-single-node-ib-cluster.txt", 0)
    checks.test_nccl_allreduce(
        host, info(*[H100] * 8), NodeSpec(), "full", record_into(box), state()
    )
    assert box["largest_busbw"] > 460


def test_a_healthy_8x_a100_all_reduce_passes_azures_floor():
    box: dict = {}
    host = nccl_host("a100-8gpu-old-header-nccl-info.txt", 0)
    checks.test_nccl_allreduce(
        host, info(*[A100] * 8), NodeSpec(), "full", record_into(box), state()
    )
    assert box["largest_busbw"] == 235.26 and box["floor_gbps"] == 180.0


def test_a_host_whose_topology_has_no_published_floor_reports_the_figure_unjudged():
    host = nccl_host("a100-8gpu-old-header-nccl-info.txt", 0)
    host.answers["topo -m"] = (NVLINK_TOPO_8.replace("NV12", "PHB"), 0)
    box: dict = {}
    with pytest.raises(pytest.skip.Exception, match="no published floor"):
        checks.test_nccl_allreduce(
            host, info(*[A100] * 8), NodeSpec(), "full", record_into(box), state()
        )
    assert box["largest_busbw"] == 235.26  # the figure is still in the results


def test_a_nonzero_all_reduce_exit_fails():
    host = nccl_host("h100-8gpu-single-node-ib-cluster.txt", 1)
    with pytest.raises(pytest.fail.Exception, match="exited 1"):
        checks.test_nccl_allreduce(
            host, info(*[H100] * 8), NodeSpec(), "full", record_into({}), state()
        )


def test_all_reduce_needs_the_build_and_two_gpus_and_the_full_tier():
    with pytest.raises(pytest.fail.Exception, match="is missing; run the deploy"):
        checks.test_nccl_allreduce(
            nccl_host("h100-8gpu-single-node-ib-cluster.txt", 0, built=False),
            info(*[H100] * 8),
            NodeSpec(),
            "full",
            record_into({}),
            state(),
        )
    host = nccl_host("h100-8gpu-single-node-ib-cluster.txt", 0)
    with pytest.raises(pytest.skip.Exception, match="1 GPU"):
        checks.test_nccl_allreduce(host, info(H100), NodeSpec(), "full", record_into({}), state())
    with pytest.raises(pytest.skip.Exception, match="full tier"):
        checks.test_nccl_allreduce(
            host, info(*[H100] * 8), NodeSpec(), "quick", record_into({}), state()
        )


# ------------------------------------------------------- the results' vendor section


def test_a_dcgm_run_fills_the_vendor_section_with_every_test():
    run = state()
    host = dcgm_host("dcgm4-gb10-r1-software-fail.json", 226)
    with pytest.raises(pytest.fail.Exception):
        checks.test_dcgm_diag(host, info(H100), NodeSpec(), "quick", record_into({}), run)
    dcgm = run.vendor["dcgm"]
    validate_vendor(run.vendor)
    assert (dcgm["level"], dcgm["status"], dcgm["overall"], dcgm["format"]) == (
        1,
        "fail",
        "fail",
        "4",
    )
    assert dcgm["exit_code"] == 226 and dcgm["version"] == "4.2.3"
    failed = [t for t in dcgm["tests"] if t["status"] == "fail"]
    assert [(t["name"], t["gpu"]) for t in failed] == [("software", "0")]
    assert "ersistence" in failed[0]["message"]
    assert run.vendor["nccl_tests"] is None


def test_a_dcgm_run_that_never_ran_dcgmi_still_says_why_in_the_section():
    run = state()
    with pytest.raises(pytest.skip.Exception):
        checks.test_dcgm_diag(
            dcgm_host("dcgm3-nvvs-3.1.0-pass-8gpu.txt", 0, mig="Enabled"),
            info(H100), NodeSpec(), "quick", record_into({}), run,
        )  # fmt: skip
    dcgm = run.vendor["dcgm"]
    assert (dcgm["status"], dcgm["overall"], dcgm["tests"]) == ("skip", None, [])
    assert "MIG" in dcgm["reason"]
    run = state()
    with pytest.raises(pytest.fail.Exception):
        checks.test_dcgm_diag(
            StandinHost({}), info(H100), NodeSpec(), "quick", record_into({}), run
        )
    assert run.vendor["dcgm"]["status"] == "fail"
    assert "dcgmi is not installed" in run.vendor["dcgm"]["reason"]


def test_an_all_reduce_run_fills_the_section_the_workloads_read():
    run = state()
    host = nccl_host("a100-8gpu-old-header-nccl-info.txt", 0)
    checks.test_nccl_allreduce(host, info(*[A100] * 8), NodeSpec(), "full", record_into({}), run)
    nccl = run.vendor["nccl_tests"]
    validate_vendor(run.vendor)
    parsed = parse_nccl_tests(
        (FIXTURES / "nccl_tests" / "a100-8gpu-old-header-nccl-info.txt").read_text()
    )
    assert nccl["busbw_at_largest_gbps"] == 235.26 == parsed.largest_busbw
    assert nccl["avg_busbw_gbps"] == parsed.avg_busbw and nccl["wrong"] == 0
    assert [r["size_bytes"] for r in nccl["sizes"]] == [r.size for r in parsed.rows]
    assert nccl["floor"]["busbw_gbps"] == 180.0 and nccl["floor"]["enforced"] is True
    assert "nccl-tests#149" in nccl["floor"]["source"]
    assert (nccl["status"], nccl["gpu_count"], nccl["interconnect"]) == ("pass", 8, "nvlink")
    # The workloads' all-reduce check (issue 13 item 4) reads it through this function.
    assert nccl_tests_busbw(run) == 235.26
    assert nccl_tests_busbw(state()) is None


def test_an_all_reduce_that_crashed_before_its_table_fails_with_the_exit_code():
    run = state()
    host = nccl_host("a100-8gpu-old-header-nccl-info.txt", 0)
    host.answers["all_reduce_perf"] = (
        "host1: Test NCCL failure common.cu:1005 'unhandled cuda error'\n",
        1,
    )
    with pytest.raises(pytest.fail.Exception, match="exited 1: no nccl-tests result rows"):
        checks.test_nccl_allreduce(
            host, info(*[A100] * 8), NodeSpec(), "full", record_into({}), run
        )
    nccl = run.vendor["nccl_tests"]
    assert nccl["status"] == "fail" and nccl["busbw_at_largest_gbps"] is None
    assert nccl["sizes"] == [] and nccl["floor"] is None
