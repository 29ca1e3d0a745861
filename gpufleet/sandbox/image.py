"""The sandbox's base image: a debootstrapped root file system, built once and cached."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpufleet.sandbox.procs import exclusive
from gpufleet.sandbox.state import APT_PROXY_PORT, CACHE_DIR, GATEWAY, SandboxError

# What a host needs to boot with systemd, answer SSH and be provisioned like a server: systemd
# and dbus for init, sshd, iproute2 for its address, python3/sudo/gnupg/ca-certificates that any
# server image has and the deploy expects, pciutils (lspci) and kmod (modinfo) for preflight,
# nftables for the cluster tier's worker-port table (gpufleet.cluster.firewall).
INCLUDE = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "openssh-server",
    "iproute2",
    "python3",
    "sudo",
    "ca-certificates",
    "gnupg",
    "pciutils",
    "kmod",
    "curl",
    "nftables",
)

MARKER = ".gpufleet-sandbox-image.json"
# Bumped whenever the image is built differently, so cached images of older builds are rebuilt.
IMAGE_FORMAT = 4
Log = Callable[[str], None]

# Debian machines carry no Ubuntu keyring; Ubuntu's own keyring package is fetched from Ubuntu's
# archive and trusted only if its sha256 is this one (ubuntu-keyring 2021.03.26, as shipped in
# jammy) and it holds the 2018 archive signing key that signs jammy's Release files.
UBUNTU_KEYRING_DEB = (
    "http://archive.ubuntu.com/ubuntu/pool/main/u/ubuntu-keyring/ubuntu-keyring_2021.03.26_all.deb"
)
UBUNTU_KEYRING_SHA256 = "0d0e7ed6b112f5d03eabf3c7eb01ebdacf9c57714b279e90495cfc58c8c4520f"
UBUNTU_ARCHIVE_KEY = "F6ECB3762474EDA9D21B7022871920D1991BC93C"


@dataclass(frozen=True)
class ImageSpec:
    """One base image the sandbox can build."""

    name: str
    os_id: str
    os_version: str
    suite: str
    mirror: str
    components: tuple[str, ...]
    # extra `deb` lines' suites on the same mirror, plus a security archive (url, suite)
    extra_suites: tuple[str, ...]
    security: tuple[str, str]
    python_version: str  # Python of the interpreter the sandbox's venvs use (see next)
    # The archive's interpreter the sandbox's venvs are built on: python3 unless it is older
    # than the TensorFlow the matrix allows (focal's python3 is 3.8; focal-updates' universe
    # has python3.9).
    python_interpreter: str = "python3"


IMAGES: dict[str, ImageSpec] = {
    "ubuntu22.04": ImageSpec(
        "ubuntu22.04",
        "ubuntu",
        "22.04",
        "jammy",
        "http://archive.ubuntu.com/ubuntu",
        ("main", "restricted", "universe"),
        ("jammy-updates",),
        ("http://archive.ubuntu.com/ubuntu", "jammy-security"),
        "3.10",
    ),
    "ubuntu20.04": ImageSpec(
        "ubuntu20.04",
        "ubuntu",
        "20.04",
        "focal",
        "http://archive.ubuntu.com/ubuntu",
        ("main", "restricted", "universe"),
        ("focal-updates",),
        ("http://archive.ubuntu.com/ubuntu", "focal-security"),
        "3.9",
        "python3.9",
    ),
    "ubuntu24.04": ImageSpec(
        "ubuntu24.04",
        "ubuntu",
        "24.04",
        "noble",
        "http://archive.ubuntu.com/ubuntu",
        ("main", "restricted", "universe"),
        ("noble-updates",),
        ("http://archive.ubuntu.com/ubuntu", "noble-security"),
        "3.12",
    ),
    "debian12": ImageSpec(
        "debian12",
        "debian",
        "12",
        "bookworm",
        "http://deb.debian.org/debian",
        ("main",),
        ("bookworm-updates",),
        ("http://deb.debian.org/debian-security", "bookworm-security"),
        "3.11",
    ),
}
DEFAULT_IMAGE = "ubuntu22.04"
FALLBACK_IMAGE = "debian12"


def image_spec(name: str) -> ImageSpec:
    try:
        return IMAGES[name]
    except KeyError:
        raise SandboxError(
            f"unknown image {name!r}; choose one of: {', '.join(sorted(IMAGES))}"
        ) from None


def mirror_answers(spec: ImageSpec, timeout: float = 5.0) -> bool:
    """True when the image's archive serves its suite's Release file within `timeout` seconds."""
    url = f"{spec.mirror}/dists/{spec.suite}/Release"
    request = urllib.request.Request(url, method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def choose_image(requested: str | None, log: Log = print) -> ImageSpec:
    """The image asked for, else Ubuntu 22.04 if cached or its archive answers, else Debian 12."""
    if requested is not None:
        return image_spec(requested)
    default = IMAGES[DEFAULT_IMAGE]
    if image_is_current(image_dir(default)) or mirror_answers(default):
        return default
    log(
        f"NOTE: Ubuntu's archive ({default.mirror}) does not answer; the sandbox falls back to "
        f"Debian 12 (bookworm). Pass --image {DEFAULT_IMAGE} to insist on Ubuntu."
    )
    return IMAGES[FALLBACK_IMAGE]


def images_dir(cache: Path = CACHE_DIR) -> Path:
    return cache / "images"


def image_dir(spec: ImageSpec, cache: Path = CACHE_DIR) -> Path:
    return images_dir(cache) / spec.name


# debootstrap's per-suite scripts; every Ubuntu suite's is a link to "gutsy".
DEBOOTSTRAP_SCRIPTS = Path("/usr/share/debootstrap/scripts")


def debootstrap_command(
    spec: ImageSpec, target: Path, keyring: Path, scripts: Path = DEBOOTSTRAP_SCRIPTS
) -> list[str]:
    """The debootstrap command line that builds `spec` into `target`.

    A debootstrap older than the suite (Debian 12's 1.0.128 has no "noble") is given Ubuntu's
    common script, which newer debootstraps link every Ubuntu suite to.
    """
    command = [
        "debootstrap",
        "--variant=minbase",
        f"--include={','.join(INCLUDE)}",
        f"--components={','.join(spec.components)}",
        f"--keyring={keyring}",
        spec.suite,
        str(target),
        spec.mirror,
    ]
    if spec.os_id == "ubuntu" and not (scripts / spec.suite).exists():
        command.append(str(scripts / "gutsy"))
    return command


def sources_list(spec: ImageSpec) -> str:
    """/etc/apt/sources.list for the image: release, updates and security pockets."""
    components = " ".join(spec.components)
    lines = [
        f"deb {spec.mirror} {suite} {components}" for suite in (spec.suite, *spec.extra_suites)
    ]
    security_url, security_suite = spec.security
    lines.append(f"deb {security_url} {security_suite} {components}")
    return "\n".join(lines) + "\n"


def apt_proxy_conf(gateway: str = GATEWAY, port: int = APT_PROXY_PORT) -> str:
    """apt.conf.d snippet: every http fetch goes through the gateway's apt proxy, except the
    gateway itself (the stand-in repository), which apt reaches directly."""
    return (
        "// gpufleet sandbox: hosts have no route out; the gateway's apt-cacher-ng fetches.\n"
        f'Acquire::http::Proxy "http://{gateway}:{port}";\n'
        f'Acquire::http::Proxy::{gateway} "DIRECT";\n'
        'Acquire::https::Proxy "DIRECT";\n'
        'Acquire::Retries "3";\n'
    )


def ensure_keyring(spec: ImageSpec, cache: Path = CACHE_DIR) -> Path:
    """The keyring that debootstrap checks the archive's Release signature with."""
    if spec.os_id == "debian":
        keyring = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
        if not keyring.is_file():
            raise SandboxError(f"{keyring} missing: apt-get install debian-archive-keyring")
        return keyring
    keyring = cache / "keyrings" / "ubuntu-archive-keyring.gpg"
    if keyring.is_file():
        return keyring
    with urllib.request.urlopen(UBUNTU_KEYRING_DEB, timeout=30) as response:
        payload = response.read()
    digest = hashlib.sha256(payload).hexdigest()
    if digest != UBUNTU_KEYRING_SHA256:
        raise SandboxError(
            f"{UBUNTU_KEYRING_DEB} has sha256 {digest}, expected {UBUNTU_KEYRING_SHA256}; "
            "refusing to trust it (use --image debian12 meanwhile)"
        )
    keyring.parent.mkdir(parents=True, exist_ok=True)
    data = _deb_member(payload, "./usr/share/keyrings/ubuntu-archive-keyring.gpg")
    tmp = keyring.with_suffix(".tmp")
    tmp.write_bytes(data)
    shown = subprocess.run(
        ["gpg", "--show-keys", "--with-colons", str(tmp)], capture_output=True, text=True
    ).stdout
    if f"fpr:::::::::{UBUNTU_ARCHIVE_KEY}:" not in shown:
        raise SandboxError(f"Ubuntu keyring lacks the archive key {UBUNTU_ARCHIVE_KEY}")
    tmp.replace(keyring)
    return keyring


def _deb_member(deb: bytes, member: str) -> bytes:
    """One file out of a .deb, read with dpkg-deb (data.tar's compression varies)."""
    proc = subprocess.run(
        ["dpkg-deb", "--fsys-tarfile", "/dev/stdin"], input=deb, capture_output=True
    )
    if proc.returncode != 0:
        raise SandboxError(f"dpkg-deb could not read the keyring package: {proc.stderr.decode()}")
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
        extracted = tar.extractfile(member)
        if extracted is None:
            raise SandboxError(f"{member} missing from the keyring package")
        return extracted.read()


def upgrade_command(root: Path) -> list[str]:
    """Bring a fresh debootstrap up to date with its updates and security pockets, run in a
    throwaway systemd-nspawn container (it sets up /proc and /dev; this machine's network)."""
    script = (
        "apt-get update -q && apt-get -y -q -o Dpkg::Options::=--force-confold dist-upgrade"
        " && apt-get clean && rm -rf /var/lib/apt/lists/*"
    )
    return [
        "systemd-nspawn",
        f"--directory={root}",
        "--register=no",
        "--keep-unit",
        "--quiet",
        "--timezone=off",
        "--resolv-conf=replace-host",
        "--setenv=DEBIAN_FRONTEND=noninteractive",
        "/bin/sh",
        "-c",
        script,
    ]


def configure_image(root: Path, spec: ImageSpec) -> None:
    """Turn a fresh debootstrap into an up-to-date base that every host shares."""
    (root / "etc/apt/sources.list").write_text(sources_list(spec))
    # debootstrap installs the release pocket only; servers run with updates applied, and a
    # host whose systemd lags its updates cannot install anything that pulls a newer one.
    resolv_conf = root / "etc/resolv.conf"
    resolv_target = os.readlink(resolv_conf) if resolv_conf.is_symlink() else None
    proc = subprocess.run(upgrade_command(root), capture_output=True, text=True)
    if resolv_target is not None:  # the upgrade borrowed this machine's resolver; give it back
        resolv_conf.unlink(missing_ok=True)
        resolv_conf.symlink_to(resolv_target)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
        raise SandboxError(f"updating the {spec.name} image failed:\n{tail}")
    (root / "etc/apt/apt.conf.d/01gpufleet-sandbox-proxy").write_text(apt_proxy_conf())
    (root / "etc/dpkg/dpkg.cfg.d/gpufleet-sandbox").write_text(DPKG_SANDBOX_CFG)
    (root / "etc/apt/apt.conf.d/02gpufleet-sandbox-languages").write_text(APT_NO_LANGUAGES)
    # Per-host identity lives in each host's overlay, never in the shared base.
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    (root / "etc/machine-id").write_text("")
    (root / "etc/hostname").unlink(missing_ok=True)
    # Containers have no consoles to log in on, and no hardware clock to sync.
    for unit in ("getty@tty1.service", "console-getty.service", "systemd-timesyncd.service"):
        (root / "etc/systemd/system" / unit).unlink(missing_ok=True)
        (root / "etc/systemd/system" / unit).symlink_to("/dev/null")


# Throughput of the sandbox only (test hosts are thrown away, real hosts never get these): dpkg
# skips its fsync per file (a first deploy unpacks tens of thousands of files), and leaves out
# documentation, manuals and translations, which nothing the deploy checks reads. The deploy's
# own commands are unchanged.
DPKG_SANDBOX_CFG = """\
# gpufleet sandbox: throwaway test hosts
force-unsafe-io
path-exclude=/usr/share/doc/*
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
"""
APT_NO_LANGUAGES = 'Acquire::Languages "none";\n'


def image_is_current(target: Path) -> bool:
    """True when `target` holds a complete image built the way this version builds them."""
    try:
        marker = json.loads((target / MARKER).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return False
    return bool(marker.get("format") == IMAGE_FORMAT)


def ensure_image(spec: ImageSpec, cache: Path = CACHE_DIR, log: Log = print) -> Path:
    """Return the cached base image for `spec`, building it first when there is none.

    The build goes to a temporary directory that is renamed into place when complete, so an
    interrupted build never leaves a half image behind. Example::

        ensure_image(IMAGES["ubuntu22.04"])  # /var/cache/gpufleet-sandbox/images/ubuntu22.04
    """
    target = image_dir(spec, cache)
    if image_is_current(target):
        return target
    with exclusive(images_dir(cache) / ".lock", "image build", log):
        if image_is_current(target):  # another process built it while we waited
            return target
        return _build_image(spec, target, cache, log)


def _build_image(spec: ImageSpec, target: Path, cache: Path, log: Log) -> Path:
    if shutil.which("debootstrap") is None:
        raise SandboxError("debootstrap not found: apt-get install -y debootstrap")
    if not mirror_answers(spec):
        raise SandboxError(f"{spec.mirror} does not answer; cannot build the {spec.name} image")
    images_dir(cache).mkdir(parents=True, exist_ok=True)
    for stale in images_dir(cache).glob(f".{spec.name}.building-*"):
        shutil.rmtree(stale, ignore_errors=True)
    shutil.rmtree(target, ignore_errors=True)  # incomplete or outdated
    tmp = images_dir(cache) / f".{spec.name}.building-{os.getpid()}"
    keyring = ensure_keyring(spec, cache)
    log(f"building the {spec.name} base image with debootstrap (once; cached in {target}) ...")
    started = time.monotonic()
    try:
        proc = subprocess.run(
            debootstrap_command(spec, tmp, keyring), capture_output=True, text=True
        )
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
            raise SandboxError(f"debootstrap of {spec.name} failed:\n{tail}")
        configure_image(tmp, spec)
        elapsed = time.monotonic() - started
        marker = {
            "image": spec.name,
            "format": IMAGE_FORMAT,
            "suite": spec.suite,
            "include": INCLUDE,
            "build_s": round(elapsed, 1),
        }
        (tmp / MARKER).write_text(json.dumps(marker) + "\n")
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log(f"base image {spec.name} built in {elapsed:.0f} s")
    return target


if __name__ == "__main__":  # manual use: python -m gpufleet.sandbox.image [IMAGE]
    chosen = choose_image(sys.argv[1] if len(sys.argv) > 1 else None)
    print(ensure_image(chosen))
