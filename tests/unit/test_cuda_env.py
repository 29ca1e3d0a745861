"""env.sh and the periodic unit set CUDA's device order, JIT cache and XLA compilation cache."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gpufleet.spec import NodeSpec
from gpufleet.stages import monitoring
from gpufleet.templates import render
from validation.workloads.xla_cache import ROOT_DIRECTORY, cache_directory

PRINT = (
    'for v in CUDA_DEVICE_ORDER CUDA_CACHE_PATH CUDA_CACHE_MAXSIZE; do printenv "$v" || echo -; '
    "done"
)
XLA_FLAG = "--tf_xla_persistent_cache_directory="


def _source(tmp_path: Path, env: dict[str, str], show: str = PRINT, uid: int = 1000) -> list[str]:
    """What ``show`` prints after sourcing env.sh as user ``uid`` (a stand-in ``id``)."""
    env_file = tmp_path / "env.sh"
    env_file.write_text(render("gpufleet-env.sh.j2", env_dir=str(tmp_path / "no-env")))
    tools = tmp_path / "bin"
    tools.mkdir(exist_ok=True)
    (tools / "id").write_text(f'#!/bin/sh\n[ "$1" = -u ] && echo {uid}\n')
    (tools / "id").chmod(0o755)
    done = subprocess.run(
        ["sh", "-e", "-c", f'. "{env_file}"; {show}'],
        env={"PATH": f"{tools}:/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.splitlines()


def test_env_sh_orders_gpus_by_bus_and_keeps_a_4_gib_cache_per_user(tmp_path: Path) -> None:
    order, path, size = _source(tmp_path, {"HOME": "/home/ana"})
    assert order == "PCI_BUS_ID"
    assert path == "/home/ana/.nv/ComputeCache"
    assert int(size) >= 2 * 2**30


def test_env_sh_keeps_what_the_caller_set_and_sets_no_path_without_home(tmp_path: Path) -> None:
    mine = {"CUDA_DEVICE_ORDER": "FASTEST_FIRST", "CUDA_CACHE_PATH": "/scratch/c"}
    assert _source(tmp_path, {"HOME": "/h", **mine, "CUDA_CACHE_MAXSIZE": "1"}) == [
        "FASTEST_FIRST",
        "/scratch/c",
        "1",
    ]
    assert _source(tmp_path, {})[1] == "-"  # no HOME: CUDA's own default, nothing invented


def _environment(service: str) -> dict[str, str]:
    """The unit's Environment= assignments (unquoted ones; PYTHONPATH is quoted)."""
    out = {}
    for line in service.splitlines():
        if line.startswith("Environment=") and not line.startswith('Environment="'):
            key, _, value = line.removeprefix("Environment=").partition("=")
            out[key] = value
    return out


def test_the_periodic_unit_gives_root_a_cache_folder_env_sh_does_not_override(
    tmp_path: Path,
) -> None:
    service = monitoring.unit_texts(NodeSpec(), textfile=False)[
        f"{monitoring.UNIT_DIR}/{monitoring.SERVICE}"
    ]
    assert service is not None
    assert "CacheDirectory=gpufleet/cuda-compute-cache gpufleet/xla-compile-cache\n" in service
    environment = _environment(service)
    assert environment["CUDA_CACHE_PATH"] == "/var/cache/gpufleet/cuda-compute-cache"
    assert int(environment["CUDA_CACHE_MAXSIZE"]) >= 2 * 2**30
    # What the service's wrapper then sees: the unit's values, kept by env.sh.
    assert _source(tmp_path, environment) == [
        "PCI_BUS_ID",
        "/var/cache/gpufleet/cuda-compute-cache",
        str(4 * 2**30),
    ]


def _tf_xla_flags(tmp_path: Path, env: dict[str, str], uid: int = 1000) -> str:
    return _source(tmp_path, env, "printenv TF_XLA_FLAGS || echo -", uid)[0]


def test_env_sh_points_xla_at_a_per_user_compilation_cache(tmp_path: Path) -> None:
    flags = _tf_xla_flags(tmp_path, {"HOME": "/home/ana"})
    assert flags == f"{XLA_FLAG}/home/ana/.cache/gpufleet/xla-compile-cache"
    assert cache_directory({"TF_XLA_FLAGS": flags}) == Path(
        "/home/ana/.cache/gpufleet/xla-compile-cache"
    )
    # The caller's other flags stay, after it.
    mine = _tf_xla_flags(tmp_path, {"HOME": "/h", "TF_XLA_FLAGS": "--tf_xla_auto_jit=2"})
    assert mine == f"{XLA_FLAG}/h/.cache/gpufleet/xla-compile-cache --tf_xla_auto_jit=2"


def test_env_sh_keeps_a_cache_the_caller_named_and_never_splits_an_odd_home(
    tmp_path: Path,
) -> None:
    named = f"--tf_xla_auto_jit=2 {XLA_FLAG}/scratch/x"
    assert _tf_xla_flags(tmp_path, {"HOME": "/h", "TF_XLA_FLAGS": named}) == named
    # TF_XLA_FLAGS splits at spaces: a HOME with one (or a quote) would name another path.
    for home in ("/home/a b", '/home/a"b', "/home/$(x)"):
        assert _tf_xla_flags(tmp_path, {"HOME": home}) == "-"
    assert _tf_xla_flags(tmp_path, {}) == "-"


def test_the_periodic_unit_gives_xla_a_root_owned_cache_env_sh_keeps(tmp_path: Path) -> None:
    service = monitoring.unit_texts(NodeSpec(), textfile=False)[
        f"{monitoring.UNIT_DIR}/{monitoring.SERVICE}"
    ]
    assert service is not None
    environment = _environment(service)
    flags = environment["TF_XLA_FLAGS"]
    assert flags == f"{XLA_FLAG}/var/cache/gpufleet/xla-compile-cache"
    assert _tf_xla_flags(tmp_path, {"HOME": "/root", **environment}, uid=0) == flags


def test_root_shares_the_periodic_units_folder_which_the_deploy_warms(tmp_path: Path) -> None:
    """Root's interactive runs (``gpufleet validate`` over SSH) and the periodic unit use one
    root-owned folder, the one the deploy's warm-up fills; other users keep their own."""
    assert f"/var/cache/{monitoring.XLA_CACHE_DIR}" == ROOT_DIRECTORY
    root = _tf_xla_flags(tmp_path, {"HOME": "/root"}, uid=0)
    assert root == f"{XLA_FLAG}{ROOT_DIRECTORY}"
    assert _tf_xla_flags(tmp_path, {}, uid=0) == root  # whatever HOME says
    mine = _tf_xla_flags(tmp_path, {"HOME": "/root", "TF_XLA_FLAGS": "--tf_xla_auto_jit=2"}, 0)
    assert mine == f"{root} --tf_xla_auto_jit=2"
    assert _tf_xla_flags(tmp_path, {"HOME": "/home/ana"}, uid=1000) == (
        f"{XLA_FLAG}/home/ana/.cache/gpufleet/xla-compile-cache"
    )
