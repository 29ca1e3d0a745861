"""gpufleet report: the fleet summary, and the HTML report rendered in headless Chromium."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from gpufleet.commands import report as cmd
from gpufleet.report.fleet import load_fleet, summary
from gpufleet.report.html import render_html
from gpufleet.validate.baseline import record_run
from tests.unit import fleet_factory as ff
from tests.unit.chromium import Chromium, find_chromium

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT = ROOT / "docs" / "report-screenshot.png"
DRIFT_B = ["libnccl2 no longer held", "/etc/modprobe.d/blacklist-nouveau.conf differs"]


def build_fleet(root: Path) -> list[str]:
    """Recorded real runs of this machine plus synthetic GPU hosts; returns the host names."""
    local = ff.recorded("validate-local-quick.json")  # real `gpufleet validate @local`
    ff.write(root, {**local, "host": "@local"})
    ff.write(root, ff.recorded("periodic-local-quick.json"))  # real validation.periodic
    # gpu-a: healthy, steady; its first run is the baseline.
    for day, scale in ((1, 1.0), (8, 1.02), (15, 0.99)):
        doc = ff.document(
            "gpu-a",
            started_at=ff.when(day),
            workloads=ff.gpu_workloads(scale),
            health=ff.gpu_health(),
        )
        ff.write(root, doc)
        record_run(root, doc)
    (root / "gpu-a" / "drift.json").write_text("[]")
    # gpu-b: five runs gather its baseline (XLA about 1.42x); later XLA fell to 1.18x: still
    # above 1.1, so a regression but not a failure.
    for day, xla in ((2, 1.42), (3, 1.44), (4, 1.40), (5, 1.43), (6, 1.41), (9, 1.35), (16, 1.18)):
        doc = ff.document("gpu-b", started_at=ff.when(day), workloads=ff.gpu_workloads(xla=xla))
        ff.write(root, doc)
        record_run(root, doc)
    drift = {  # as `gpufleet drift --results-dir` writes it
        "host": "gpu-b",
        "checked_at": "2026-11-16T04:00:00+00:00",
        "status": "drift",
        "reason": "",
        "changes": DRIFT_B,
        "conditional": [],
        "validation_failures": [],
    }
    (root / "gpu-b" / "drift.json").write_text(json.dumps(drift))
    # gpu-c: slow everywhere and a GPU with uncorrectable ECC errors.
    sick = ff.document(
        "gpu-c",
        started_at=ff.when(16),
        workloads=ff.gpu_workloads(0.6),
        health=ff.gpu_health(temperature=87.0, ecc=2, pending=True),
    )
    ff.write(root, sick)
    # gpu-d: could not be reached; gpu-e's name needs escaping in HTML.
    down = ff.document("gpu-d", started_at=ff.when(16), workloads=[], run_error="ssh: timed out")
    ff.write(root, down)
    unreachable = {
        "host": "gpu-d",
        "checked_at": "2026-11-16T04:00:00+00:00",
        "status": "unreachable",
        "reason": "SSH connection to gpu-d failed: timed out",
        "changes": [],
        "conditional": [],
        "validation_failures": [],
    }
    (root / "gpu-d" / "drift.json").write_text(json.dumps(unreachable))
    ff.write(root, ff.document("<gpu-e>&", started_at=ff.when(16), workloads=ff.gpu_workloads()))
    (root / "junit").mkdir()
    (root / "junit" / "run.xml").write_text("<testsuites/>")
    return ["@local", "vm", "gpu-a", "gpu-b", "gpu-c", "gpu-d", "<gpu-e>&"]


@pytest.fixture(scope="module")
def fleet_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("fleet") / "results"
    root.mkdir()
    return root, build_fleet(root)


@pytest.fixture(scope="module")
def html_path(fleet_dir: tuple[Path, list[str]]) -> Path:
    root, _ = fleet_dir
    out = root.parent / "report.html"
    cwd = Path.cwd()
    os.chdir(root.parent)  # as a user runs it: gpufleet report results --html report.html
    try:
        assert cmd.main(["results", "--html", "report.html"]) == 1  # the fleet has failures
    finally:
        os.chdir(cwd)
    return out


def test_summary_names_regressions_drift_and_failures(fleet_dir: tuple[Path, list[str]]) -> None:
    root, names = fleet_dir
    data = summary(load_fleet(root))
    hosts = {h["host"]: h for h in data["hosts"]}
    assert sorted(hosts) == sorted(names)
    assert [r["key"] for r in hosts["gpu-b"]["regressions"]] == ["xla/speedup"]
    assert hosts["gpu-b"]["status"] == "pass"
    assert hosts["gpu-b"]["drift"]["changes"] == DRIFT_B
    assert hosts["gpu-a"]["regressions"] == [] and hosts["gpu-a"]["drift"]["changes"] == []
    assert hosts["gpu-a"]["runs"] == 3
    assert hosts["gpu-c"]["status"] == "fail" and hosts["gpu-c"]["baseline_run_id"] is None
    assert hosts["gpu-d"]["status"] == "error"
    assert hosts["gpu-d"]["drift"]["reason"].startswith("SSH connection to gpu-d failed")
    assert hosts["@local"]["drift"] is None
    xla = next(f for f in hosts["gpu-c"]["figures"] if f["key"] == "xla/speedup")
    assert xla["meets_threshold"] is False and xla["threshold"] == 1.1
    assert data["checks"][0].startswith("host_state::")


def test_json_output(fleet_dir: tuple[Path, list[str]], capsys: pytest.CaptureFixture) -> None:
    root, _ = fleet_dir
    assert cmd.main([str(root), "--json", "--regression-margin", "0.5"]) == 1  # hosts failed
    data = json.loads(capsys.readouterr().out)
    assert data["regression_margin"] == 0.5
    assert all(h["regressions"] == [] for h in data["hosts"])  # 17 % < 50 %


def test_figure_margin_overrides_one_figure(
    fleet_dir: tuple[Path, list[str]], capsys: pytest.CaptureFixture
) -> None:
    root, _ = fleet_dir
    args = [str(root), "--json", "--figure-margin", "xla/speedup=0.2"]
    assert cmd.main(args) == 1
    hosts = {h["host"]: h for h in json.loads(capsys.readouterr().out)["hosts"]}
    assert hosts["gpu-b"]["regressions"] == []  # fell 17 %, allowed 20 %
    assert cmd.main([str(root), "--figure-margin", "xla/speedup"]) == 2
    assert "is not KEY=FRACTION" in capsys.readouterr().err
    assert cmd.main([str(root), "--figure-margin", "xla/speedup=20"]) == 2
    assert "between 0 and 1" in capsys.readouterr().err


def test_terminal_output_lists_every_host(
    fleet_dir: tuple[Path, list[str]],
    capsys: pytest.CaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "220")
    root, names = fleet_dir
    assert cmd.main([str(root)]) == 1
    out = capsys.readouterr().out
    for name in names:
        assert name in out


def test_empty_or_missing_results_dir_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert cmd.main([str(tmp_path / "absent")]) == 2
    assert "is not a directory" in capsys.readouterr().err
    (tmp_path / "host").mkdir()
    (tmp_path / "host" / "junk.json").write_text("{}")
    assert cmd.main([str(tmp_path)]) == 2
    assert "no results documents" in capsys.readouterr().err


def test_html_is_self_contained(html_path: Path, fleet_dir: tuple[Path, list[str]]) -> None:
    text = html_path.read_text()
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=\"?(https?:)?//", text)
    assert '<link rel="stylesheet"' not in text and "@import" not in text
    assert text.count("<svg") >= 4  # speed-ups, scaling, and history for gpu-a and gpu-b
    assert "&lt;gpu-e&gt;&amp;" in text and "<gpu-e>" not in text
    for change in DRIFT_B:
        assert change in text


def test_renders_in_headless_chromium(html_path: Path, fleet_dir: tuple[Path, list[str]]) -> None:
    if find_chromium() is None:
        pytest.skip("no chromium on PATH: apt-get install -y chromium (Debian's package)")
    _, names = fleet_dir
    with Chromium() as browser:
        page, session = browser.load(html_path)
        assert page.errors == []
        assert all(url.startswith(("file:", "data:")) for url in page.requests), page.requests
        shown = browser.evaluate(
            session,
            "[...document.querySelectorAll('table.matrix th.hostcol a')].map(a => a.textContent)",
        )
        assert shown == sorted(names)  # hosts sorted by name, every one shown
        plots = browser.evaluate(
            session,
            "[...document.querySelectorAll('figure.plot svg')]"
            ".map(s => s.getBoundingClientRect().width)",
        )
        assert len(plots) >= 4 and min(plots) > 200  # the SVGs laid out, not collapsed
        if os.environ.get("GPUFLEET_SCREENSHOT"):
            browser.screenshot(session, SCREENSHOT)


def test_docs_check_the_readmes_report_screenshot_is_a_png() -> None:
    """A docs check, not behaviour: the README's docs/report-screenshot.png is in the tree and
    a PNG (refresh it: GPUFLEET_SCREENSHOT=1 pytest this file)."""
    assert SCREENSHOT.exists() and SCREENSHOT.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_render_html_without_matplotlib_says_how_to_fix(
    fleet_dir: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name: str, *args: object, **kwargs: object) -> object:
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(RuntimeError, match="pip install 'matplotlib=="):
        render_html(load_fleet(fleet_dir[0]))


def test_report_never_writes_into_the_results_dir(
    fleet_dir: tuple[Path, list[str]], tmp_path: Path
) -> None:
    root, _ = fleet_dir
    before = sorted(str(p) for p in root.rglob("*"))
    assert cmd.main([str(root), "--html", str(tmp_path / "r.html"), "--json"]) == 1
    assert sorted(str(p) for p in root.rglob("*")) == before


def test_chromium_harness_sees_console_errors_and_fetches(tmp_path: Path) -> None:
    """The check above can fail: a page with a script error and a remote fetch is caught."""
    if find_chromium() is None:
        pytest.skip("no chromium on PATH: apt-get install -y chromium (Debian's package)")
    page_path = tmp_path / "bad.html"
    page_path.write_text(
        "<!DOCTYPE html><html><head><link rel='icon' href='data:,'></head><body>"
        "<img src='missing.png'><script>console.error('boom'); undefinedCall();</script>"
        "</body></html>"
    )
    with Chromium() as browser:
        page, _ = browser.load(page_path)
    assert any("boom" in e for e in page.errors)
    assert any("undefinedCall" in e or "exception" in e for e in page.errors)
    assert any(url.endswith("missing.png") for url in page.requests)
