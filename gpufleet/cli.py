"""The `gpufleet` command: one subcommand per job, each implemented in its own module."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from gpufleet import __version__

# subcommand -> (module with `main(argv) -> int`, one-line help). Modules are imported only
# when their subcommand runs, so `gpufleet --help` stays fast and never imports TensorFlow
# or pyinfra_cli (which monkey-patches the process with gevent).
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "validate": ("gpufleet.commands.validate", "run the acceptance suite against an inventory"),
    "drift": (
        "gpufleet.commands.drift",
        "report what differs from the declared state, host by host",
    ),
    "rollout": (
        "gpufleet.commands.rollout",
        "upgrade hosts a few at a time: drain, deploy, reboot, validate, resume",
    ),
    "report": ("gpufleet.commands.report", "render results JSON into a fleet report"),
    "sandbox": ("gpufleet.commands.sandbox", "bring the local test fleet up or down (needs root)"),
    "diagnose": ("gpufleet.commands.diagnose", "name known GPU/TensorFlow failures in a log"),
    "matrix": ("gpufleet.commands.matrix", "resolve TF/CUDA/cuDNN/NCCL/driver versions for a host"),
    "thresholds": (
        "gpufleet.commands.thresholds",
        "print the validation floors for a kind of host, or judge figures against them",
    ),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpufleet",
        description="Provision NVIDIA GPU servers for TensorFlow and prove they are fast.",
        epilog="Provisioning itself is plain pyinfra: pyinfra INVENTORY deploy/gpu_node.py. "
        "Exit status: 0 all good, 1 a host failed, 2 bad usage, 3 could not reach a host "
        "(per subcommand: docs/reference/exit-codes.md).",
    )
    parser.add_argument("--version", action="version", version=f"gpufleet {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_module, help_text) in SUBCOMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not args or args[0] not in SUBCOMMANDS:
        parser.parse_args(args)  # prints help / version / usage errors and exits
        parser.print_help()
        return 2
    module_name, _help = SUBCOMMANDS[args[0]]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        print(f"gpufleet {args[0]}: not yet available in this version.", file=sys.stderr)
        return 2
    try:
        result: int = module.main(args[1:])
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`gpufleet thresholds ... | head`): not an error of ours. Point
        # stdout at /dev/null so the interpreter's own flush at exit raises nothing either,
        # and exit as a shell does for SIGPIPE (128 + 13).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    return result


if __name__ == "__main__":
    raise SystemExit(main())
