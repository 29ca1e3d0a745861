"""Repair of a dpkg that was stopped mid-run (killed, power lost), before apt is used again."""

from __future__ import annotations

from collections.abc import Sequence

from pyinfra import host
from pyinfra.api import QuoteString, StringCommand, operation

from gpufleet.operations.apt import APT_GET

# Checked again when the command runs (the plan's reading may be minutes old): dpkg finishes
# what it left unconfigured, then apt completes what the broken run left half-installed, then
# dpkg configures what waited on that. apt refuses every install until this is done ("dpkg was
# interrupted, you must manually run 'dpkg --configure -a'"). A package cut off mid-unpack (a
# power cut) stays half-installed, and dpkg cannot configure what depends on it until apt
# reinstalls it: so a failed first pass is not the end; only a host still unclean after all
# three fails. The arguments are the apt-get command. A journal entry is what apt itself counts
# (debSystem::CheckUpdates: names of digits alone); dpkg's own leftover ``tmp.i`` is not one.
_REPAIR = r"""set -u
journal() { # an unfinished dpkg run left a journal entry: a file named by digits alone
  for f in /var/lib/dpkg/updates/*; do
    case ${f##*/} in *[!0-9]*) ;; *) return 0 ;; esac
  done
  return 1
}
clean() { ! journal && [ -z "$(dpkg --audit 2>/dev/null)" ]; }
if clean; then
  echo "gpufleet: dpkg is clean now: nothing to repair"
  exit 0
fi
echo "gpufleet: dpkg was interrupted; finishing its work: dpkg --configure -a, apt-get -f install"
configure() { DEBIAN_FRONTEND=noninteractive dpkg --force-confdef --force-confold --configure -a; }
configure || echo "gpufleet: dpkg --configure -a left work for apt-get -f install"
"$@" -f install || echo "gpufleet: apt-get -f install failed; dpkg gets one more pass"
configure || true
clean && exit 0
dpkg --audit >&2
echo "gpufleet: dpkg is still not clean after dpkg --configure -a and apt-get -f install" \
  "(above). Fix: on the host, reinstall or purge the package named above (dpkg --configure -a" \
  "shows its error), then run the deploy again." >&2
exit 1
"""


@operation()
def repaired(problems: Sequence[str]):
    """
    Finish the work of an interrupted dpkg (``dpkg --configure -a``, then ``apt-get -f
    install``), so that apt installs again. Does nothing on a clean host.

    + problems: what ``dpkg --audit`` and ``/var/lib/dpkg/updates/`` reported, read once per
      host before planning (gpufleet's ``HostProbe``: ``HostState.dpkg_problems``)

    **Example:**

    .. code:: python

        repaired(name="dpkg repaired", problems=plan.state.dpkg_problems)
    """
    if not problems:
        host.noop("dpkg is clean (dpkg --audit reports nothing)")
        return
    yield StringCommand(
        "sh -c", QuoteString(_REPAIR), "gpufleet-dpkg-repair", StringCommand("env", APT_GET)
    )
