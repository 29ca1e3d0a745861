"""A host-side lock that keeps two gpufleet deploys off one host at once; stale ones are taken over.

The lock file names the process that holds the deploy's SSH connection on the host (the
``sshd`` session every command of the run descends from), that process's start time and the
host's boot ID. It lives in ``/run`` (a tmpfs), so a reboot clears it; a deploy whose
controller died leaves a file whose process is gone, which the next deploy takes over.
"""

from __future__ import annotations

from pyinfra import host, state
from pyinfra.api import QuoteString, StringCommand, operation

LOCK = "/run/gpufleet-deploy.lock"

# Shared by taking and releasing: find this run's session process and read a process's start
# time (field 22 of /proc/PID/stat; counted after the ")" that ends the command name, which
# may hold spaces). Without an sshd ancestor (pyinfra's @local connector) the nearest process
# that is not a shell, sudo or env stands for the run.
_COMMON = r"""set -u
lock=$1
starttime() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20; }
parent() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f2; }
session() {
  p=$$ other=
  while [ -n "$p" ] && [ "$p" -gt 1 ]; do
    case $(cat "/proc/$p/comm" 2>/dev/null) in
      sshd*) echo "$p"; return ;;
      sh|bash|dash|sudo|su|env|timeout) ;;
      *) [ -n "$other" ] || other=$p ;;
    esac
    p=$(parent "$p")
  done
  echo "${other:-$PPID}"
}
me=$(session)
exec 9>"$lock.guard"
if ! flock -w 30 9; then
  echo "gpufleet: $lock.guard stayed locked for 30 s; run again" >&2
  exit 1
fi
holder= started= boot= since=
[ -s "$lock" ] && read -r holder started boot since < "$lock"
"""

_TAKE = (
    _COMMON
    + r"""this_boot=$(cat /proc/sys/kernel/random/boot_id)
if [ -n "$holder" ] && [ "$holder" != "$me" ]; then
  if [ "$boot" = "$this_boot" ] && [ -n "$started" ] && [ "$(starttime "$holder")" = "$started" ]
  then
    echo "gpufleet: another gpufleet deploy runs on $2 (pid $holder, since $since). Fix: wait" \
      "for it to finish and run again; if it is stuck, end it (kill $holder on $2) first." >&2
    exit 1
  fi
  echo "gpufleet: taking over a stale deploy lock (pid $holder, since $since: that deploy" \
    "is gone)"
fi
printf '%s %s %s %s\n' "$me" "$(starttime "$me")" "$this_boot" \
  "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$lock.new"
mv "$lock.new" "$lock"
"""
)

_RELEASE = (
    _COMMON
    + r"""if [ "$holder" = "$me" ]; then rm -f "$lock"; fi
"""
)


@operation(is_idempotent=False)
def deploy_lock(path: str = LOCK):
    """
    Take the host's deploy lock for this run, refusing the host while another deploy holds
    it: "another gpufleet deploy runs on HOST (pid N, since T)". A lock whose process is gone
    or that predates the last boot is stale and taken over. Runs only when the deploy
    executes, so a plan (``--dry``) neither takes it nor shows it as a change.

    + path: the lock file (on a tmpfs such as ``/run``, so a reboot clears it)

    **Example:**

    .. code:: python

        deploy_lock(name="deploy lock taken")
    """
    if not state.is_executing:
        host.noop(f"{path} is taken when the deploy runs")
        return
    yield StringCommand(
        "sh -c", QuoteString(_TAKE), "gpufleet-lock", QuoteString(path), QuoteString(host.name)
    )


@operation(is_idempotent=False)
def deploy_lock_released(path: str = LOCK):
    """
    Release the deploy lock this run took (a lock held by another run is left alone). A run
    that fails before it gets here leaves a lock that the next run finds stale.

    + path: the lock file

    **Example:**

    .. code:: python

        deploy_lock_released(name="deploy lock released")
    """
    if not state.is_executing:
        host.noop(f"{path} is released when the deploy runs")
        return
    yield StringCommand("sh -c", QuoteString(_RELEASE), "gpufleet-unlock", QuoteString(path))
