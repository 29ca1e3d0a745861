"""The host probe's free-disk section: one `df` over every path, one reading per filesystem.

The script runs under this machine's sh with a stand-in `df` first on PATH, which logs its
arguments and answers a different amount free at each statfs, as a filesystem being written
to does (issue 30, D1: two `df` reads of / compared exactly).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from gpufleet.stages.host_probe import HostProbe, parse_probe

S = "##gpufleet-probe:"

# Each argument is a new statfs: 1000 KiB less free than the one before. An argument naming
# "broken" fails, as df does on a stale mount, with the others still printed.
STAND_IN_DF = """\
#!/bin/sh
echo "$*" >>"$DF_LOG"
shift  # -Pk
echo 'Filesystem 1024-blocks Used Available Capacity Mounted on'
status=0
for q in "$@"; do
  case $q in
    *broken*) echo "df: $q: Input/output error" >&2; status=1; continue ;;
  esac
  n=$(($(cat "$DF_COUNT") + 1)); echo "$n" >"$DF_COUNT"
  echo "/dev/vda 1000000 1000 $((900000 - n * 1000)) 1% /"
done
exit $status
"""


def probe(tmp_path: Path, *paths: str) -> tuple[dict[str, tuple[int, str]], list[str]]:
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "df").write_text(STAND_IN_DF)
    (tools / "df").chmod(0o755)
    log, count = tmp_path / "df.log", tmp_path / "df.count"
    count.write_text("0\n")
    command = HostProbe().command(env_dir=str(tmp_path / "env"), disk_paths=paths)
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}"}
    env.update(DF_LOG=str(log), DF_COUNT=str(count))
    done = subprocess.run(
        ["sh", "-c", command.get_raw_value()], capture_output=True, text=True, env=env, check=True
    )
    return parse_probe(done.stdout.splitlines()).free_disk, log.read_text().splitlines()


def test_one_df_reads_every_path_and_one_filesystem_has_one_amount_free(tmp_path: Path) -> None:
    (tmp_path / "opt").mkdir()
    free, calls = probe(tmp_path, "/", str(tmp_path / "opt"), str(tmp_path / "opt/not/yet"))
    # One process over the nearest existing parent of each path, in the paths' order.
    assert calls == [f"-Pk / {tmp_path / 'opt'} {tmp_path / 'opt'}"]
    # The stand-in answered 899000, 898000 and 897000: the first reading holds for all three.
    assert free == {
        "/": (899000, "/"),
        str(tmp_path / "opt"): (899000, "/"),
        str(tmp_path / "opt/not/yet"): (899000, "/"),
    }


def test_a_path_df_cannot_read_costs_no_other_path_its_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    free, calls = probe(tmp_path, "/", str(broken), str(tmp_path))
    # The one df failed, so each path was read on its own: the bad one's line is left out.
    assert calls == [f"-Pk / {broken} {tmp_path}", "-Pk /", f"-Pk {broken}", f"-Pk {tmp_path}"]
    assert free == {"/": (897000, "/"), str(tmp_path): (897000, "/")}  # after 899000, 898000


def test_readings_of_one_filesystem_made_apart_give_its_first() -> None:
    lines = [
        f"{S}disk",
        "/\t/dev/vda 264212084 29881960 76508952 29% /",
        "/var/cache/apt\t/dev/vda 264212084 29881964 76508948 29% /",
        "/opt/gpufleet\t/dev/vdb 1000 10 990 1% /opt",
    ]
    state = parse_probe(lines)
    assert state.free_disk == {
        "/": (76508952, "/"),
        "/var/cache/apt": (76508952, "/"),
        "/opt/gpufleet": (990, "/opt"),
    }
    assert state.free_disk_kib == 76508952
