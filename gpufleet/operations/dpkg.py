"""Repair of a dpkg that was stopped mid-run (killed, power lost), before apt is used again."""

from __future__ import annotations

from collections.abc import Sequence

from pyinfra import host
from pyinfra.api import QuoteString, StringCommand, operation

from gpufleet.operations.apt import APT_GET

# Checked again when the command runs (the plan's reading may be minutes old): dpkg finishes
# what it left unconfigured, then apt completes what the broken run left half-installed.
# apt refuses every install until this is done ("dpkg was interrupted, you must manually run
# 'dpkg --configure -a'").
_REPAIR = r"""set -e
if [ -z "$(ls -A /var/lib/dpkg/updates 2>/dev/null)" ] && [ -z "$(dpkg --audit 2>/dev/null)" ]
then
  echo "gpufleet: dpkg is clean now: nothing to repair"
  exit 0
fi
echo "gpufleet: dpkg was interrupted; finishing its work: dpkg --configure -a, apt-get -f install"
DEBIAN_FRONTEND=noninteractive dpkg --force-confdef --force-confold --configure -a
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
    yield StringCommand("sh -c", QuoteString(_REPAIR), "gpufleet-dpkg-repair")
    yield StringCommand(APT_GET, "-f install")
