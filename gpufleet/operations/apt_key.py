"""The script that fetches and installs an apt repository's signing key, checked by fingerprint."""

from __future__ import annotations

from gpufleet.operations.stdin import FETCH, PRIVATE_TMP, SECRET_ENV

# Downloads the key into a private directory and installs it only when the file holds exactly
# one primary key, the expected one; what is installed is that key alone, exported again by gpg
# (so no other key or packet that came with the file reaches apt's Signed-By keyring). apt reads
# a binary keyring under any name; an armored one only as *.asc. $1: fingerprint, $2: keyring;
# stdin: proxy, pip index (unused), key URL (stdin.FETCH).
FETCH_KEY = (
    "set -e\n"
    + PRIVATE_TMP
    + SECRET_ENV
    + "name=key\n"
    + FETCH
    + r"""export GNUPGHOME="$tmp/gnupg"
mkdir -m 700 "$GNUPGHOME"
trap 'gpgconf --kill all >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
primaries() {
  gpg --batch --with-colons --show-keys "$1" 2>/dev/null \
    | awk -F: '$1=="pub"{want=1} $1=="fpr"&&want{printf "%s ", toupper($10); want=0}'
}
if grep -q 'BEGIN PGP PUBLIC KEY BLOCK' "$tmp/key"; then
  gpg --batch --dearmor < "$tmp/key" > "$tmp/key.gpg"
else
  cp "$tmp/key" "$tmp/key.gpg"
fi
found=$(primaries "$tmp/key.gpg")
if [ "$found" != "$1 " ]; then
  found=${found% }
  echo "gpufleet: the file at nvidia_repo_key_url holds the primary key(s) ${found:-<none>}," \
    "expected exactly one, $1; not trusting it. Fix: check nvidia_repo_key_url and" \
    "nvidia_repo_key_fingerprint (a key file must hold the repository key alone)." >&2
  exit 1
fi
gpg --batch --quiet --import "$tmp/key.gpg" 2>/dev/null
gpg --batch --export "$1" > "$tmp/only.gpg"
if [ "$(primaries "$tmp/only.gpg")" != "$1 " ]; then
  echo "gpufleet: gpg could not export key $1 from the downloaded file; not trusting it." >&2
  exit 1
fi
install -D -m 0644 "$tmp/only.gpg" "$2"
"""
)
