"""`gpufleet rollout INVENTORY [--deploy PATH]`: upgrade the fleet a few hosts at a time, gated."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from gpufleet.commands.common import add_output_flags
from gpufleet.inventory import InventoryError, InventoryHost, load_hosts
from gpufleet.rollout import machine, private, progress
from gpufleet.rollout import preflight as pf
from gpufleet.rollout import state as st
from gpufleet.scheduler.rule import SchedulerError

EPILOG = """\
Per host: pending -> draining -> waiting-for-jobs -> deploying -> rebooting -> validating ->
resuming -> done; failed hosts stay drained with the reason. The state file is written after
every transition: run the same command again to continue a rollout that was stopped.
Before the first drain every host's data (with --data), the deploy file and the drain method
are checked; a problem stops the rollout with no host touched (--dry checks the same).
Without a scheduler, pass --cordon-cmd (e.g. 'kubectl cordon {host}') or --no-drain.
Example: gpufleet rollout inventories/prod.py --scheduler slurm --data driver_branch=580 \
  --max-unavailable 10%
Exit status: 0 every host done, 1 a host failed or is still pending, 2 bad usage or a refused
check (nothing touched).
"""


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative; give 0 or more seconds")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpufleet rollout",
        description="Drain, upgrade, reboot, validate and resume hosts, a few at a time.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("inventory", help="pyinfra inventory file")
    # the deploy was positional once: kept, hidden, for one release
    parser.add_argument("old_deploy", nargs="?", default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--deploy",
        default=None,
        metavar="PATH",
        help="the pyinfra deploy (default: deploy/gpu_node.py of this checkout)",
    )
    parser.add_argument(
        "--max-unavailable",
        default="1",
        metavar="N|P%",
        help="hosts out of service at once, counting those others drained (default 1)",
    )
    parser.add_argument(
        "--max-failures",
        type=int,
        default=1,
        metavar="N",
        help="stop starting hosts after N failed (default 1)",
    )
    parser.add_argument(
        "--wait-for-jobs",
        type=_seconds,
        default=None,
        metavar="S",
        help="seconds to wait for running jobs (default: as long as they run); then skip",
    )
    parser.add_argument("--tier", choices=("quick", "full"), default="quick", help="the gate")
    parser.add_argument(
        "--select", metavar="EXPR", help="gate on the checks matching this pytest -k expression"
    )
    parser.add_argument("--limit", action="append", default=[], metavar="HOST")
    parser.add_argument("--dry", action="store_true", help="print the plan, change nothing")
    parser.add_argument(
        "--scheduler",
        choices=("slurm", "none"),
        default=None,
        help="default: the inventory's scheduler key",
    )
    parser.add_argument(
        "--cordon-cmd", metavar="CMD", help="--scheduler none: run to drain ({host}: its name)"
    )
    parser.add_argument("--uncordon-cmd", metavar="CMD", help="--scheduler none: to resume")
    parser.add_argument(
        "--no-drain",
        action="store_true",
        help="--scheduler none: deploy and reboot hosts without draining them (nothing runs "
        "on them)",
    )
    parser.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="passed to pyinfra's deploy, e.g. driver_branch=580",
    )
    parser.add_argument("--state-file", type=Path, default=Path("rollout/state.json"))
    parser.add_argument(
        "--textfile",
        type=Path,
        metavar="PATH",
        help="Prometheus textfile for gpufleet_rollout_hosts{state=...}",
    )
    parser.add_argument("--results-dir", type=Path, default=Path("results"))
    add_output_flags(
        parser, "print the plan (--dry) or the final state as JSON; progress goes to stderr"
    )
    return parser


def make_scheduler(
    kind: str, hosts: Sequence[InventoryHost], args: argparse.Namespace, workdir: Path
) -> machine.Scheduler:
    if kind == "none":
        from gpufleet.scheduler.none import NoScheduler

        return NoScheduler(args.cordon_cmd, args.uncordon_cmd)
    from gpufleet.scheduler.remote import ssh_runner
    from gpufleet.scheduler.slurm import Slurm

    controller = str({**hosts[0].data, **pf.parse_data(args.data)}.get("slurm_controller") or "")
    match = [h for h in hosts if controller in (h.name, str(h.ssh_hostname))]
    if not match:
        raise st.RolloutError(
            f"slurm_controller {controller or '(unset)'!r} is not a host of the inventory; "
            "set slurm_controller to the name or ssh_hostname of the slurmctld host"
        )
    return Slurm(ssh_runner(match[0], workdir))


def summary(state: st.RolloutState, console: Console) -> None:
    console.print(progress.host_table(state))
    # one line, whatever the width: scripts grep it
    console.print(progress.counts_line(state), soft_wrap=True, markup=False)


def preflight(
    args: argparse.Namespace, everyone: Sequence[InventoryHost], hosts: Sequence[InventoryHost]
) -> tuple[str, str]:
    """Everything the rollout needs, checked before any host is touched: the scheduler kind
    and the deploy path; every problem found is raised together."""
    overrides = pf.parse_data(args.data)
    problems = pf.data_problems(hosts, overrides, args.inventory)
    if args.scheduler:
        kind, source = args.scheduler, "from --scheduler"
    else:
        merged = {**everyone[0].data, **overrides}
        kind = str(merged.get("scheduler") or "none")
        source = "the inventory's scheduler key" if merged.get("scheduler") else "the default"
    if args.deploy and args.old_deploy:
        problems.append("give the deploy once: --deploy PATH (the positional form is old)")
    deploy, found = pf.resolve_deploy(args.deploy or args.old_deploy)
    problems += found
    problems += pf.drain_problems(kind, source, args.cordon_cmd, args.no_drain)
    problems += pf.command_problems("--cordon-cmd", args.cordon_cmd)
    problems += pf.command_problems("--uncordon-cmd", args.uncordon_cmd)
    if len(problems) == 1:
        raise st.RolloutError(f"{problems[0]}; no host was touched")
    if problems:
        listed = "\n".join(f"  - {p}" for p in problems)
        raise st.RolloutError(f"{len(problems)} problems, no host was touched:\n{listed}")
    return kind, deploy


def run(args: argparse.Namespace) -> int:
    if args.dry:  # reads the state file, changes nothing: no lock
        return _run(args)
    # One process per state file for the whole run: a second one would work every host again.
    with private.hold(args.state_file):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    if args.max_failures < 1:
        raise st.RolloutError("--max-failures must be 1 or more")
    everyone = load_hosts(args.inventory)
    hosts = load_hosts(args.inventory, args.limit) if args.limit else everyone
    names = [h.name for h in hosts]
    kind, deploy = preflight(args, everyone, hosts)
    options = machine.Options(
        max_unavailable=machine.parse_max_unavailable(args.max_unavailable, len(everyone)),
        max_failures=args.max_failures,
        wait_for_jobs_s=args.wait_for_jobs,
        named=frozenset(names if args.limit else ()),
    )
    saved = st.load(args.state_file)
    if saved is None:
        saved = st.RolloutState({n: st.HostRecord(n) for n in names})
    elif set(saved.hosts) != set(names):
        raise st.RolloutError(
            f"{args.state_file} is a rollout of {', '.join(sorted(saved.hosts))}, not of "
            f"{', '.join(sorted(names))}; finish it, or give another --state-file"
        )
    saved.options = {
        "max_unavailable": options.max_unavailable,
        "scheduler": kind,
        "max_failures": options.max_failures,
        "tier": args.tier,
    }
    with tempfile.TemporaryDirectory(prefix="gpufleet-rollout-") as tmp:
        scheduler = make_scheduler(kind, everyone, args, Path(tmp))
        overrides = pf.parse_data(args.data)
        controller = str({**everyone[0].data, **overrides}.get("slurm_controller") or "")
        method = pf.drain_method(kind, args.cordon_cmd, controller)
        if args.dry:
            lines = machine.plan(saved, scheduler, options, drain=method)
            print(json.dumps({"drain": method, "plan": lines}) if args.json else "\n".join(lines))
            return 0
        from gpufleet.rollout.steps import real_steps

        steps = real_steps(
            args.inventory,
            deploy,
            tier=args.tier,
            results_dir=args.results_dir,
            log_dir=args.state_file.parent / "logs",
            data=args.data,
            select=args.select,
            verbose=args.verbose,
        )
        console = Console(stderr=args.json)
        console.print(f"drain: {method}", soft_wrap=True, markup=False)
        with progress.display(saved, console, quiet=args.quiet) as log:
            result = machine.Rollout(
                saved,
                scheduler,
                steps,
                options,
                state_path=args.state_file,
                textfile=args.textfile,
                log=log,
            ).run()
    summary(result, console)
    if args.json:
        print(result.to_json(), end="")
    return 0 if not result.in_state("failed", "pending") else 1


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return run(args)
    except (st.RolloutError, private.PrivateFileError, SchedulerError, InventoryError) as exc:
        print(f"gpufleet rollout: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
