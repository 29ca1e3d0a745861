"""Whether the pinned distributions of a Python environment are installed whole (EnvProblems)."""

from __future__ import annotations

import posixpath
import re

from pyinfra.api import FactBase, QuoteString, StringCommand
from typing_extensions import override

from gpufleet.matrix import locks

# Run by the environment's own python: for each "name==version" (or "name==version; marker",
# skipped where its marker does not hold), whether that distribution is installed at that
# version with every file pip recorded for it (RECORD) present at its recorded size and sha256.
# A cut-off install, a deleted package directory, a same-size rewrite or another wheel of the
# same version fails this, while pip itself would say "Requirement already satisfied". Left
# out: compiled files (Python rewrites them) and a package's C/C++ headers
# (``<package>/include/``, read only when compiling against it: 10,922 of TensorFlow 2.21's
# 12,953 files, the TensorFlow C++ API). Then every ``.pth`` file of the environment's
# site-packages that no distribution recorded (code run at every interpreter start). The
# distribution is found by its folder's name, as pip finds it (``distribution``), which is
# also how the stamp witness below finds it. Python 3.9 syntax: focal's venvs run it.
_ENV_CHECK = r"""
import base64, hashlib, importlib.metadata as md, os, re, sys
try:
    from packaging.markers import Marker
except ImportError:
    try:
        from pip._vendor.packaging.markers import Marker
    except ImportError:
        Marker = None
norm = lambda name: re.sub(r"[-_.]+", "-", name).lower()
headers = re.compile(r"[^/]*/include/")
def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()
def sound(f):
    where = f.locate()
    if not os.path.isfile(where) or os.path.getsize(where) != f.size:
        return False
    return f.hash is None or f.hash.mode != "sha256" or sha256(where) == f.hash.value
for arg in sys.argv[1:]:
    pin, _, marker = arg.partition(";")
    name, _, version = pin.strip().partition("==")
    if marker.strip():
        if Marker is None:
            print("unchecked", norm(name), "(no packaging module to read its marker)")
            continue
        if not Marker(marker.strip()).evaluate():
            continue
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        print("missing", norm(name))
        continue
    if dist.version != version:
        print("version", norm(name), dist.version)
        continue
    bad = [str(f) for f in dist.files or () if f.size is not None
           and not str(f).endswith(".pyc") and not headers.match(str(f)) and not sound(f)]
    if bad or not dist.files:
        print("broken", norm(name), len(bad), bad[0] if bad else "(no RECORD)")
recorded = {os.path.realpath(f.locate()) for d in md.distributions() for f in d.files or ()
            if str(f).endswith(".pth")}
for sp in sorted({p for p in sys.path if p.startswith(sys.prefix) and p.endswith("-packages")}):
    for entry in sorted(os.listdir(sp)) if os.path.isdir(sp) else ():
        path = os.path.join(sp, entry)
        if entry.endswith(".pth") and os.path.realpath(path) not in recorded:
            print("pth", path)
print("gpufleet-env: checked")
"""

# The stamp's witness of the check (gpufleet.stamp): what the check reads, by change time.
# $1 the python, $2 the environment, then one find(1) -iname pattern per distribution's name.
# Printed: the interpreter (size, change time, inode) and pyvenv.cfg; for each site-packages,
# every name at its top (a distribution or .pth file added or removed) with the change time of
# each file there and in every *.dist-info/*.egg-info folder (names, versions, RECORD); then
# the distributions' folders the patterns find, and one digest of the change time and inode of
# every file their RECORDs list that the check reads (the same rules: a size, not .pyc, not
# under <package>/include/). An egg-info distribution (no RECORD), a RECORD missing, or one
# with a quoted path (a comma in a name), is not parsed here: the whole environment's files
# are then walked instead. One find, one awk and one stat for all the distributions: a lock
# pins about 40, and a pipeline each cost 0.4 s of a host's CPU on a no-op (issue 35).
_ENV_WITNESS = r"""python=$1 prefix=$2; shift 2
export TZ=UTC0  # %z: the change time to the nanosecond (%Z is whole seconds), in one zone
stat -L -c '%s %z %i' "$python" 2>/dev/null
stat -c 'pyvenv.cfg %z %i' "$prefix/pyvenv.cfg" 2>/dev/null
walk() {
  find "$prefix" -xdev -name __pycache__ -prune -o \( -type f -o -type l \) -printf '%C@\n' \
    2>/dev/null | sha256sum
}
n=$#
for name; do  # the patterns become one find expression: -iname A -o -iname B ...
  set -- "$@" -o -iname "$name-*.dist-info" -o -iname "$name-*.egg-info" -o -iname "$name.egg-info"
done
shift "$n"
[ $# -gt 0 ] && shift  # the first -o
for sp in "$prefix"/lib/python*/site-packages; do
  cd "$sp" 2>/dev/null || continue
  echo "$sp"
  find . -mindepth 1 -maxdepth 2 \( -name __pycache__ -o -path './*/*' \
      ! -path './*.dist-info/*' ! -path './*.egg-info/*' \) -prune \
    -o -type d -printf '%p\n' -o -printf '%p %C@ %i\n' | LC_ALL=C sort | sha256sum
  [ $# -gt 0 ] || continue
  dists=$(find . -mindepth 1 -maxdepth 1 \( "$@" \) | LC_ALL=C sort)
  [ -n "$dists" ] || continue
  printf '%s\n' "$dists"
  case $dists in *.egg-info*) walk; continue ;; esac
  files=$(printf '%s\n' "$dists" | sed 's|$|/RECORD|' | tr '\n' '\0' |
    LC_ALL=C xargs -0 awk -F, '/^"/ {exit 3}
      $3 != "" && $1 !~ /\.pyc$/ && $1 !~ /^[^\/]*\/include\// {print $1}' 2>/dev/null) ||
    { walk; continue; }
  printf '%s\n' "$files" | tr '\n' '\0' | xargs -0r stat -L -c '%z %i' -- 2>/dev/null | sha256sum
done
"""

