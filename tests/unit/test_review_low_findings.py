"""The stamp review's LOW findings (shared/reviews/security-stamp-review.md), each shown as it
was and as it is now: 7 (witness after its fact), 10 (the payload judged by its marker), 11
(stamps as executable content), 12 (inputs digest gaps), 13 (reboot pending on a stamped run);
16 (Slurm not answering) is in test_validate_slurm."""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import subprocess
from pathlib import Path

import pytest
from pyinfra.context import ctx_host, ctx_state
from pyinfra_testing.util import FakeState, create_host

from gpufleet.drift.plan import REPORTED, PlanRun, build_report
from gpufleet.spec import NodeSpec
from gpufleet.stages.host_probe import HostState, PciDevice
from gpufleet.stages.node import NodePlan
from gpufleet.stages.preflight import announce

A100 = PciDevice("0000:10:00.0", "0302", "20b2")


def _announced(plan: NodePlan, caplog: pytest.LogCaptureFixture, unchanged: str) -> list[str]:
    state = FakeState()
    host = create_host(state, facts={})
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="pyinfra"), ctx_state.use(state), ctx_host.use(host):
        announce(plan, unchanged=unchanged)
    return [record.getMessage() for record in caplog.records]


def _plan(reboot: str, **state: object) -> NodePlan:
    spec = NodeSpec.from_host_data({"reboot": reboot})
    resolution = spec.resolve(
        os_id="ubuntu", os_version="22.04", arch="x86_64", gpu_device_ids=["20b2"]
    )
    probe = HostState(pci=(A100,), **state)  # type: ignore[arg-type]
    return NodePlan(spec=spec, state=probe, resolution=resolution)


def test_13_a_stamped_run_still_says_reboot_pending(caplog: pytest.LogCaptureFixture) -> None:
    """Finding 13: with reboot: never the run that stamped the host warned "reboot pending";
    the runs its stamp spares printed only the plan line. They warn too now."""
    waiting = _plan("never", nouveau_loaded=True)
    said = _announced(waiting, caplog, unchanged="; unchanged (deploy stamp)")
    pending = (
        "reboot pending: nouveau is loaded (reboot policy 'never'; reboot this host yourself, "
        "or run again with reboot: 'auto')"
    )
    assert any(m.endswith(pending) for m in said), said
    stale = _plan("never", loaded_driver="570.195.03", installed_module="580.95.05")
    said = _announced(stale, caplog, unchanged="; unchanged (deploy stamp)")
    assert any("NVIDIA module 570.195.03 is loaded, 580.95.05 is installed" in m for m in said)
    # A full plan says it from reboot_for_driver itself: announce does not say it twice.
    assert not any("reboot pending" in m for m in _announced(waiting, caplog, unchanged=""))
    # Nothing pending, or a policy that reboots (a stamp never holds then): nothing said.
    assert not any("reboot pending" in m for m in _announced(_plan("never"), caplog, "; x"))
    auto = _plan("auto", nouveau_loaded=True)
    assert not any("reboot pending" in m for m in _announced(auto, caplog, "; x"))


def test_13_drift_counts_a_pending_reboot() -> None:
    """Drift called a host whose reboot the policy left pending clean (the noop); it is drift."""
    stderr = (
        "--> Connecting to hosts...\n    [gpu-a] Connected\n"
        "--> Preparing operation files...\n"
        "    [gpu-a] reboot pending: nouveau is loaded (reboot policy 'never'; reboot this host "
        "yourself, or run again with reboot: 'auto')\n"
        "    [gpu-b] Connected\n"
    )
    report = build_report(["gpu-a", "gpu-b"], PlanRun(0, '{"plan": []}', stderr))
    assert report.hosts["gpu-a"].status == "drift"
    assert report.hosts["gpu-a"].operations == [REPORTED]
    assert report.hosts["gpu-b"].status == "clean"


