"""`gpufleet thresholds`: every floor a kind of host faces, where it comes from; judge figures."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gpufleet.commands.common import add_output_flags
from gpufleet.floors.derived import INTERCONNECTS
from gpufleet.floors.show import run


def _count(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of GPUs") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpufleet thresholds",
        description="Print the validation floors for a GPU model, GPU count and interconnect, "
        "each with its origin (published figure, calibration file or gpufleet's choice).",
        epilog='Example: gpufleet thresholds --gpu-model "NVIDIA A100-SXM4-80GB" --gpu-count 8 '
        "--interconnect nvswitch --judge results.json\n"
        "         gpufleet thresholds inventories/prod.py --limit gpu-a100-01.dc1.example.net "
        "--gpu-model A100-SXM4-80GB --interconnect nvswitch",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "inventory",
        nargs="?",
        help="with --limit HOST: that host's floors, from its inventory data (gpu_count, "
        "calibration_file, thresholds); the flags below fill in what the data does not say",
    )
    parser.add_argument("--limit", action="append", default=[], metavar="HOST")
    parser.add_argument(
        "--gpu-model",
        help="name as nvidia-smi prints it, part of one that names one model, or PCI id ('cpu' "
        "with --gpu-count 0 --interconnect none: a GPU-less host's calibration)",
    )
    parser.add_argument("--gpu-count", type=_count, help="GPUs in the host")
    parser.add_argument(
        "--interconnect",
        metavar="CLASS",
        help=f"slowest GPU-GPU link: {', '.join(INTERCONNECTS)}",
    )
    add_output_flags(parser, "print floors or verdicts as JSON")
    parser.add_argument(
        "--judge",
        metavar="FIGURES.json",
        help="judge a results document's metrics (or {name: value})",
    )
    parser.add_argument(
        "--calibration", metavar="FILE", help="calibration TOML whose floors replace published ones"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.inventory is None:
        missing = [f"--{n.replace('_', '-')}" for n in ("gpu_model", "gpu_count", "interconnect")]
        missing = [m for m in missing if getattr(args, m[2:].replace("-", "_")) is None]
        if missing:
            parser.error(
                f"the following arguments are required: {', '.join(missing)} "
                "(or give INVENTORY --limit HOST)"
            )
        if args.limit:
            parser.error("--limit goes with an INVENTORY")
    return run(args)
