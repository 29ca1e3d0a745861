"""nccl-tests parser on real recorded runs (sources in tests/fixtures/nccl_tests/SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet.parsers import parse_nccl_tests
from gpufleet.parsers.nccl import NcclResultRow, NcclTestsParseError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl_tests"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_every_fixture_names_its_source():
    sources = fixture("SOURCES.md")
    files = sorted(p.name for p in FIXTURES.glob("*.txt"))
    assert len(files) >= 3
    missing = [name for name in files if f"| {name} |" not in sources]
    assert not missing, f"SOURCES.md does not name the source of {missing}"


def test_new_header_with_root_and_group():
    result = parse_nccl_tests(fixture("h100-2node-new-header.txt"))
    assert len(result.rows) == 31
    assert result.avg_busbw == pytest.approx(70.742)  # trailing space after the number
    assert result.wrong == 0
    assert result.devices == ["NVIDIA H100 80GB HBM3"] * 16
    assert result.rows[0] == NcclResultRow(
        size=8, count=2, type="float", redop="sum", root=-1,
        time_us=135.8, algbw=0.0, busbw=0.0, wrong=0,
        in_place_time_us=123.5, in_place_algbw=0.0, in_place_busbw=0.0, in_place_wrong=0,
    )  # fmt: skip
    last = result.rows[-1]
    assert (last.size, last.time_us, last.busbw, last.in_place_busbw) == (
        8589934592,
        47535.0,
        338.82,
        337.35,
    )
    assert result.max_busbw == pytest.approx(338.82)


def test_old_header_without_root_and_interleaved_nccl_info():
    result = parse_nccl_tests(fixture("a100-8gpu-old-header-nccl-info.txt"))
    assert len(result.rows) == 34  # the "NCCL INFO Launch mode Parallel" line is skipped
    assert all(row.root is None for row in result.rows)
    assert result.rows[0].size == 0 and result.rows[2].size == 4
    assert result.rows[-1].busbw == pytest.approx(235.26)
    assert result.rows[-1].wrong is None  # N/A
    assert result.wrong == 0  # N/A counts as 0
    assert result.avg_busbw == pytest.approx(68.4048)
    assert result.devices == ["A100-SXM4-40GB"] * 8


def test_root_column_with_old_rank_lines_and_na_wrong():
    result = parse_nccl_tests(fixture("k80-2node-root-column.txt"))
    assert [row.size for row in result.rows][:3] == [1048576, 2097152, 4194304]
    assert {row.root for row in result.rows} == {-1}
    assert result.rows[3].time_us == 14868.0
    assert result.avg_busbw == pytest.approx(0.565546)
    assert result.devices == ["Tesla K80", "Tesla K80"]


def test_wrong_results_are_totalled():
    # A real run with one out-of-place and one in-place row made to report wrong results.
    text = fixture("h100-2node-new-header.txt")
    bad = text.replace(
        "135.8    0.00    0.00      0    123.5    0.00    0.00      0",
        "135.8    0.00    0.00      3    123.5    0.00    0.00      2",
    )
    assert parse_nccl_tests(bad).wrong == 5


def test_nccl_warn_lines_are_collected_not_parsed():
    warn = "ztan-mig-235z:6899:6950 [0] NCCL WARN NET/Socket : peer closed connection"
    text = fixture("k80-2node-root-column.txt").replace(
        "#   Rank  1 Pid", f"{warn}\n#   Rank  1 Pid"
    )
    result = parse_nccl_tests(text)
    assert result.nccl_warnings == [warn]
    assert len(result.rows) == 11


def test_to_dict_is_json():
    data = json.loads(json.dumps(parse_nccl_tests(fixture("k80-2node-root-column.txt")).to_dict()))
    assert data["avg_busbw"] == pytest.approx(0.565546)
    assert data["max_busbw"] == pytest.approx(0.63)
    assert data["rows"][0]["in_place_wrong"] is None


@pytest.mark.parametrize(
    "text",
    ["", "mpirun noticed that process rank 0 exited on signal 11 (Segmentation fault)."],
)
def test_no_result_table_is_a_clear_error(text):
    with pytest.raises(NcclTestsParseError, match="Avg bus bandwidth"):
        parse_nccl_tests(text)


# Issue 14: real multi-node captures the parser used to reject. file, launcher prefix style,
# rows, GPUs, avg busbw, busbw at the largest size, largest size.
CAPTURES = [
    ("a100-p4d-2node-efa-mpirun-error-column.txt", "openmpi", 28, 16, 7.80081, 32.84, 1 << 30),
    ("t4-2node-efa-mpirun-tag-output.txt", "openmpi", 31, 2, 1.15327, 3.12, 1 << 30),
    ("h100-2node-ib-srun-label.txt", "slurm", 11, 16, 142.735, 155.57, 8 << 30),
    ("h100-8gpu-single-node-ib-cluster.txt", None, 6, 8, 439.369, 476.53, 4 << 30),
]


@pytest.mark.parametrize(("name", "prefix", "rows", "gpus", "avg", "largest", "size"), CAPTURES)
def test_real_captures(name, prefix, rows, gpus, avg, largest, size):
    result = parse_nccl_tests(fixture(name))
    assert result.launcher_prefix == prefix
    assert len(result.rows) == rows
    assert len(result.devices) == gpus
    assert result.avg_busbw == pytest.approx(avg)
    assert result.largest_busbw == pytest.approx(largest)
    assert result.largest is not None and result.largest.size == size
    assert result.wrong == 0 and result.out_of_bounds == 0
    sizes = [row.size for row in result.rows]
    assert sizes == sorted(sizes)  # no NCCL INFO line or other rank's line read as a row


def test_old_error_column_keeps_the_error_value():
    result = parse_nccl_tests(fixture("a100-p4d-2node-efa-mpirun-error-column.txt"))
    first = result.rows[0]
    assert (first.size, first.root, first.wrong, first.max_error, first.in_place_max_error) == (
        8,
        None,
        None,
        2e-07,
        1e-07,
    )
    assert not any(row.error_exceeded for row in result.rows)
    assert result.devices == ["A100-SXM4-40GB"] * 16


def test_starred_error_over_threshold_counts_as_wrong():
    text = fixture("a100-p4d-2node-efa-mpirun-error-column.txt").replace(
        "61556   17.44   32.71  5e-07", "61556   17.44   32.71  3e-02*"
    )
    result = parse_nccl_tests(text)
    assert result.rows[-1].error_exceeded and result.rows[-1].max_error == pytest.approx(0.03)
    assert result.wrong == 1


def test_size_zero_rows_are_rows():
    result = parse_nccl_tests(fixture("t4-2node-efa-mpirun-tag-output.txt"))
    assert [row.size for row in result.rows[:3]] == [0, 0, 4]
    assert result.rows[0].time_us == 6.36 and result.rows[0].wrong == 0


def test_rows_of_another_rank_are_not_read():
    # Only the rank that printed the header prints rows; a row-like line from rank 1 (as a
    # launcher may interleave it) is not part of rank 0's table.
    text = fixture("t4-2node-efa-mpirun-tag-output.txt").replace(
        "[1,0]<stdout>:           4             1",
        "[1,1]<stdout>:           4             1",
    )
    result = parse_nccl_tests(text)
    assert 4 not in [row.size for row in result.rows]


def test_out_of_bounds_values_are_read():
    text = fixture("h100-8gpu-single-node-ib-cluster.txt").replace(
        "# Out of bounds values : 0 OK", "# Out of bounds values : 3 FAILED"
    )
    assert parse_nccl_tests(text).out_of_bounds == 3


@pytest.mark.parametrize(
    ("line", "style"),
    [
        ("[1,0]<stdout>:#  Rank  0 Group  0", "openmpi"),
        ("[1,12]<stderr>:# nThread 1", "openmpi"),
        (" 0: # nThread 1", "slurm"),
        ("12: # nThread 1", "slurm"),
        ("[0] # nThread 1", "mpich"),
        ("# nThread 1", None),
    ],
)
def test_launcher_prefix_styles(line, style):
    from gpufleet.parsers.nccl import detect_launcher_prefix

    assert detect_launcher_prefix(["some launcher noise", line]) == style


def test_nccl_doctests():
    import doctest

    import gpufleet.parsers.nccl

    outcome = doctest.testmod(gpufleet.parsers.nccl)
    assert outcome.attempted > 0 and outcome.failed == 0