def test_11_a_stamp_folder_without_its_key_is_never_replayed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 11: a stamp's commands are replayed as root on its host before anything else,
    and any stamp in a folder of the right owner and mode was taken. Now each carries an HMAC
    under a key outside the folder: a stamp its owner edited, a folder restored on a machine
    with another key, and a stamp naming pyinfra's server.Command are all ignored."""
    from gpufleet.stamp import store
    from gpufleet.stamp.record import FactRead

    monkeypatch.setenv("GPUFLEET_STAMP_DIR", str(tmp_path / "stamps"))
    monkeypatch.setenv(store.KEY_ENV, str(tmp_path / "key"))
    read = FactRead("pyinfra.facts.server:Which", "command -v nft || true", (0,), "v")
    stamp = store.Stamp("gpu-a", "i", "e", [read], {})
    path = store.save(stamp)
    assert store.load("gpu-a") == stamp
    assert stat.S_IMODE((tmp_path / "key").stat().st_mode) == 0o600
    forged = path.read_text().replace("command -v nft || true", "touch /tmp/pwned")
    path.write_text(forged)  # the folder's owner, or whoever restored the folder, edits it
    assert store.load("gpu-a") is None
    store.save(stamp)
    monkeypatch.setenv(store.KEY_ENV, str(tmp_path / "another-machines-key"))
    assert store.load("gpu-a") is None  # a folder copied from elsewhere: not signed here
    command = FactRead("pyinfra.facts.server:Command", "touch /tmp/pwned", (0,), "v")
    store.save(store.Stamp("gpu-a", "i", "e", [command], {}))
    assert store.load("gpu-a") is None  # signed, but a fact that runs its argument


class _Run:
    """A pyinfra State as the run digest reads it (weak-referenceable, an empty inventory)."""

    inventory: list[object] = []


def test_12_library_versions_and_the_deploy_files_own_imports_are_inputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 12: the run digest covered pyinfra's and Python's versions and gpufleet's files
    only: an upgraded jinja2, or a helper a site's deploy file imports, left stamps holding."""
    import sys
    import types

    from gpufleet.stamp import inputs

    site = tmp_path / "site"
    (site / "jinja9-3.1.4.dist-info").mkdir(parents=True)
    monkeypatch.syspath_prepend(str(site))
    deploy = tmp_path / "deploy" / "site.py"
    deploy.parent.mkdir()
    deploy.write_text("import site_helpers\n")
    helper = deploy.parent / "site_helpers.py"
    helper.write_text("X = 1\n")
    module = types.ModuleType("site_helpers")
    module.__file__ = str(helper)
    monkeypatch.setitem(sys.modules, "site_helpers", module)

    def run_digest() -> str:
        return inputs._run_digest(_Run(), str(deploy), {})

    first = run_digest()
    (site / "jinja9-3.1.4.dist-info").rename(site / "jinja9-3.1.5.dist-info")
    upgraded = run_digest()
    assert upgraded != first
    helper.write_text("X = 2\n")
    assert run_digest() != upgraded


def test_12_a_file_changed_within_a_tick_of_the_last_hashing_is_read_again(
    tmp_path: Path,
) -> None:
    """Finding 12: a file's sha256 was reused whenever its size, times and inode read as
    recorded, without git's racy-entry check; on a coarse change-time clock a same-size
    rewrite in the tick of the last hashing kept the old sha. (Made here by recording a stale
    sha under the file's current times: what such a rewrite leaves.)"""
    import hashlib

    from gpufleet.stamp import inputs, store

    package = tmp_path / "pkg"
    package.mkdir()
    (package / "a.py").write_text("A = 2\n")
    info = (package / "a.py").stat()
    key = [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino]
    stale = hashlib.sha256(b"A = 1\n").hexdigest()
    known = tmp_path / "state" / "sources.json"
    store.write_private(known, {str(package / "a.py"): [*key, stale]})  # written just now
    assert inputs.tree_digest({"pkg": package}, known) == inputs.tree_digest({"pkg": package})


# A gpg that answers one fingerprint and, as it reads the keyring, sees it replaced (what
# another process may do in the window between a fact and its witness, made certain here).
RACING_GPG = """#!/bin/sh
for last; do :; done
echo 'pub:u:255:22:0000000000000000:1:::u:::scESC:'
echo 'fpr:::::::::AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA:'
[ -f "$last.next" ] && mv -f "$last.next" "$last"
exit 0
"""


