"""A rollout's own files (review findings 3 and 14): one process per state file, the state
and its folder this user's alone, temp files that follow no link, logs mode 600 and redacted."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gpufleet.rollout import private, steps
from gpufleet.rollout import state as st
from tests.unit.test_rollout import FakeScheduler, rollout
from tests.unit.test_rollout_cmd import inventory
from tests.unit.test_rollout_cmd import rollout as rollout_cli

HOLDER = """
import sys
from pathlib import Path
from gpufleet.rollout import private
with private.hold(Path(sys.argv[1])):
    print("held", flush=True)
    sys.stdin.readline()   # until the test lets go
"""


def test_a_second_rollout_on_one_state_file_refuses_naming_the_first(tmp_path: Path) -> None:
    state_file = tmp_path / "rollout" / "state.json"
    first = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(state_file)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    try:
        assert first.stdout is not None and first.stdout.readline() == "held\n"
        second = rollout_cli(
            inventory(tmp_path), "--scheduler", "none", "--no-drain",
            "--state-file", str(state_file),
        )  # fmt: skip
        assert second.returncode == 2, second.stderr
        assert f"a rollout of {state_file} is running (pid {first.pid} on " in second.stderr
        assert not state_file.exists()  # it touched nothing
    finally:
        assert first.stdin is not None
        first.stdin.close()
        first.wait(timeout=60)
    with private.hold(state_file):  # released with its process: the next one takes it
        assert f"pid {os.getpid()} " in private.lock_path(state_file).read_text()


def test_the_lock_is_held_in_process_too(tmp_path: Path) -> None:
    state_file = tmp_path / "state.json"
    refused = pytest.raises(private.PrivateFileError, match=f"pid {os.getpid()}")
    with private.hold(state_file), refused, private.hold(state_file):
        pass


def test_the_state_file_and_its_folder_are_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "rollout" / "state.json"
    st.save(st.RolloutState({"h1": st.HostRecord("h1")}), path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert st.load(path) is not None
    os.chmod(path, 0o620)  # another may write it: mark hosts done, or resuming unvalidated
    with pytest.raises(private.PrivateFileError, match="writable by others"):
        st.load(path)
    os.chmod(path, 0o600)
    os.chmod(path.parent, 0o777)
    with pytest.raises(private.PrivateFileError, match="writable by others"):
        st.load(path)


def test_a_state_file_that_is_a_link_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere.json"
    st.save(st.RolloutState({"h1": st.HostRecord("h1")}), real)
    (tmp_path / "state.json").symlink_to(real)
    with pytest.raises(private.PrivateFileError, match="cannot be read"):
        st.load(tmp_path / "state.json")


def test_temp_files_follow_no_link_planted_at_the_old_fixed_name(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    os.chmod(tmp_path, 0o700)
    (tmp_path / ".rollout.json.tmp").symlink_to(victim)  # the name the old code wrote through
    (tmp_path / ".rollout.prom.tmp").symlink_to(victim)
    rollout(tmp_path, FakeScheduler(limit=1), hosts=("h1",)).run()
    assert victim.read_text() == "keep\n"
    textfile = tmp_path / "rollout.prom"
    assert stat.S_IMODE(textfile.stat().st_mode) == 0o644  # node_exporter's user reads it
    assert 'gpufleet_rollout_hosts{state="done"} 1' in textfile.read_text()
    assert stat.S_IMODE((tmp_path / "rollout.json").stat().st_mode) == 0o600
    left = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("."))
    assert left == [".rollout.json.tmp", ".rollout.prom.tmp"]  # the planted links, untouched


def test_step_logs_are_mode_600_and_hide_logins(tmp_path: Path) -> None:
    log = tmp_path / "gpu-a.deploy.log"
    proxy = "apt_proxy=http://ops:s3cret@proxy.example:3128"
    ok, _why = steps._run([sys.executable, "-c", "print('ran')", "--data", proxy], log)
    assert ok
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    text = log.read_text()
    assert "s3cret" not in text and "ran" in text
