"""Bounded apt (issue 34 item 4): the update script run by a real sh against stand-in apt tools."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from pyinfra.api import OperationError

from gpufleet.operations import apt_bounded
from gpufleet.spec import NodeSpec, SpecError

# A stand-in apt-get: logs its arguments, then behaves as $SCENARIO says.
STAND_IN_APT = """\
#!/bin/sh
echo "$*" >> "$CALLS"
case $SCENARIO in
  ok) echo "Hit:1 http://archive.example/ubuntu jammy InRelease"; exit 0 ;;
  silent) echo "Err:1 http://archive.example/ubuntu jammy InRelease"
          echo "  Connection timed out [IP: 10.0.0.9 3142]"
          echo "W: Failed to fetch http://archive.example/ubuntu/dists/jammy/InRelease" \\
               " Connection timed out [IP: 10.0.0.9 3142]"
          exit 0 ;;
  hang) exec sleep 30 ;;
  refused) echo "E: The repository 'http://archive.example/x' is not signed."; exit 100 ;;
esac
"""
STAND_IN_CONFIG = """\
#!/bin/sh
echo "proxy='http://ops:s3cret@10.0.0.9:3142/'"
"""


def run_update(tmp_path: Path, scenario: str, whole: int = 20) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in (("apt-get", STAND_IN_APT), ("apt-config", STAND_IN_CONFIG)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SCENARIO": scenario}
    env["CALLS"] = str(tmp_path / "calls")
    return subprocess.run(
        ["sh", "-c", apt_bounded.UPDATE, "gpufleet-apt-update", "5", str(whole)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_update_passes_apts_own_bounds_and_succeeds(tmp_path: Path) -> None:
    result = run_update(tmp_path, "ok")
    assert result.returncode == 0, result.stderr
    assert "bounded apt" not in result.stderr
    (call,) = (tmp_path / "calls").read_text().splitlines()
    assert call.startswith("update ")
    for option in ("Acquire::http::Timeout=5", "Acquire::https::Timeout=5", "Acquire::Retries=1"):
        assert option in call.split(), call


def test_a_silent_mirror_fails_the_update_naming_mirror_and_proxy(tmp_path: Path) -> None:
    # apt-get update itself exits 0 when a source timed out: the script must not.
    result = run_update(tmp_path, "silent")
    assert result.returncode == 1, result.stdout + result.stderr
    message = result.stderr
    assert "gpufleet: bounded apt:" in message
    assert "http://archive.example/ubuntu/dists/jammy/InRelease" in message
    assert "proxy: http://10.0.0.9:3142/" in message
    assert "s3cret" not in message and "ops@" not in message
    assert "5 s" in message and "20 s" in message and "apt_timeout_s" in message


def test_an_update_that_hangs_is_stopped_by_the_outer_bound(tmp_path: Path) -> None:
    result = run_update(tmp_path, "hang", whole=1)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "gpufleet: bounded apt:" in result.stderr


def test_other_apt_failures_keep_their_own_status_and_words(tmp_path: Path) -> None:
    result = run_update(tmp_path, "refused")
    assert result.returncode == 100
    assert "bounded apt" not in result.stderr


def test_update_command_carries_the_bound_and_the_whole_update_limit() -> None:
    command = apt_bounded.update_command(7).get_raw_value()
    assert command.startswith("sh -c ") and command.endswith(" gpufleet-apt-update 7 28")


@pytest.mark.parametrize("value", [0, 1, 3601, "5", True, 2.5])
def test_a_bad_bound_is_refused_by_the_operation(value: object) -> None:
    with pytest.raises(OperationError, match="apt_timeout_s"):
        apt_bounded.host_timeout({"apt_timeout_s": value})


def test_the_bound_defaults_and_follows_the_inventory() -> None:
    assert apt_bounded.host_timeout({}) == apt_bounded.DEFAULT_APT_TIMEOUT_S
    assert apt_bounded.host_timeout({"apt_timeout_s": 5}) == 5
    assert NodeSpec.from_host_data({}).apt_timeout_s == apt_bounded.DEFAULT_APT_TIMEOUT_S


@pytest.mark.parametrize(("value", "words"), [(1, "no time"), ("60", "wrong type"), (9000, "more")])
def test_the_inventory_key_is_checked_strictly(value: object, words: str) -> None:
    with pytest.raises(SpecError, match="apt_timeout_s") as caught:
        NodeSpec.from_host_data({"apt_timeout_s": value})
    assert words in str(caught.value)