def test_7_a_change_while_a_witnessed_fact_is_read_is_never_stamped_as_the_norm(
    tmp_path: Path,
) -> None:
    """Finding 7: the witness ran after its fact, so a keyring replaced between the two was
    stamped as it was after (the new witness) with the plan made from before (the old value),
    and the next run held. The witness runs first now: the change shows as a difference."""
    from tests import pyinfra_cli
    from tests.unit.test_stamp_cli import write_inventory

    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "gpg").write_text(RACING_GPG)
    (tools / "gpg").chmod(0o755)
    keyring = tmp_path / "k.gpg"
    keyring.write_bytes(b"key one")
    (tmp_path / "target").mkdir()  # the one operation has nothing to do
    inventory = write_inventory(tmp_path, x_keyring=str(keyring))
    deploy = Path(__file__).with_name("stamp_data") / "deploy_race.py"
    env = {
        "GPUFLEET_STAMP_DIR": str(tmp_path / "stamps"),
        "PATH": f"{tools}:/usr/local/bin:/usr/bin:/bin",
    }

    def dry() -> str:
        done = pyinfra_cli.run("-v", "--dry", inventory, deploy, env=env)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stderr

    (tmp_path / "k.gpg.next").write_bytes(b"key two")  # replaced while the first run reads it
    assert "nothing to plan" not in dry()  # no stamp yet: planned in full, then stamped
    assert keyring.read_bytes() == b"key two"
    assert "nothing to plan" not in dry(), "the stamp paired the old value with the new witness"
    assert "nothing to plan" in dry()  # read in a quiet moment: that stamp holds


def _payload_state(dest: Path) -> dict:
    from gpufleet.operations.probes import PayloadState

    command = PayloadState().command(dest_dir=str(dest), link=str(dest.parent / "current"))
    done = subprocess.run(
        ["sh", "-c", command.get_raw_value()], capture_output=True, text=True, check=True
    )
    return PayloadState().process(done.stdout.splitlines())


def test_10_a_payload_file_changed_after_install_is_installed_again(tmp_path: Path) -> None:
    """Finding 10: the payload root runs daily was judged by its marker alone, so an edited,
    deleted or same-size-rewritten file under it was never noticed. The fact now names the
    first file changed since the marker was written (by its change time) and counts the files,
    and the operation installs the archive again (its install script run here by a real sh)."""
    from gpufleet.operations.payload import make_archive
    from tests.operations.helpers import operation_commands
    from tests.unit.test_security_files import run_on_host

    source = tmp_path / "src" / "validation"
    source.mkdir(parents=True)
    (source / "periodic.py").write_text("print('genuine')\n")
    archive = make_archive(source.parent)
    dest = tmp_path / "payload" / "0.1.0"

    def planned(state: dict) -> list:
        facts = {"probes.PayloadState": {f"dest_dir={dest}, link=": state}}
        return operation_commands("payload.directory", facts, archive=archive, dest_dir=str(dest))[
            0
        ]

    def install() -> None:
        (command,) = planned({"digest": None, "link": None, "changed": None, "files": None})
        assert run_on_host(command, {"TMPDIR": str(tmp_path)}).returncode == 0

    install()
    state = _payload_state(dest)
    assert state == {
        "digest": hashlib.sha256(archive).hexdigest(), "link": None, "changed": None, "files": 1
    }  # fmt: skip
    assert planned(state) == []  # up to date
    (dest / "validation" / "__pycache__").mkdir()  # what Python may write there: not a change
    (dest / "validation" / "__pycache__" / "periodic.cpython-311.pyc").write_bytes(b"\0")
    assert _payload_state(dest) == state
    target = dest / "validation" / "periodic.py"
    times = target.stat()
    target.write_text("print('evil!!')\n")  # the same size, its times put back
    os.utime(target, ns=(times.st_atime_ns, times.st_mtime_ns))
    assert _payload_state(dest)["changed"] == str(target)
    assert len(planned(_payload_state(dest))) == 1, "the archive is installed again"
    install()
    assert target.read_text() == "print('genuine')\n" and _payload_state(dest) == state
    target.unlink()  # a deleted file
    assert _payload_state(dest)["files"] == 0 and len(planned(_payload_state(dest))) == 1
    (dest / "validation" / "conftest.py").write_text("import os\n")  # an added one
    assert _payload_state(dest)["changed"] == str(dest / "validation" / "conftest.py")


