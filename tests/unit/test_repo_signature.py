"""Issue 11 items 4 and 5: a repository signed by another key than the pinned one.

Real gpg, gpgv, curl (file://), apt-get and apt-helper: apt confined by APT_CONFIG to a Dir
tree under tmp_path, with a flat ``file:`` repository signed by key A (pinned) or B (rotated).
The commands run are the ones the operations yield, as the host's root shell runs them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from email.utils import formatdate
from pathlib import Path

import pytest
from pyinfra.api import StringCommand

from gpufleet.drift.plan import build_report, run_plan
from gpufleet.drift.sentences import sentence_for
from gpufleet.operations.probes import FileDigest, KeyringFingerprints
from gpufleet.operations.repo_signature import RepositorySigner, release_base
from gpufleet.stages.nvidia_repo import SIGNED_OPERATION
from tests.operations.helpers import operation_commands
from tests.unit.fake_fleet import FakeGpuHost, root, write_inventory

pytestmark = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("gpg", "gpgv", "curl", "apt-get"))
    or not Path("/usr/lib/apt/apt-helper").exists(),
    reason="needs gpg, gpgv, curl and apt",
)


def gpg(home: Path, *args: str) -> bytes:
    return subprocess.run(
        ["gpg", "--batch", "--homedir", str(home), *args], check=True, capture_output=True
    ).stdout


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> dict:
    """Key A (what nvidia_repo_key_fingerprint pins) and key B (the rotated one)."""
    base = tmp_path_factory.mktemp("k")
    home = base / "g"
    home.mkdir(mode=0o700)
    fpr = {}
    for name in ("A", "B"):
        uid = f"{name} repo key (gpufleet test) <{name.lower()}@example>"
        gpg(home, "--passphrase", "", "--quick-gen-key", uid, "ed25519", "sign", "never")
        listing = gpg(home, "--with-colons", "--list-keys", uid).decode()
        fpr[name] = next(line.split(":")[9] for line in listing.splitlines() if line[:4] == "fpr:")
        (base / f"{name}.asc").write_bytes(gpg(home, "--armor", "--export", fpr[name]))
    yield {"home": home, "fpr": fpr, "dir": base}
    subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], check=False)


class Host:
    """A host's apt (Dir under ``root``) and a flat repository in ``repo``."""

    def __init__(self, root: Path, keys: dict) -> None:
        self.root, self.keys, self.repo = root, keys, root / "repo"
        for sub in ("etc/apt/sources.list.d", "etc/apt/apt.conf.d", "etc/apt/preferences.d"):
            (root / sub).mkdir(parents=True)
        for sub in ("var/lib/apt/lists/partial", "var/cache/apt/archives/partial", "var/lib/dpkg"):
            (root / sub).mkdir(parents=True)
        (root / "var/lib/dpkg/status").write_text("")
        (root / "apt.conf").write_text(f'Dir "{root}/";\nAPT::Sandbox::User "root";\n')
        self.repo.mkdir()
        self.keyring = root / "keyring.gpg"
        self.sources = root / "etc/apt/sources.list.d/gpufleet-nvidia-cuda.sources"
        uri = self.repo.as_uri() + "/"
        self.uri = uri
        self.sources_text = f"Types: deb\nURIs: {uri}\nSuites: /\nSigned-By: {self.keyring}\n"

    def publish(self, signer: str, version: str = "1.0") -> None:
        """Packages and Release, clear-signed (InRelease) by key ``signer``."""
        (self.repo / "Packages").write_text(
            f"Package: gfrepotest\nVersion: {version}\nArchitecture: all\n"
            "Filename: ./gfrepotest_all.deb\nSize: 1\nDescription: stand-in\n\n"
        )
        packages = (self.repo / "Packages").read_bytes()
        (self.repo / "Release").write_text(
            f"Origin: gfrepotest\nLabel: gfrepotest {version}\n"
            f"Date: {formatdate(usegmt=True)}\nSHA256:\n"
            f" {hashlib.sha256(packages).hexdigest()} {len(packages)} Packages\n"
        )
        (self.repo / "InRelease").unlink(missing_ok=True)
        fpr = self.keys["fpr"][signer]
        gpg(self.keys["home"], "--local-user", fpr, "--yes", "--clearsign", "--output",
            str(self.repo / "InRelease"), str(self.repo / "Release"))  # fmt: skip

    def env(self) -> dict[str, str]:
        return {**os.environ, "APT_CONFIG": str(self.root / "apt.conf")}

    def run(self, command: StringCommand | str) -> subprocess.CompletedProcess[str]:
        stdin, raw = None, command
        if isinstance(command, StringCommand):
            stdin, raw = command.connector_arguments.get("_stdin"), command.get_raw_value()
        return subprocess.run(
            raw, shell=True, input=stdin, capture_output=True, text=True, env=self.env()
        )

    def fact(self, fact_cls, **kwargs):
        fact = fact_cls()
        out = self.run(StringCommand(fact.command(**kwargs)))
        return fact.process(out.stdout.splitlines())

    def facts(self) -> dict:
        return {
            "probes.KeyringFingerprints": {
                f"path={self.keyring}": self.fact(KeyringFingerprints, path=str(self.keyring))
            },
            "probes.FileDigest": {
                f"path={self.sources}": self.fact(FileDigest, path=str(self.sources))
            },
        }

    def deploy_repository(self, stop_before: str = "") -> subprocess.CompletedProcess[str]:
        """The ``repository`` operation, planned on this host's facts, then run (up to the
        command ``stop_before``)."""
        commands, _ = operation_commands(
            "apt.repository",
            self.facts(),
            key_url=(self.keys["dir"] / "A.asc").as_uri(),
            fingerprint=self.keys["fpr"]["A"],
            keyring=str(self.keyring),
            sources=str(self.sources),
            sources_text=self.sources_text,
        )
        result = subprocess.CompletedProcess("", 0, "", "")
        for command in commands:
            if stop_before and stop_before in str(command):
                break
            result = self.run(command)
            if result.returncode:
                break
        return result

    def signed_plan(self) -> tuple[list[StringCommand], str | None]:
        uri, keyring = release_base(self.sources_text), str(self.keyring)
        return operation_commands(
            "apt.repository_signed",
            {
                "repo_signature.RepositorySigner": {
                    f"keyring={keyring}, uri={uri}": self.fact(
                        RepositorySigner, uri=uri, keyring=keyring
                    )
                }
            },
            uri=uri,
            fingerprint=self.keys["fpr"]["A"],
            keyring=keyring,
        )

    def candidate(self) -> str:
        policy = subprocess.run(
            ["apt-cache", "policy", "gfrepotest"], capture_output=True, text=True, env=self.env()
        ).stdout
        return next((ln.split()[-1] for ln in policy.splitlines() if "Candidate" in ln), "")


