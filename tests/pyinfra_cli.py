"""The pyinfra command line as the tests start it: one place for how (this venv's pyinfra, the
repository on PYTHONPATH, no progress bar, no stdin), for the unit tier's @fake and @local runs
and for the integration tier's.

    done = pyinfra_cli.run(inventory, pyinfra_cli.GPU_NODE, "--dry", "--json")
    done, plan = pyinfra_cli.plan(inventory)   # --dry --json, the plan's operations
    done = pyinfra_cli.deploy(inventory, "--json", "--limit", "gfsb-h1")  # -y: a real run
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PYINFRA = str(Path(sys.executable).with_name("pyinfra"))
GPU_NODE = ROOT / "deploy" / "gpu_node.py"
# An environment with nothing of this machine's but the system PATH: what a plan must not need.
BARE = {"PATH": "/usr/bin:/bin"}


def environment(
    base: Mapping[str, str] | None = None, env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``base`` (this process's environment when None; `BARE` for a bare one), plus
    PYTHONPATH, PYINFRA_PROGRESS=off and ``env``."""
    environment = {**(os.environ if base is None else base), "PYTHONPATH": str(ROOT)}
    environment.update({"PYINFRA_PROGRESS": "off", **(env or {})})
    return environment


def run(
    *args: str | Path,
    base: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``pyinfra ARGS`` in the repository root, in `environment` (base, env)."""
    return subprocess.run(
        [PYINFRA, *map(str, args)],
        cwd=ROOT,
        env=environment(base, env),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def json_of(done: subprocess.CompletedProcess[str]) -> Any:
    """The JSON pyinfra printed; an AssertionError with its stderr's tail when it printed none."""
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError:
        raise AssertionError(
            f"pyinfra printed no JSON (exit {done.returncode}):\n{done.stderr[-3000:]}"
        ) from None


def plan(
    inventory: str | Path, deploy: str | Path = GPU_NODE, *extra: str, **options: Any
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """``pyinfra INVENTORY DEPLOY --dry --json EXTRA``: the run and its plan's operations."""
    done = run(inventory, deploy, "--dry", "--json", *extra, **options)
    return done, json_of(done)["plan"]


def confirmed(args: tuple[str | Path, ...]) -> list[str | Path]:
    """``-y`` before ARGS for a real run. A dry run goes without it: ``-y`` also turns pyinfra's
    change detection off (``State(check_for_changes=not yes)``), and a dry run with it would
    report no change at all."""
    return [*([] if "--dry" in args else ["-y"]), *args]


def deploy(
    inventory: str | Path,
    *args: str | Path,
    deploy: str | Path = GPU_NODE,
    env: Mapping[str, str] | None = None,
    timeout: float = 1800,
) -> subprocess.CompletedProcess[str]:
    """``pyinfra [-y] ARGS INVENTORY DEPLOY``: a deploy (real unless ARGS hold ``--dry``)."""
    return run(*confirmed(args), inventory, deploy, env=env, timeout=timeout)


def start(
    inventory: str | Path,
    *args: str | Path,
    deploy: str | Path = GPU_NODE,
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[str]:
    """`deploy` started, not waited for: for a test that cuts it off or holds it midway."""
    return subprocess.Popen(
        [PYINFRA, *map(str, confirmed(args)), str(inventory), str(deploy)],
        cwd=ROOT,
        env=environment(None, env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def failure(done: subprocess.CompletedProcess[str], limit: int = 8000) -> str:
    """Why a pyinfra run failed, for an assertion message: every line its failed hosts printed
    but "Success"/"No changes" (the error, its command and stderr), then its output's tail. A
    bare tail loses the error of a host that failed early in a long deploy."""
    failed: list[str] = []
    with contextlib.suppress(json.JSONDecodeError, AttributeError):
        failed = list((json.loads(done.stdout).get("results") or {}).get("failed_hosts", []))
    lines = (done.stdout + "\n" + done.stderr).splitlines()
    ok = ("] Success", "] No changes")
    marks = tuple(f"[{host}]" for host in failed) or ("Error", "error:")
    picked = [
        line for line in lines if any(m in line for m in marks) and not line.rstrip().endswith(ok)
    ]
    head = "\n".join(picked)[:limit]
    tail = done.stderr[-3000:]
    return f"pyinfra exit {done.returncode}, failed hosts {failed}:\n{head}\n--- tail:\n{tail}"