def test_9_a_file_gpufleet_wrote_that_another_user_owns_is_given_back_to_root(
    tmp_path: Path,
) -> None:
    """Finding 9: files were checked for content and mode only, so `chown user` of the Python
    wrapper, a unit file or the sources file kept the plan empty, and the merged digest of a
    stamp read the same. The owner is read (by a real stat here), in the merged replay too,
    and files.content gives it back to root."""
    from gpufleet.operations.probes import FileDigest
    from gpufleet.stamp.batch import batch_reads
    from gpufleet.stamp.record import FactRead, fact_name
    from gpufleet.stamp.replay import StampReplay, differences, value_digest
    from tests.operations.helpers import operation_commands

    path = tmp_path / "gpufleet-python"
    path.write_text("#!/bin/sh\n")
    os.chown(path, 0, 0)

    def read_now() -> tuple[FactRead, list[str]]:
        command = FileDigest().command(path=str(path)).get_raw_value()
        done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True)
        lines = done.stdout.splitlines()
        read = FactRead(fact_name(FileDigest), command, (0,), "", arguments={"path": str(path)})
        return read, lines

    read, lines = read_now()
    value = FileDigest().process(lines)
    assert value is not None and value["owner"] == "0:0"
    stamped = FactRead(read.fact, read.command, (0,), value_digest(read, 0, lines)[1],
                       arguments=read.arguments)  # fmt: skip
    os.chown(path, 65534, 65534)  # nobody's now: content and mode the same
    _read, lines = read_now()
    owned = FileDigest().process(lines)
    assert owned is not None and owned["owner"] == "65534:65534"
    # The stamp's merged replay (one stat and one sha256sum for all digests) sees it too.
    batch = batch_reads([stamped, stamped])
    assert len(batch.commands) == 1
    replay = StampReplay()
    command = replay.command(commands=batch.commands).get_raw_value()
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True)
    replies = batch.unpack(replay.process(done.stdout.splitlines()))
    assert differences([stamped, stamped], replies) == [f"{read.fact} reads differently"] * 2
    facts = {"probes.FileDigest": {f"path={path}": owned}}
    text = path.read_text()
    commands, _noop = operation_commands(
        "files.content", facts, path=str(path), text=text, mode="644"
    )
    assert [str(c) for c in commands] == [f"chown root:root {path}"]


def test_15_a_wheel_deleted_or_cut_after_the_fill_is_downloaded_again(tmp_path: Path) -> None:
    """Finding 15: the wheelhouse was taken as filled whenever its stamp held the request's
    key, so a wheel deleted or truncated later was never downloaded again (clients then failed
    their hash check). The stamp lists every wheel's size, and the check (run by a real sh
    here, after the real index script) finds one gone or cut."""
    from gpufleet.cache import wheelhouse

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "numpy-2.1.3-cp311-cp311-manylinux_2_17_x86_64.whl").write_bytes(b"w" * 100)
    (wheels / "six-1.16.0-py2.py3-none-any.whl").write_bytes(b"s" * 10)
    stamp = tmp_path / ".gpufleet-abc"
    index = ["sh", "-c", wheelhouse._INDEX, "x", str(tmp_path), str(stamp), "abc"]
    subprocess.run(index, check=True)

    def filled(key: str = "abc") -> str:
        command = wheelhouse.WheelhouseFilled().command(
            root=str(tmp_path), stamp=str(stamp), key=key
        )
        done = subprocess.run(
            ["sh", "-c", command.get_raw_value()], capture_output=True, text=True, check=True
        )
        return wheelhouse.WheelhouseFilled().process(done.stdout.splitlines())

    assert filled() == "filled"
    assert filled("other") == "stamp of another request"
    (wheels / "six-1.16.0-py2.py3-none-any.whl").write_bytes(b"s" * 3)  # cut
    assert filled() == "wheels/six-1.16.0-py2.py3-none-any.whl missing or cut"
    (wheels / "six-1.16.0-py2.py3-none-any.whl").unlink()
    assert filled() == "wheels/six-1.16.0-py2.py3-none-any.whl missing or cut"
    stamp.unlink()
    assert filled() == "no stamp"