@pytest.fixture
def node(tmp_path, keys) -> Host:
    return Host(tmp_path, keys)


def assert_names_both_keys(stderr: str, keys: dict) -> None:
    assert f"signed by key {keys['fpr']['B']}" in stderr, stderr
    assert f"nvidia_repo_key_fingerprint pins {keys['fpr']['A']}" in stderr, stderr
    assert "set nvidia_repo_key_url and nvidia_repo_key_fingerprint to the new key" in stderr


def test_item4_rotated_repo_on_a_fresh_host_leaves_no_sources_and_names_both_keys(node, keys):
    node.publish("B")
    first = node.deploy_repository()
    assert first.returncode != 0
    assert_names_both_keys(first.stderr, keys)
    assert not node.sources.exists()  # not recorded as configured
    assert not list(node.sources.parent.iterdir())  # no staged copy left behind either
    # The second run does the repository again (and says the same), instead of "No changes".
    second = node.deploy_repository()
    assert second.returncode != 0
    assert_names_both_keys(second.stderr, keys)


def test_item4_sources_goes_into_place_after_the_verified_update(node, keys):
    node.publish("A")
    result = node.deploy_repository()
    assert result.returncode == 0, result.stderr
    assert node.sources.read_text() == node.sources_text
    assert oct(node.sources.stat().st_mode & 0o777) == "0o644"
    assert node.candidate() == "1.0"
    # Once rotated back to the pinned key, a re-run has nothing to do.
    commands, noop = operation_commands(
        "apt.repository",
        node.facts(),
        key_url="file:///unused",
        fingerprint=keys["fpr"]["A"],
        keyring=str(node.keyring),
        sources=str(node.sources),
        sources_text=node.sources_text,
    )
    assert commands == [] and noop


def test_item4_the_staged_update_keeps_the_other_repositories_lists(node, keys):
    lists = node.root / "var/lib/apt/lists"
    other = lists / "archive.ubuntu.com_ubuntu_dists_jammy_InRelease"
    other.write_text("kept\n")
    node.publish("A")
    # The staged update alone: the plain `apt-get update` after it refreshes (and cleans) the
    # lists of every configured source, as before; here the other repository is not configured.
    assert node.deploy_repository(stop_before="gpufleet-apt-update").returncode == 0
    assert node.sources.exists()
    assert other.read_text() == "kept\n"


