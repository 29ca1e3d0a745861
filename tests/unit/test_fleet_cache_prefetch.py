"""The first cache client of a kind downloads each install's debs before the others install,
so apt-cacher-ng sees one first request per file (real pyinfra --dry plans)."""

from __future__ import annotations

from pathlib import Path

from tests.unit.fake_fleet import FakeGpuHost
from tests.unit.test_fleet_cache import CACHE_HOST, _plan

FETCH = ": fetched into the fleet cache once, by the first host of its kind"
DRIVER = "NVIDIA driver packages of the locked branch"


def _ops(plan: list, suffix: str) -> dict[str, tuple[int, list[str]]]:
    return {
        op["name"].split(" | ")[1]: (i, op["hosts_with_change"])
        for i, op in enumerate(plan)
        if op["name"].endswith(suffix)
    }


def test_one_client_downloads_then_every_client_installs(tmp_path: Path) -> None:
    hosts = {"cache": CACHE_HOST, "gpu1": FakeGpuHost(), "gpu2": FakeGpuHost()}
    hosts["gpu3"] = FakeGpuHost()
    result, plan = _plan(tmp_path, hosts)
    assert result.returncode == 0, result.stderr[-3000:]
    names = [op["name"].split(" | ")[1] for op in plan]
    fetches = _ops(plan, FETCH)
    assert f"{DRIVER}{FETCH}" in fetches and f"system CUDA toolkit{FETCH}" in fetches
    for fetch, (at, changing) in fetches.items():
        install = fetch.removesuffix(FETCH)
        # the download is planned on one of the installing hosts, right before the install
        # (the first to plan it: pyinfra plans hosts side by side, so not always gpu1)
        assert names.index(install) == at + 1, fetch
        installing = plan[at + 1]["hosts_with_change"]
        assert len(changing) == 1 and changing[0] in installing, (fetch, changing, installing)
        assert {"@fake/gpu1", "@fake/gpu2", "@fake/gpu3"} <= set(installing), fetch


def test_the_download_is_apt_gets_own_with_the_installs_options(monkeypatch) -> None:
    """What the first host runs: apt-get install --download-only, quoted, options kept."""
    from gpufleet.operations import apt

    monkeypatch.setattr(apt, "planning_fact", lambda _host, _fact: {"dkms": ["3.0"]})
    fake = {"noop": lambda _s, m: notes.append(m), "data": {"apt_timeout_s": 9}}
    monkeypatch.setattr(apt, "host", type("H", (), fake)())
    notes: list[str] = []
    (command,) = apt.downloaded._inner(["dkms", "nvidia-open=580.1-1;x"], True, True)
    text = command.get_raw_value()
    assert (
        "install -o Acquire::http::Timeout=9 -o Acquire::https::Timeout=9 "
        "-o Acquire::ftp::Timeout=9 -o Acquire::Retries=1 "
        "-o Acquire::http::Pipeline-Depth=0 --download-only "
        "--allow-change-held-packages --allow-downgrades --" in text
    )
    assert text.endswith("-- 'nvidia-open=580.1-1;x'")  # missing only, and quoted
    assert list(apt.downloaded._inner(["nvidia-open"], False)) == []
    assert notes == ["fetched by the first host of its kind"]


def test_a_host_with_nothing_to_install_does_not_fetch_for_the_others(tmp_path: Path) -> None:
    """gpu1 already has the toolkit: a host that lacks it fetches it for the others."""
    toolkit = FakeGpuHost().resolution().cuda_toolkit_package
    hosts = {
        "cache": CACHE_HOST,
        "gpu1": FakeGpuHost(packages={toolkit: "12.5.1-1"}),
        "gpu2": FakeGpuHost(),
        "gpu3": FakeGpuHost(),
    }
    result, plan = _plan(tmp_path, hosts)
    assert result.returncode == 0, result.stderr[-3000:]
    fetches = _ops(plan, FETCH)
    toolkit_by = fetches[f"system CUDA toolkit{FETCH}"][1]
    assert len(toolkit_by) == 1 and toolkit_by != ["@fake/gpu1"], toolkit_by


def test_without_a_cache_no_download_is_planned(tmp_path: Path) -> None:
    result, plan = _plan(tmp_path, {"gpu1": FakeGpuHost(), "gpu2": FakeGpuHost()}, cache=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert not _ops(plan, FETCH)