PROBLEMS = ("missing", "version", "broken", "unchecked", "pth")
# Where a stray .pth the check names may be: directly in one of the environment's lib folders.
_PTH = re.compile(r"/lib/python3[.0-9]*/(?:site|dist)-packages/[^/\s]+\.pth")


def checked_pins(requirement: str, pins: list[locks.Pin]) -> list[str]:
    """What ``EnvProblems`` checks: the requirement (extras dropped) and every pin of its
    lock, ``name==version`` or ``name==version; marker`` (checked where the marker holds).

    Example: ``checked_pins("tensorflow[and-cuda]==2.21.0", pins)[0] == "tensorflow==2.21.0"``
    """
    name, _, version = requirement.partition("==")
    wanted = [f"{name.split('[', 1)[0].strip()}=={version.strip()}"]
    for pin in pins:
        line = f"{pin.name}=={pin.version}" + (f"; {pin.marker}" if pin.marker else "")
        if line not in wanted and line != f"{locks.normalize(name.split('[', 1)[0])}=={version}":
            wanted.append(line)
    return wanted


def stray_pth(python: str, problems: list[str]) -> list[str]:
    """The ``.pth`` files the check named (``pth PATH``) that lie in ``python``'s environment's
    site-packages: the reinstall removes them (no package put them there)."""
    prefix = posixpath.dirname(posixpath.dirname(python))
    paths = [line.partition(" ")[2] for line in problems if line.startswith("pth /")]
    return [p for p in paths if p.startswith(prefix) and _PTH.fullmatch(p[len(prefix) :])]


def name_pattern(requirement: str) -> str:
    """The ``find -iname`` pattern of a distribution's name in the folder names pip may have
    given it: any case, any run of characters between the parts of its name. It matches every
    folder the check's lookup can find (and perhaps more, which only makes the witness
    stricter).

    Example: ``name_pattern("tensorflow-cpu==2.21.0") == "tensorflow*cpu"``
    """
    name = requirement.partition("==")[0].split("[", 1)[0].split(";", 1)[0].strip()
    return "*".join(part for part in re.split(r"[-_.]+", name) if part)


class EnvProblems(FactBase):
    """
    What is wrong with pinned distributions in a Python environment, checked by its own
    python from pip's RECORD (files present, sizes and sha256s as installed), and ``.pth``
    files no distribution recorded (``pth PATH``); ``[]`` when all are sound.

    .. code:: python

        host.get_fact(EnvProblems, python="/opt/gpufleet/venvs/tf/bin/python",
                      requirements=["tensorflow==2.21.0"])
        # ["broken tensorflow 1840 tensorflow/__init__.py"] after rm -rf site-packages/tensorflow
    """

    @override
    def command(self, python: str, requirements: list[str]) -> StringCommand:
        return StringCommand(
            "if [ -x",
            QuoteString(python),
            "]; then",
            QuoteString(python),
            "-I -c",
            QuoteString(_ENV_CHECK),
            *[QuoteString(r) for r in requirements],
            "2>&1 || echo 'gpufleet-env: the check failed'; else echo 'gpufleet-env: no python';",
            "fi",
        )

    def stamp_witness(self, python: str, requirements: list[str]) -> StringCommand:
        """What a deploy stamp replays instead (gpufleet.stamp): the change time of every file
        the check reads (``_ENV_WITNESS`` says which). Every write, truncation, rename, chmod
        or re-link of a file sets its change time to now (Linux updates it on rename too), a
        file removed drops a line and a distribution added adds one, so while this prints the
        same so would the check. For the 37 pins of tensorflow-cpu 2.21.0 it takes 0.06 s of
        CPU on the 2-core sandbox machine, against 1.4 s for the check itself (0.42 s when
        each distribution had a pipeline of its own)."""
        prefix = posixpath.dirname(posixpath.dirname(python))
        return StringCommand(
            "sh -c",
            QuoteString(_ENV_WITNESS),
            "gpufleet-env",
            QuoteString(python),
            QuoteString(prefix),
            *[QuoteString(name_pattern(r)) for r in requirements],
        )

    @override
    def process(self, output: list[str]) -> list[str]:
        lines = [line.strip() for line in output if line.strip()]
        if "gpufleet-env: checked" not in lines:
            return [" ".join(lines[-3:]) or "the environment check printed nothing"]
        return [line for line in lines if line.split(" ", 1)[0] in PROBLEMS]
