"""`gpufleet matrix`: resolve TF/CUDA/cuDNN/NCCL/driver versions for a host, or explain why not."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence

from gpufleet.matrix import TF_RELEASES, MatrixError, Resolution, constraints_file, resolve


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpufleet matrix",
        description="Resolve the versions and apt packages gpufleet would install on a host.",
        epilog="Example: gpufleet matrix --tf 2.21.0 --os ubuntu:22.04 --gpu 2330 "
        "--driver-branch 535  (refused: H100 needs PTX JIT)",
    )
    parser.add_argument(
        "--tf", default="2.21.0", help=f"TensorFlow release ({', '.join(TF_RELEASES)})"
    )
    parser.add_argument("--os", default="ubuntu:22.04", help="OS as ID:VERSION, e.g. debian:12")
    parser.add_argument("--arch", default="x86_64", help="uname -m of the host (x86_64, aarch64)")
    parser.add_argument(
        "--gpu",
        action="append",
        default=[],
        metavar="DEVICE_ID",
        help="PCI device id of a GPU or NVSwitch (repeat, or comma-separate), e.g. 2330",
    )
    parser.add_argument("--driver-branch", type=int, help="driver branch, e.g. 580 (default: auto)")
    parser.add_argument("--cuda", help="system CUDA toolkit override, e.g. 12.8")
    parser.add_argument("--flavor", default="auto", help="kernel modules: auto, open, proprietary")
    parser.add_argument("--python", help="Python version of the environment, e.g. 3.11")
    parser.add_argument("--json", action="store_true", help="print the resolution as JSON")
    parser.add_argument(
        "--constraints", action="store_true", help="print the pip constraints file for --tf"
    )
    return parser


def _render(resolution: Resolution) -> str:
    r = resolution
    gpus = ", ".join(r.gpu_names) or "(none given)"
    lines = [
        f"TensorFlow {r.tf_version}  Python {r.python_min}..{r.python_max}",
        f"GPUs           {gpus}{'  + NVSwitch' if r.has_nvswitch else ''}",
        f"CUDA           {r.cuda} (TF built with {r.tf_cuda}); cuDNN {r.cudnn}; NCCL {r.nccl}",
        f"driver         branch {r.driver_branch} ({r.kernel_module_flavor} modules), "
        f"minimum {r.min_driver}, latest known {r.driver_version}",
        f"repository     {r.repo_distro}/{r.repo_arch}",
        "apt packages:",
    ]
    packages = [
        *([r.pinning_package] if r.pinning_package else []),
        *r.driver_packages,
        *([r.fabricmanager_package] if r.fabricmanager_package else []),
        r.cuda_toolkit_package,
        *r.cudnn_packages,
        *r.nccl_packages,
    ]
    lines += [f"  {p}" for p in packages]
    lines.append("pip constraints:")
    lines += [f"  {name}=={version}" for name, version in sorted(r.wheel_constraints.items())]
    lines += [f"warning: {w}" for w in r.warnings]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``gpufleet matrix``: 0 when resolved, 1 when refused."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    os_id, sep, os_version = args.os.partition(":")
    if not sep:
        print(
            f"gpufleet matrix: --os {args.os!r} must be ID:VERSION, e.g. ubuntu:22.04",
            file=sys.stderr,
        )
        return 1
    gpus = [part.strip() for value in args.gpu for part in value.split(",") if part.strip()]
    try:
        if args.constraints:
            print(constraints_file(args.tf), end="")
            return 0
        resolution = resolve(
            args.tf,
            os_id=os_id,
            os_version=os_version,
            arch=args.arch,
            gpu_device_ids=gpus,
            driver_branch=args.driver_branch,
            cuda_version=args.cuda,
            kernel_module_flavor=args.flavor,
            python_version=args.python,
        )
    except MatrixError as exc:
        if args.json:
            print(json.dumps({"ok": False, "conflicts": exc.conflicts}, indent=2))
        else:
            print(f"refused: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"ok": True, **dataclasses.asdict(resolution)}, indent=2))
    else:
        print(_render(resolution))
    return 0
