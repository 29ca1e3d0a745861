"""`gpufleet matrix`: resolve TF/CUDA/cuDNN/NCCL/driver versions for a host, or explain why not."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gpufleet.commands.common import add_output_flags
from gpufleet.matrix import TF_RELEASES
from gpufleet.matrix.show import run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpufleet matrix",
        description="Resolve the versions and apt packages gpufleet would install on a host. "
        "Exit status: 0 resolved, 1 refused (a conflict), 2 bad input.",
        epilog="Example: gpufleet matrix --tf-version 2.21.0 --os ubuntu:22.04 --gpu 2330 "
        "--driver-branch 535  (refused: H100 needs PTX JIT)",
    )
    parser.add_argument(
        "--tf-version",
        dest="tf",
        default="2.21.0",
        metavar="VERSION",
        help=f"TensorFlow release ({', '.join(TF_RELEASES)}; default 2.21.0)",
    )
    parser.add_argument("--tf", dest="tf", help=argparse.SUPPRESS)  # old name, one release
    parser.add_argument("--os", default="ubuntu:22.04", help="OS as ID:VERSION, e.g. debian:12")
    parser.add_argument("--arch", default="x86_64", help="uname -m of the host (x86_64, aarch64)")
    parser.add_argument(
        "--gpu",
        action="append",
        default=[],
        metavar="GPU",
        help="PCI device id, name as nvidia-smi prints it, or part of one, of a GPU or "
        "NVSwitch (repeat, or comma-separate), e.g. 2330 or 'H100 NVL'; an unknown one is "
        "refused with the known list",
    )
    parser.add_argument("--driver-branch", type=int, help="driver branch, e.g. 580 (default: auto)")
    parser.add_argument("--cuda", help="system CUDA toolkit override, e.g. 12.8")
    parser.add_argument(
        "--kernel-module-flavor",
        dest="flavor",
        default="auto",
        metavar="FLAVOR",
        help="kernel modules: auto (default), open, proprietary",
    )
    parser.add_argument("--flavor", dest="flavor", help=argparse.SUPPRESS)  # old name
    parser.add_argument(
        "--python-version",
        dest="python",
        metavar="X.Y",
        help="Python version of the environment, e.g. 3.11",
    )
    parser.add_argument("--python", dest="python", help=argparse.SUPPRESS)  # old name
    parser.add_argument(
        "--no-require-cuda-build",
        action="store_true",
        help="accept an aarch64 host with GPUs although PyPI's TensorFlow has no CUDA there",
    )
    add_output_flags(parser, "print the resolution as JSON")
    parser.add_argument(
        "--constraints", action="store_true", help="print the pip constraints file for --tf-version"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser().parse_args(list(sys.argv[1:] if argv is None else argv)))
