"""What `gpufleet matrix` prints: a resolution for people, as JSON, or the pip constraints."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from gpufleet.matrix import MatrixError, Resolution, apt_specs, constraints_file, resolve
from gpufleet.matrix.gpu_lookup import lookup, unknown_message


def _render(resolution: Resolution) -> str:
    r = resolution
    gpus = ", ".join(r.gpu_names) or "(none given)"
    lines = [f"warning: {w}" for w in r.warnings]  # first: a long listing must not hide them
    lines += [
        f"TensorFlow {r.tf_version}  Python {r.python_min}..{r.python_max}",
        f"GPUs           {gpus}{'  + NVSwitch' if r.has_nvswitch else ''}",
        f"CUDA           {r.cuda} (TF built with {r.tf_cuda}); cuDNN {r.cudnn}; NCCL {r.nccl}",
        f"driver         branch {r.driver_branch} ({r.kernel_module_flavor} modules), "
        f"minimum {r.min_driver}, latest known {r.driver_version}",
        f"repository     {r.repo_distro}/{r.repo_arch}",
        "apt packages:",
    ]
    lines += [f"  {p}" for p in apt_specs(r)]
    lines.append("pip constraints:")
    lines += [f"  {name}=={version}" for name, version in sorted(r.wheel_constraints.items())]
    return "\n".join(lines)


def device_ids(values: list[str]) -> tuple[list[str], list[str]]:
    """The PCI ids ``--gpu`` names (ids, names or parts of names; commas split), and one
    problem per value that names no GPU or NVSwitch."""
    ids: list[str] = []
    problems: list[str] = []
    for part in (p.strip() for value in values for p in value.split(",")):
        if not part:
            continue
        found = lookup(part, nvswitch=True)
        if not found:
            problems.append(f"--gpu {part}: {unknown_message(part, nvswitch=True)}")
        if len(found) > 1:
            names = ", ".join(m.name for m in found)
            note = f"note: --gpu {part} is {len(found)} models, all checked: {names}"
            print(note, file=sys.stderr)
        ids += [m.device_id for m in found if m.device_id not in ids]
    return ids, problems


def run(args: argparse.Namespace) -> int:
    """What ``gpufleet matrix`` does: 0 when resolved, 1 when refused, 2 for bad input."""
    os_id, sep, os_version = args.os.partition(":")
    if not sep:
        print(
            f"gpufleet matrix: --os {args.os!r} must be ID:VERSION, e.g. ubuntu:22.04",
            file=sys.stderr,
        )
        return 2
    gpus, problems = device_ids(args.gpu)
    if problems:
        for problem in problems:
            print(f"gpufleet matrix: {problem}", file=sys.stderr)
        return 2
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
            require_cuda_build=not args.no_require_cuda_build,
        )
    except MatrixError as exc:
        if args.json:
            print(json.dumps({"ok": False, "conflicts": exc.conflicts}, indent=2))
        else:
            print(f"refused: {exc}", file=sys.stderr)
        return 1
    if args.json:
        document = {"ok": True, **dataclasses.asdict(resolution)}
        document["apt_packages"] = apt_specs(resolution)  # every name, in install order
        print(json.dumps(document, indent=2))
    else:
        print(_render(resolution))
    return 0
