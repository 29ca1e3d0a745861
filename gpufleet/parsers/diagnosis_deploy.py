"""Failure signatures of provisioning itself: dpkg, apt, disk space, SSH and reboots.

The texts are what apt, dpkg, pip and pyinfra print, as recorded by the sandbox fault-injection
campaign (tests/fixtures/diagnose/SOURCES.md names each). Patterns follow diagnosis.py's rule:
fragments joined by ``.*``, no unbounded repeat inside a fragment.
"""

from __future__ import annotations

# code -> (severity, one-line message, fix)
DEPLOY_CODES: dict[str, tuple[str, str, str]] = {
    "dpkg-interrupted": (
        "error",
        "dpkg was interrupted in the middle of an install (killed, or the host lost power), so "
        "packages are left unpacked but not configured and every apt operation refuses to run.",
        "On the host run `sudo dpkg --configure -a`, then `sudo apt-get -f install`, check that "
        "`dpkg --audit` prints nothing, and re-run the deploy.",
    ),
    "apt-dpkg-lock-held": (
        "error",
        "Another process holds apt's or dpkg's lock: apt-daily or unattended-upgrades (for "
        "minutes after a boot), a second deploy, or an operator's apt.",
        "See who holds it (the pid in the message, or `sudo fuser -v /var/lib/dpkg/lock-frontend "
        "/var/lib/apt/lists/lock`), let it finish or stop it, then re-run; never delete the lock "
        "files.",
    ),
    "deploy-already-running": (
        "error",
        "gpufleet refused this deploy of the host because another gpufleet deploy holds the "
        "host's deploy lock (/run/gpufleet-deploy.lock) right now.",
        "Wait for the other deploy to finish and run again; if it is stuck, end it on the host "
        "(`kill PID`, the pid in the message) first. A lock left by a deploy that died is taken "
        "over by the next run on its own.",
    ),
    "no-space-left": (
        "error",
        "A file system ran out of space (ENOSPC) during the install, so what was being written "
        "is incomplete.",
        "Free space on the file system that holds the path (`df -h` on env_prefix, payload_dir "
        "and /var/cache/apt), then re-run; a half-installed Python environment needs a "
        "reinstall (see python-env-half-installed).",
    ),
    "python-env-half-installed": (
        "error",
        "TensorFlow's distribution is installed but part of its files are missing (an install "
        "cut short, e.g. by a full disk), so pip says 'already satisfied' while imports fail.",
        "Reinstall it in the environment (`pip install --force-reinstall --no-deps "
        "<tensorflow package>==<version>`), or delete the environment and re-run the deploy.",
    ),
    "apt-fetch-404": (
        "error",
        "The repository does not have a file that apt asked for (HTTP 404): the host's package "
        "index is older than the mirror, or the mirror dropped the package.",
        "Run `sudo apt-get update` on the host and re-run; if the 404 stays, the mirror lacks "
        "the file: repair the mirror or pin a version it serves (`gpufleet matrix`).",
    ),
    "apt-version-not-found": (
        "error",
        "The repository's index has no package at the pinned version.",
        "Run `sudo apt-get update` and re-run; if it is still missing, the repository no longer "
        "carries that version: check the pin with `gpufleet matrix` or republish the mirror with "
        "it (apt ignores a mirror restored from an older snapshot until its Release is newer).",
    ),
    "apt-unable-to-locate": (
        "error",
        "apt knows no package of that name: the repository that has it is not configured, or "
        "its index was not downloaded (a failed `apt-get update`).",
        "Run `sudo apt-get update` on the host and read its errors (an unsigned or unreachable "
        "repository comes first, see the other findings), then re-run.",
    ),
    "apt-repo-not-signed": (
        "error",
        "apt could not verify a repository's signature: it is signed by a key the host does "
        "not trust (NO_PUBKEY), or not at all, and apt keeps using its old index.",
        "Compare the key in the message with nvidia_repo_key_fingerprint; if the repository's "
        "key was rotated for real, set nvidia_repo_key_url and nvidia_repo_key_fingerprint to "
        "the new key and re-run; otherwise the mirror is wrong or tampered with: add no key.",
    ),
    "repo-key-fingerprint-mismatch": (
        "error",
        "The downloaded repository key is not the one nvidia_repo_key_fingerprint pins, so "
        "gpufleet refused to trust it.",
        "Check nvidia_repo_key_url and nvidia_repo_key_fingerprint; change the pin only after "
        "confirming the new key's fingerprint from the vendor's own announcement.",
    ),
    "apt-fetch-network-error": (
        "error",
        "apt could not reach the repository or its proxy (link down, proxy stopped, DNS).",
        "Check the host's network and apt_proxy (`apt-get update` on the host shows which URL "
        "fails), then re-run.",
    ),
    "reboot-timeout": (
        "error",
        "The host did not come back within the reboot timeout after the deploy rebooted it.",
        "Look at the host's console or BMC (a kernel, initramfs or driver problem after the "
        "driver install is the usual cause); when it is back, re-run; raise reboot_timeout_s "
        "only if it is merely slow to boot.",
    ),
    "ssh-connection-lost": (
        "error",
        "The SSH connection to the host could not be made or was lost (host down or "
        "rebooting, network cut, sshd stopped).",
        "Check that the host is up and answers (`ssh HOST true`, else its console or BMC); then "
        "re-run; if it went down during apt, run `dpkg --audit` on it first.",
    ),
}

DEPLOY_PATTERNS: dict[str, tuple[str, ...]] = {
    "dpkg-interrupted": (
        r"dpkg was interrupted, you must manually run .dpkg --configure -a",
        r"Sub-process /usr/bin/dpkg exited unexpectedly",
    ),
    "apt-dpkg-lock-held": (
        r"Could not get lock /var/lib/",
        r"dpkg frontend lock was locked by another process",
        r"Unable to acquire the dpkg frontend lock",
        r"Unable to lock directory /var/lib/apt/lists",
    ),
    "deploy-already-running": (r"another gpufleet deploy runs on \S{1,200} \(pid \d{1,10}",),
    "no-space-left": (
        r"No space left on device",
        r"You don't have enough free space in",
    ),
    "python-env-half-installed": (r"No module named 'tensorflow\.",),
    "apt-fetch-404": (
        r"Failed to fetch .* 404\b",
        r"Err:\d{1,5} .* 404\b",
    ),
    "apt-version-not-found": (r"Version '[^']{1,200}' for '[^']{1,200}' was not found",),
    "apt-unable-to-locate": (r"Unable to locate package \S",),
    "apt-repo-not-signed": (
        r"NO_PUBKEY [0-9A-F]{8,40}",
        r"The repository '.*' is not signed",
        r"The following signatures couldn't be verified",
        r"An error occurred during the signature verification",
    ),
    "repo-key-fingerprint-mismatch": (r"has fingerprint .*, expected .*; not trusting it",),
    "apt-fetch-network-error": (
        r"Cannot initiate the connection to",
        r"Temporary failure resolving",
        r"Could not connect to \S{1,200} \(",
    ),
    "reboot-timeout": (
        r"Server did not reboot in time",
        r"did not come back within reboot_timeout_s",
    ),
    "ssh-connection-lost": (
        r"Could not connect \(.*Unable to connect to port",
        r"could not reach ssh://",
        r"connection to \S{1,200} lost during",
        r"SSH session not active",
        r"Error reading SSH protocol banner",
    ),
}