def test_item5_provisioned_host_rotated_repo_is_reported_by_the_plan_and_the_deploy(node, keys):
    node.publish("A")
    assert node.deploy_repository().returncode == 0
    commands, noop = node.signed_plan()
    assert commands == [] and noop == f"{node.uri} signed by {keys['fpr']['A']}"
    # Re-signed by B: apt itself says only W: and exits 0 (fault 7d).
    node.publish("B", version="2.0")
    plain = subprocess.run(["apt-get", "update"], capture_output=True, text=True, env=node.env())
    assert plain.returncode == 0 and "W: An error occurred during the signature" in plain.stderr
    # gpufleet: the plan has a change (so --dry and drift show it), and running it fails, naming
    # both keys and the fix.
    commands, noop = node.signed_plan()
    assert noop is None and len(commands) == 1
    result = node.run(commands[0])
    assert result.returncode == 1
    assert_names_both_keys(result.stderr, keys)
    # Restored: no change again.
    node.publish("A", version="3.0")
    assert node.signed_plan()[0] == []


def test_item5_signer_fact_reads_release_gpg_when_there_is_no_inrelease(node, keys):
    node.publish("B")
    (node.repo / "InRelease").unlink()
    release = node.repo / "Release"
    gpg(keys["home"], "--local-user", keys["fpr"]["B"], "--armor", "--detach-sign",
        "--output", str(node.repo / "Release.gpg"), str(release))  # fmt: skip
    node.keyring.write_bytes(gpg(keys["home"], "--export", keys["fpr"]["A"]))
    assert node.fact(RepositorySigner, uri=node.uri, keyring=str(node.keyring)) == (
        "other",
        keys["fpr"]["B"],
    )


def test_item5_signer_fact_without_keyring_or_repository(node, keys):
    assert node.fact(RepositorySigner, uri=node.uri, keyring=str(node.keyring)) == ("nokeyring", "")
    node.keyring.write_bytes(gpg(keys["home"], "--export", keys["fpr"]["A"]))
    assert node.fact(RepositorySigner, uri=node.uri, keyring=str(node.keyring)) == (
        "unreachable",
        "",
    )


def test_item5_drift_sentence_for_the_signature_operation():
    sentence = sentence_for(f"gpufleet nvidia_repo | {SIGNED_OPERATION}")
    assert "signed by another key than nvidia_repo_key_fingerprint" in sentence


def test_item5_apt_2_0_which_ignores_error_mode_still_fails_on_its_warning(node, keys, tmp_path):
    """Ubuntu 20.04's apt 2.0 has no ``--error-on=any`` and ignores the Error-Mode setting: a
    re-signed repository whose old lists are kept is only a ``W:`` and exit 0 there. Stand-in
    for that apt: the real apt-get, the setting renamed to one no apt knows."""
    node.publish("A")
    assert node.deploy_repository(stop_before="gpufleet-apt-update").returncode == 0
    node.publish("B", version="2.0")
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "apt-get").write_text(
        "#!/bin/sh\n"
        # What apt 2.0 makes of the setting: a name it does not know, so no effect.
        'for a; do shift; [ "$a" = APT::Update::Error-Mode=any ] && a=X::Unknown=any\n'
        'set -- "$@" "$a"; done\n'
        'exec /usr/bin/apt-get "$@"\n'
    )
    (shim / "apt-get").chmod(0o755)
    node.sources_text += "# changed, so the repository operation updates again\n"
    env = node.env
    node.env = lambda: {**env(), "PATH": f"{shim}:{os.environ['PATH']}"}  # type: ignore[method-assign]
    result = node.deploy_repository(stop_before="gpufleet-apt-update")
    assert result.returncode == 1
    assert "W: " in result.stderr and "E: " not in result.stderr  # apt itself did not fail
    assert_names_both_keys(result.stderr, keys)
    assert "changed, so" not in node.sources.read_text()  # the old, verified one stays


def test_item5_drift_reports_a_provisioned_host_whose_repository_was_re_signed(tmp_path):
    """The real deploy planned (pyinfra --dry, as drift runs it) on @fake provisioned hosts:
    the host whose repository is signed by another key drifts with the sentence, the other
    stays clean."""
    other = "43BB4D52AF014C402851B2A098B07AB061C53961"
    hosts = {
        "clean": FakeGpuHost(provisioned=True),
        "resigned": FakeGpuHost(provisioned=True, repo_signer=f"other {other}"),
    }
    inventory = write_inventory(tmp_path / "inventory.py", hosts)
    run = run_plan(str(inventory), str(root() / "deploy" / "gpu_node.py"), timeout=300)
    report = build_report([f"@fake/{name}" for name in hosts], run)
    assert report.hosts["@fake/clean"].changes == [], run.stderr[-3000:]
    assert report.hosts["@fake/resigned"].changes == [
        sentence_for(f"gpufleet nvidia_repo | {SIGNED_OPERATION}")
    ]
