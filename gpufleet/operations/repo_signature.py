"""Who signed an apt repository's Release file, checked with gpgv against gpufleet's keyring."""

from __future__ import annotations

from pyinfra.api import FactBase, QuoteString, StringCommand
from typing_extensions import override

from gpufleet.operations.apt_bounded import FUNCTIONS
from gpufleet.operations.stdin import PRIVATE_TMP

# signer URI KEYRING DIR: prints one line, "good FPR" (a valid signature by the keyring's key,
# FPR its primary key), "other FPR" (signed by a key the keyring lacks; FPR the signing key, or
# its 16-digit ID when the signature names no fingerprint), "nokeyring" or "unreachable".
# Downloads through apt's own helper, so apt's proxy and auth.conf.d login apply, and reads
# InRelease, or Release with Release.gpg for a repository that has no InRelease.
SIGNER = r"""signer() {
  [ -f "$2" ] || { echo nokeyring; return 0; }
  get() { /usr/lib/apt/apt-helper download-file "$1$2" "$3/$2" >/dev/null 2>&1; }
  if get "$1" InRelease "$3"; then
    set -- "$2" "$3/InRelease"
  elif get "$1" Release "$3" && get "$1" Release.gpg "$3"; then
    set -- "$2" "$3/Release.gpg" "$3/Release"
  else
    echo unreachable; return 0
  fi
  k=$1; shift
  gpgv --status-fd 1 --keyring "$k" "$@" 2>/dev/null | awk '
    $2=="VALIDSIG" {print "good", toupper($NF); done=1; exit}
    $2=="ERRSIG" && !other {other=toupper(NF>=9 ? $9 : $3)}
    END {if (!done) print "other", (other ? other : "<unsigned>")}'
}
"""

# After SIGNER: $1 the pinned fingerprint, $2 keyring, $3 repository URI, in $tmp. Says what
# is wrong when the repository is not signed by the pinned key and fails; when it is, exits
# $good_rc (0 for a check, 1 after a failed update, whose cause apt printed).
EXPLAIN = r"""found=$(signer "$3" "$2" "$tmp")
case "$found" in
  "good $1") exit "$good_rc" ;;
  good\ *|other\ *)
    echo "gpufleet: the repository $3 is signed by key ${found#* };" \
      "nvidia_repo_key_fingerprint pins $1. apt does not use it (a host that had it keeps" \
      "the old package lists). Fix: if the rotation is genuine, set nvidia_repo_key_url" \
      "and nvidia_repo_key_fingerprint to the new key; otherwise check the mirror." >&2 ;;
  unreachable) echo "gpufleet: could not download $3InRelease to check its signature." >&2 ;;
  *) echo "gpufleet: the keyring $2 is missing; the repository is not trusted." >&2 ;;
esac
exit 1
"""

# Checks the repository's signature now, as served: `sh -c CHECK_SIGNER x FPR KEYRING URI`.
CHECK_SIGNER = "set -e\n" + PRIVATE_TMP + SIGNER + "good_rc=0\n" + EXPLAIN

# Stages the .sources text ($4) in a private directory and runs apt-get update for it alone
# (the other lists are kept: no list cleanup); the file goes into place ($3) only when apt
# accepted the repository, so a failed first run never looks configured to the next one.
# APT::Update::Error-Mode=any is what `--error-on=any` sets (apt >= 2.1.16); apt 2.0 (Ubuntu
# 20.04) ignores the unknown setting, so a W:/E: line in apt's output fails the update too.
# Bounded as every apt-get update (gpufleet.operations.apt_bounded): $6 seconds a request
# may go unanswered (one retry), $7 for the whole update.
# $1 fingerprint, $2 keyring, $3 .sources path, $4 its text, $5 repository URI.
VERIFIED_UPDATE = (
    "set -e\n"
    + PRIVATE_TMP
    + SIGNER
    + FUNCTIONS
    + r"""mkdir "$tmp/parts"
printf '%s' "$4" > "$tmp/parts/gpufleet.sources"
rc=0
timeout --kill-after=10 "$7" apt-get update -o Acquire::http::Timeout="$6" \
    -o Acquire::https::Timeout="$6" -o Acquire::Retries=1 \
    -o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$tmp/parts" \
    -o APT::Get::List-Cleanup=false -o APT::Update::Error-Mode=any > "$tmp/log" 2>&1 || rc=$?
if [ "$rc" -eq 0 ] && ! grep -q '^[WE]:' "$tmp/log"; then
  cat "$tmp/log"
  # A dot file in sources.list.d is ignored by apt until the rename makes it the source.
  new=$(mktemp "${3%/*}/.gpufleet-sources.XXXXXXXXXX")
  cp "$tmp/parts/gpufleet.sources" "$new"
  chmod 644 "$new"
  mv -f "$new" "$3"
  exit 0
fi
cat "$tmp/log" >&2
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] || gf_stuck "$tmp/log" >/dev/null; then
  gf_explain "$tmp/log" "$6" "$7"
  exit 1
fi
echo "gpufleet: apt-get update refused $5; $3 was not installed." >&2
set -- "$1" "$2" "$5"
good_rc=1
"""
    + EXPLAIN
)


def release_base(sources_text: str) -> str:
    """Where the first ``URIs``/``Suites`` of a deb822 source keep ``InRelease``: the suite's
    folder of a flat repository (``Suites: /``), ``dists/SUITE/`` of any other.

    Example: ``release_base("URIs: https://m/x/\\nSuites: /\\n") == "https://m/x/"``
    """
    fields: dict[str, str] = {}
    for line in sources_text.splitlines():
        name, colon, value = line.partition(":")
        if colon and value.split():
            fields.setdefault(name.strip().lower(), value.split()[0])
    uri = fields.get("uris", "").rstrip("/") + "/"
    suite = fields.get("suites", "/")
    if suite.endswith("/"):
        return uri + suite.strip("/") + ("/" if suite.strip("/") else "")
    return f"{uri}dists/{suite}/"


class RepositorySigner(FactBase):
    """
    Who signs the repository at ``uri`` now (its ``InRelease`` downloaded afresh and checked
    with ``gpgv`` against ``keyring``): ``("good", FPR)``, ``("other", FPR)``,
    ``("nokeyring", "")`` or ``("unreachable", "")``.

    .. code:: python

        ("good", "EB693B3035CD5710E231E123A4B469963BF863CC")
    """

    @override
    def command(self, uri: str, keyring: str) -> StringCommand:
        return StringCommand(
            "sh -c",
            QuoteString(PRIVATE_TMP + SIGNER + 'signer "$1" "$2" "$tmp"'),
            "gpufleet-signer",
            QuoteString(uri),
            QuoteString(keyring),
        )

    @staticmethod
    @override
    def default() -> tuple[str, str]:
        return ("unreachable", "")

    @override
    def process(self, output: list[str]) -> tuple[str, str]:
        words = (output[-1] if output else "unreachable").split()
        return (words[0], words[1] if len(words) > 1 else "")
