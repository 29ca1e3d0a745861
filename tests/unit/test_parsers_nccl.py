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
