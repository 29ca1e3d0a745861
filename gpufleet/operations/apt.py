"""Apt repositories with fingerprint-checked keys, installs that update only when needed, holds."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection

from pyinfra import host
from pyinfra.api import HiddenValue, OperationError, QuoteString, StringCommand, operation
from pyinfra.facts.deb import DebPackages

from gpufleet.operations.apt_bounded import (
    UPDATE_FACTOR,
    acquire_options,
    host_timeout,
    retrying_command,
    update_command,
)
from gpufleet.operations.apt_key import FETCH_KEY
from gpufleet.operations.probes import (
    KeyringFingerprints,
    file_digest,
    owner_differs,
    planning_fact,
)
from gpufleet.operations.repo_signature import (
    CHECK_SIGNER,
    VERIFIED_UPDATE,
    RepositorySigner,
    release_base,
)
from gpufleet.operations.stdin import secret_lines

# Seconds apt waits for the dpkg lock before failing: right after boot apt-daily or
# unattended-upgrades commonly hold it for minutes (apt >= 1.9.11; older apt ignores it).
APT_LOCK_TIMEOUT_S = 300

# apt-get without prompts; keep locally changed config files, as an unattended run must.
APT_GET = (
    "DEBIAN_FRONTEND=noninteractive apt-get -y -o Dpkg::Options::=--force-confdef "
    f"-o Dpkg::Options::=--force-confold -o DPkg::Lock::Timeout={APT_LOCK_TIMEOUT_S}"
)

# deb822 fields that make apt accept what is not signed, or signed with weak algorithms
# (sources.list(5)); apt reads field names case-insensitively.
_INSECURE_FIELDS = ("trusted", "allow-insecure", "allow-weak", "allow-downgrade-to-insecure")


def insecure_source_fields(sources_text: str) -> list[str]:
    """The fields of a deb822 ``.sources`` text that weaken apt's signature checks, or a line
    that is no ``Field: value`` at all (which apt may read as something else).

    Example: ``insecure_source_fields("Types: deb\\nTRUSTED:yes\\n") == ["TRUSTED"]``
    """
    found = []
    for line in sources_text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, colon, _ = line.partition(":")
        if not colon or not re.fullmatch(r"[A-Za-z][A-Za-z0-9-]*", name.strip()):
            found.append(line.strip())
        elif name.strip().lower() in _INSECURE_FIELDS:
            found.append(name.strip())
    return found


@operation()
def repository(
    key_url: str | HiddenValue,
    fingerprint: str,
    keyring: str,
    sources: str,
    sources_text: str,
    proxy: str | HiddenValue | None = None,
):
    """
    An apt repository: its signing key as a keyring file (trusted only if the downloaded file
    holds exactly one primary key, with ``fingerprint``; needs ``curl`` and ``gpg``) and a
    deb822 ``.sources`` file; when either changed, ``apt-get update`` for this repository alone
    first (the ``.sources`` is moved into place only if apt accepted it), then for all.

    + key_url: where to download the key (http(s):// or file://); sent on stdin, so it may
      carry credentials (a ``HiddenValue``)
    + fingerprint: 40 hex digits
    + keyring: keyring file, e.g. ``/usr/share/keyrings/gpufleet-nvidia-cuda.gpg``
    + sources: the ``.sources`` file under ``/etc/apt/sources.list.d``
    + sources_text: its content (with ``Signed-By: <keyring>``)
    + proxy: HTTP proxy for the key download (sent on stdin, never in the command line)

    **Example:**

    .. code:: python

        repository(
            key_url="https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/3bf863cc.pub",
            fingerprint="EB693B3035CD5710E231E123A4B469963BF863CC",
            keyring="/usr/share/keyrings/gpufleet-nvidia-cuda.gpg",
            sources="/etc/apt/sources.list.d/gpufleet-nvidia-cuda.sources",
            sources_text="Types: deb\\nURIs: https://...\\nSuites: /\\nSigned-By: ...\\n",
        )
    """
    fingerprint = fingerprint.replace(" ", "").upper()
    if len(fingerprint) != 40:
        raise OperationError(f"repository: fingerprint {fingerprint!r} is not 40 hex digits")
    insecure = insecure_source_fields(sources_text)
    if insecure:
        raise OperationError(
            f"repository: refusing a source that weakens apt's signature check ({insecure[0]!r}:"
            " Trusted, Allow-Insecure, Allow-Weak or a line that is no field); gpufleet never "
            "installs an unauthenticated repository"
        )
    changed = False
    # Anything but exactly the expected key (a missing one, another one, or one more) is
    # fetched again: a keyring apt trusts for this repository holds that key alone.
    if host.get_fact(KeyringFingerprints, path=keyring) != [fingerprint]:
        changed = True
        yield StringCommand(
            "sh -c",
            QuoteString(FETCH_KEY),
            "gpufleet-key",
            QuoteString(fingerprint),
            QuoteString(keyring),
            _stdin=secret_lines(proxy=proxy, url=key_url),
        )
    current = file_digest(host, sources)
    if current is None or current["sha256"] != hashlib.sha256(sources_text.encode()).hexdigest():
        changed = True
    if owner_differs(current):  # another user could repoint the repository (finding 9)
        changed = True
    if changed:
        # The .sources goes into place only after apt verified the repository with this key
        # (a failed run leaves it out, so the next run tries again, and says why it failed).
        yield StringCommand(
            "sh -c",
            QuoteString(VERIFIED_UPDATE),
            "gpufleet-repo",
            QuoteString(fingerprint),
            QuoteString(keyring),
            QuoteString(sources),
            QuoteString(sources_text),
            QuoteString(release_base(sources_text)),
            str(host_timeout(host.data)),
            str(host_timeout(host.data) * UPDATE_FACTOR),
        )
        yield update_command(host_timeout(host.data))
    else:
        host.noop(f"repository {sources} and key {fingerprint} are configured")


@operation()
def repository_signed(uri: str, fingerprint: str, keyring: str):
    """
    The repository as served now is signed by the pinned key. apt keeps a repository's old
    lists, with only a warning, when its Release file is signed by another key; this operation
    checks the signature itself (``gpgv`` against ``keyring``) and fails, naming both keys.

    + uri: where the repository's ``InRelease`` is (``release_base`` of its ``.sources``)
    + fingerprint: the pinned key, 40 hex digits
    + keyring: the keyring ``repository`` installed

    **Example:**

    .. code:: python

        repository_signed(
            uri="https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/",
            fingerprint="EB693B3035CD5710E231E123A4B469963BF863CC",
            keyring="/usr/share/keyrings/gpufleet-nvidia-cuda.gpg",
        )
    """
    fingerprint = fingerprint.replace(" ", "").upper()
    state, signer = host.get_fact(RepositorySigner, uri=uri, keyring=keyring)
    if state in ("nokeyring", "unreachable") or (state, signer) == ("good", fingerprint):
        # No keyring yet: the repository operation installs it and verifies the first update;
        # unreachable: apt's update says so. Neither is a signature by another key.
        host.noop(f"{uri} signed by {fingerprint}" if state == "good" else f"{uri}: {state}")
        return
    yield StringCommand(
        "sh -c",
        QuoteString(CHECK_SIGNER),
        "gpufleet-signer",
        QuoteString(fingerprint),
        QuoteString(keyring),
        QuoteString(uri),
    )


def _missing(packages: list[str], installed: dict[str, list[str]]) -> list[str]:
    missing = []
    for spec in packages:
        name, _, version = spec.partition("=")
        versions = installed.get(name)
        if not versions or (version and version not in versions):
            missing.append(spec)
    return missing


def missing_now(packages: list[str]) -> list[str]:
    """The specs of `packages` this host lacks (name, or name at that version)."""
    return _missing(packages, planning_fact(host, DebPackages))


def _apt_get_install(
    specs: list[str], options: list[str], no_recommends: bool, allow_change: bool, label: str
) -> StringCommand:
    """``apt-get install`` of `specs` under the retrying script (`label` names it in ps),
    each download bounded by the host's ``apt_timeout_s`` and retried once."""
    timeout_s = host_timeout(host.data)
    options = [*acquire_options(timeout_s), *options]
    if no_recommends:
        options.append("--no-install-recommends")
    if allow_change:
        options += ["--allow-change-held-packages", "--allow-downgrades"]
    # "--": a package argument can never be read as an option (apt-get install --version).
    command = StringCommand(
        "env", APT_GET, "install", *options, "--", *[QuoteString(p) for p in specs]
    )
    return retrying_command(timeout_s, label, command)


@operation()
def install(
    packages: list[str],
    update_first: bool = False,
    allow_change: bool = False,
    no_recommends: bool = False,
    hold: bool = False,
):
    """
    Install apt packages (``name`` or ``name=version``) that are missing or at another version.

    + packages: package specs
    + update_first: run ``apt-get update`` first (only when something is to be installed);
      without it, the lists are refreshed (once) only if apt does not know a package/version
    + allow_change: let apt change held packages and downgrade (branch changes, new pins)
    + no_recommends: skip recommended packages
    + hold: ``apt-mark hold`` the packages in the same command, so a later failure never
      leaves them installed but unheld

    **Example:**

    .. code:: python

        install(packages=["libnccl2=2.21.5-1+cuda12.4", "libnccl-dev=2.21.5-1+cuda12.4"])
    """
    missing = _missing(packages, planning_fact(host, DebPackages))
    if not missing:
        host.noop(f"{', '.join(packages)} installed")
        return
    if update_first:
        yield update_command(host_timeout(host.data))
    command = _apt_get_install(missing, [], no_recommends, allow_change, "gpufleet-apt-install")
    if hold:
        names = [QuoteString(p.split("=", 1)[0]) for p in packages]
        command = StringCommand(command, "&& apt-mark hold --", *names)
    yield command


@operation()
def downloaded(
    packages: list[str], first: bool, allow_change: bool = False, no_recommends: bool = False
):
    """
    Download (``apt-get install --download-only``) what `install` would install, on the one
    host named ``first`` (a no-op elsewhere), right before `install`: the others then find
    the files in the fleet cache (apt-cacher-ng sends simultaneous first requests upstream).

    + packages: package specs, as for `install`
    + first: whether this host fetches for the others (gpufleet.stages.fleet_cache)
    + allow_change, no_recommends: as for `install`, so the same files are chosen

    **Example:**

    .. code:: python

        downloaded(packages=["cuda-toolkit-12-5"], first=True)
    """
    missing = _missing(packages, planning_fact(host, DebPackages))
    if not first or not missing:
        host.noop("nothing to fetch ahead" if first else "fetched by the first host of its kind")
        return
    # One request at a time: apt-cacher-ng 3.7.4 answers pipelined requests for files it must
    # fetch 503 "check DlMaxRetries" from an upstream that closes each connection (HTTP/1.0).
    first_options = ["-o", "Acquire::http::Pipeline-Depth=0", "--download-only"]
    yield _apt_get_install(
        missing, first_options, no_recommends, allow_change, "gpufleet-apt-download"
    )


@operation()
def remove(packages: list[str], purge: bool = True):
    """
    Remove (purge) installed apt packages, held or not.

    + packages: package names
    + purge: also remove their configuration files

    **Example:**

    .. code:: python

        remove(packages=["cuda-drivers-570", "nvidia-fabricmanager-570"])
    """
    installed = planning_fact(host, DebPackages)
    present = [name for name in packages if name in installed]
    if not present:
        host.noop(f"{', '.join(packages)} not installed")
        return
    yield StringCommand(
        APT_GET,
        "purge" if purge else "remove",
        "--allow-change-held-packages",
        "--",
        *[QuoteString(name) for name in present],
    )


@operation()
def held(package: str, on_hold: Collection[str], hold: bool = True):
    """
    Hold one package (``apt-mark hold``) so ``apt upgrade`` leaves it, or release it. One
    operation per package, named after it, so a plan says which one is no longer held.

    + package: package name (a ``name=version`` spec is accepted; the version is ignored)
    + on_hold: the packages on hold now, read once per host before planning (gpufleet's
      ``HostProbe``: ``HostState.held``), so a dozen of these cost no round trip of their own
    + hold: ``False`` releases the hold

    **Example:**

    .. code:: python

        held(name="libnccl2 held", package="libnccl2", on_hold=plan.state.held)
    """
    name = package.split("=", 1)[0]
    if not name:
        raise OperationError(f"held: {package!r} names no package")
    if (name in on_hold) == hold:
        host.noop(f"{name} already {'held' if hold else 'not held'}")
        return
    yield StringCommand("apt-mark", "hold" if hold else "unhold", "--", QuoteString(name))


def upstream_version(version: str) -> str:
    """Version without epoch and revision: ``"1:580.105.08-0ubuntu1"`` -> ``"580.105.08"``."""
    return version.split(":", 1)[-1].rsplit("-", 1)[0]


# Picks the repository's version of $1 whose upstream part is $2, and installs exactly that.
_INSTALL_UPSTREAM = r"""set -e
v=$(apt-cache madison "$1" | awk -v u="$2" '$3 ~ ("^" u "-") {print $3; exit}')
if [ -z "$v" ]; then
  echo "gpufleet: the repository has no $1 at version $2 (the installed $3). Fix: mirror" \
    "that version, or move $3 to a version the repository has $1 for." >&2
  exit 1
fi
DEBIAN_FRONTEND=noninteractive apt-get -y --allow-downgrades --allow-change-held-packages \
  -o DPkg::Lock::Timeout="$4" -o Acquire::http::Timeout="$5" -o Acquire::https::Timeout="$5" \
  -o Acquire::Retries=1 install -- "$1=$v"
"""


@operation()
def same_version_as(package: str, reference: str):
    """
    Keep ``package`` at exactly the upstream version of the installed ``reference`` package
    (Fabric Manager must match the driver to the last digit, or it refuses to start).

    + package: e.g. ``"nvidia-fabricmanager-580"``
    + reference: the installed package whose version it follows, e.g. ``"nvidia-open"``

    **Example:**

    .. code:: python

        same_version_as(package="nvidia-fabricmanager-580", reference="nvidia-open")
    """
    installed = planning_fact(host, DebPackages)
    if reference not in installed:
        host.noop(f"{reference} is not installed (yet): nothing to follow")
        return
    wanted = upstream_version(sorted(installed[reference])[-1])
    if any(upstream_version(v) == wanted for v in installed.get(package, [])):
        host.noop(f"{package} is at {wanted}, as {reference}")
        return
    yield StringCommand(
        "sh -c",
        QuoteString(_INSTALL_UPSTREAM),
        "gpufleet-same-version",
        QuoteString(package),
        QuoteString(wanted),
        QuoteString(reference),
        str(APT_LOCK_TIMEOUT_S),
        str(host_timeout(host.data)),
    )
