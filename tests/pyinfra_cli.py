"""The pyinfra command line as the tests start it: one place for how (this venv's pyinfra, the
repository on PYTHONPATH, no progress bar, no stdin), for the unit tier's @fake and @local runs
and for the integration tier's.

    done = pyinfra_cli.run(inventory, pyinfra_cli.GPU_NODE, "--dry", "--json")
    done, plan = pyinfra_cli.plan(inventory)   # --dry --json, the plan's operations
"""

from __future__ import annotations

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


def run(
    *args: str | Path,
    base: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``pyinfra ARGS`` in the repository root. The environment is ``base`` (this process's
    when None; `BARE` for a bare one), plus PYTHONPATH, PYINFRA_PROGRESS=off and ``env``."""
    environment = {**(os.environ if base is None else base), "PYTHONPATH": str(ROOT)}
    environment.update({"PYINFRA_PROGRESS": "off", **(env or {})})
    return subprocess.run(
        [PYINFRA, *map(str, args)],
        cwd=ROOT,
        env=environment,
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
