"""Finding 16 (issue 10): every bad input the security audit tried on the control node, and more
of the same kinds, gives a clear error (or a report that names the bad file), never a traceback.

The cases run the real `gpufleet` entry point (gpufleet.cli.main) in this process, so an
exception fails the test with its traceback; diagnose's strict-UTF-8 stdin runs as a
subprocess, as a shell would start it. CASES counts every input tried.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpufleet.cli import main as gpufleet
from gpufleet.validate.baseline import safe_name
from tests.unit import fleet_factory as ff

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Case:
    """One bad input: how to set it up in a temp dir, the argv, what must come back."""

    name: str
    setup: Callable[[Path], list[str]]  # returns the argv after `gpufleet`
    codes: tuple[int, ...]  # the documented exit status(es)
    says: tuple[str, ...]  # each must appear in stdout+stderr (what is wrong, the fix)


# ---- gpufleet validate ------------------------------------------------------------------------


def _inventory(tmp: Path, data: dict, name: str = "gpu-a") -> Path:
    path = tmp / "inv.py"
    path.write_text(f"hosts = [({name!r}, {data!r})]\n")
    return path


def validate_with(data: dict, *extra: str, name: str = "gpu-a") -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        results = ["--results-dir", str(tmp / "results")]
        return ["validate", str(_inventory(tmp, data, name)), *results, *extra]

    return setup


def validate_output(kind: str) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        (tmp / "file").write_text("not a directory\n")
        (tmp / "dir").mkdir()
        inventory = str(_inventory(tmp, {"tf_versoin": 1}))
        results = ["--results-dir", str(tmp / "results")]
        return {
            "results-file": ["validate", inventory, "--results-dir", str(tmp / "file")],
            "results-under-file": ["validate", inventory, "--results-dir", str(tmp / "file/x")],
            "junit-under-file": ["validate", inventory, *results, "--junit-xml", f"{tmp}/file/j"],
            "junit-dir": ["validate", inventory, *results, "--junit-xml", str(tmp / "dir")],
        }[kind]

    return setup


VALIDATE = [
    Case("ssh_user with a quote", validate_with({"ssh_user": 'ops"x'}), (2,), ("ssh_user",)),
    Case("ssh_user with @", validate_with({"ssh_user": "a@b"}), (2,), ("not a user name",)),
    Case(
        "strict host key maybe",
        validate_with({"ssh_strict_host_key_checking": "maybe"}),
        (2,),
        ("ssh_strict_host_key_checking", "fix it"),
    ),
    Case("ssh_port 70000", validate_with({"ssh_port": 70000}), (2,), ("1 to 65535",)),
    Case(
        "ssh_port text", validate_with({"ssh_port": "ssh"}), (2,), ("ssh_port", "not an instance")
    ),
    Case(
        "ssh_key with a newline",
        validate_with({"ssh_key": "/k\nProxyCommand id"}),
        (2,),
        ("ssh_key", "control character"),
    ),
    Case(
        "known_hosts with a quote",
        validate_with({"ssh_known_hosts_file": '/k"h'}),
        (2,),
        ("ssh_known_hosts_file", "double quote"),
    ),
    Case(
        "ssh_config_file with a newline",
        validate_with({"ssh_config_file": "/c\nHost *"}),
        (2,),
        ("ssh_config_file",),
    ),
    Case(
        "ssh_hostname with a shell",
        validate_with({"ssh_hostname": "a $(id) b"}),
        (2,),
        ("is not a host name", "fix the inventory"),
    ),
    Case("host name -oX", validate_with({}, name="-oProxyCommand=id"), (2,), ("host name",)),
    Case(
        "malformed proxy URL",
        validate_with({"apt_proxy": "http://u:pw@[::1"}),
        (2,),
        ("Invalid IPv6 URL", "apt_proxy = '***'"),  # the spec's own message (sechost)
    ),
    Case(
        "malformed pip URL",
        validate_with({"pip_index_url": "https://[::1/simple"}),
        (2,),
        ("Invalid IPv6 URL",),
    ),
    Case("non-UTF-8 host name", validate_with({}, name="gpu-\udcff"), (2,), ("gpu-\\udcff",)),
    Case("non-UTF-8 env_name", validate_with({"env_name": "tf\udcff"}), (0, 1, 2), ()),
    Case("--results-dir a file", validate_output("results-file"), (2,), ("not a directory",)),
    Case(
        "--results-dir under a file",
        validate_output("results-under-file"),
        (2,),
        ("--results-dir", "writable directory"),
    ),
    Case(
        "--junit-xml under a file",
        validate_output("junit-under-file"),
        (2,),
        ("--junit-xml", "not a directory"),
    ),
    Case("--junit-xml a directory", validate_output("junit-dir"), (2,), ("pass a file path",)),
]

# ---- gpufleet drift (argument checks that come before any plan) ------------------------------


def drift_results(kind: str) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        (tmp / "file").write_text("x")
        target = {"file": tmp / "file", "under": tmp / "file" / "sub"}[kind]
        inventory = str(_inventory(tmp, {}))
        deploy = str(ROOT / "deploy" / "gpu_node.py")
        return [
            "drift",
            inventory,
            "--deploy",
            deploy,
            "--no-validation",
            "--results-dir",
            str(target),
        ]

    return setup


DRIFT = [
    Case("drift --results-dir a file", drift_results("file"), (2,), ("not a directory",)),
    Case("drift --results-dir under a file", drift_results("under"), (2,), ("--results-dir",)),
]

# ---- gpufleet report: results directories x {terminal, --html, --json} ------------------------


def _good(tmp: Path, host: str = "gpu-a", **changes: object) -> Path:
    doc = ff.document(host, started_at=ff.when(1), workloads=ff.gpu_workloads())
    doc.update(changes)
    path = tmp / "results" / safe_name(host) / f"{doc['run_id']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def _workload_with(**fields: object) -> dict:
    return {**ff.gpu_workloads()[0], **fields}


DEEP = "[" * 200_000 + "]" * 200_000


def results_dir(kind: str) -> Callable[[Path], Path]:
    """A results directory holding one kind of bad file (plus, mostly, one good host)."""

    def setup(tmp: Path) -> Path:
        root = tmp / "results"
        if kind == "binary run":
            _good(tmp, "gpu-b")
            (root / "gpu-a").mkdir(parents=True)
            (root / "gpu-a" / "20261201T000000Z-aaaaaa.json").write_bytes(b"\xff\xfe\x00{")
        elif kind in ("binary drift.json", "deep drift.json"):
            _good(tmp).with_name("drift.json").write_bytes(
                b"\xff\xfe" if kind.startswith("binary") else DEEP.encode()
            )
        elif kind in ("binary baseline.json", "deep baseline.json"):
            _good(tmp).with_name("baseline.json").write_bytes(
                b"\xff\xfe" if kind.startswith("binary") else DEEP.encode()
            )
        elif kind == "deep run":
            _good(tmp, "gpu-b")
            (root / "gpu-a").mkdir(parents=True)
            (root / "gpu-a" / "r.json").write_text(DEEP)
        elif kind == "metrics list":
            _good(tmp, workloads=[_workload_with(metrics=[1, 2])])
        elif kind == "config string":
            _good(tmp, workloads=[_workload_with(config="x")])
        elif kind == "thresholds list":
            _good(tmp, workloads=[_workload_with(config={"thresholds": [1]})])
        elif kind == "gpus of strings":
            _good(tmp, gpu_health={"gpus": ["x"], "findings": []})
        elif kind == "temperature text":
            health = ff.gpu_health()
            health["gpus"][0]["temperature_c"] = "hot"
            del health["gpus"][1]["name"]
            _good(tmp, gpu_health=health)
        elif kind == "mathtext host":
            _good(tmp, r"gpu-$\frac{$-a")
        elif kind == "markup host":
            _good(tmp, "gpu-[/x]")
        elif kind == "drift.json odd types":
            _good(tmp).with_name("drift.json").write_text(
                json.dumps({"changes": "x", "validation_failures": [1, "x"], "status": []})
            )
        elif kind == "run is a directory":
            _good(tmp, "gpu-b")
            (root / "gpu-a" / "r.json").mkdir(parents=True)
        elif kind == "run is a symlink loop":
            _good(tmp, "gpu-b")
            (root / "gpu-a").mkdir(parents=True)
            (root / "gpu-a" / "r.json").symlink_to("r.json")
        elif kind == "run is a JSON list":
            _good(tmp, "gpu-b")
            (root / "gpu-a").mkdir(parents=True)
            (root / "gpu-a" / "r.json").write_text("[]")
        elif kind == "surrogates in a document":
            path = _good(tmp)
            doc = json.loads(path.read_text())
            doc["host"], doc["checks"][0]["message"] = "gpu-\udcff", "bad \udcfe"
            path.write_text(json.dumps(doc))
        elif kind == "non-UTF-8 folder name":
            _good(tmp, "gpu-b")
            folder = root / b"gpu-\xff".decode("utf-8", "surrogateescape")
            folder.mkdir()
            (folder / "r.json").write_bytes(b"\xff")
        elif kind == "only unreadable":
            (root / "gpu-a").mkdir(parents=True)
            (root / "gpu-a" / "r.json").write_bytes(b"\x80")
        return root

    return setup


# kind -> (exit codes, words in the output: the bad file named)
# A host whose only run cannot be read is an `error` row: exit 1 (docs/reference/exit-codes.md).
REPORT_DIRS = {
    "binary run": ((1,), ("20261201T000000Z-aaaaaa.json",)),
    "binary drift.json": ((0,), ("drift.json",)),
    "binary baseline.json": ((0,), ("baseline",)),
    "deep run": ((1,), ("nested too deeply",)),
    "deep drift.json": ((0,), ("drift.json",)),
    "deep baseline.json": ((0,), ("baseline",)),
    "metrics list": ((0,), ("gpu-a",)),
    "config string": ((0,), ("gpu-a",)),
    "thresholds list": ((0,), ("gpu-a",)),
    "gpus of strings": ((0,), ("gpu-a",)),
    "temperature text": ((0,), ("gpu-a",)),
    "mathtext host": ((0,), ("frac",)),
    "markup host": ((0,), ("gpu-[/x]",)),
    "drift.json odd types": ((0,), ("gpu-a",)),
    "run is a directory": ((1,), ("r.json",)),
    "run is a symlink loop": ((1,), ("r.json",)),
    "run is a JSON list": ((1,), ("r.json",)),
    "surrogates in a document": ((0,), ("gpu-",)),
    "non-UTF-8 folder name": ((1,), ("r.json",)),
    "only unreadable": ((2,), ("r.json", "run `gpufleet validate")),
}


def report_case(kind: str, mode: str) -> Case:
    codes, says = REPORT_DIRS[kind]

    def setup(tmp: Path) -> list[str]:
        root = results_dir(kind)(tmp)
        extra = {"terminal": [], "json": ["--json"], "html": ["--html", str(tmp / "r.html")]}
        return ["report", str(root), *extra[mode]]

    # --json escapes non-ASCII; the names asked for are ASCII, except in the markup case.
    return Case(f"report {kind} ({mode})", setup, codes, says)


def report_args(kind: str) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        _good(tmp)
        (tmp / "file").write_text("x")
        root = str(tmp / "results")
        return {
            "html dir": ["report", root, "--html", str(tmp)],
            "html under file": ["report", root, "--html", str(tmp / "file" / "r.html")],
            "results is a file": ["report", str(tmp / "file")],
            "bad margin": ["report", root, "--figure-margin", "xla"],
        }[kind]

    return setup


REPORT = [report_case(k, m) for k in REPORT_DIRS for m in ("terminal", "json", "html")] + [
    Case("report --html a directory", report_args("html dir"), (2,), ("pass a file path",)),
    Case("report --html under a file", report_args("html under file"), (2,), ("--html",)),
    Case("report results a file", report_args("results is a file"), (2,), ("not a directory",)),
    Case("report bad --figure-margin", report_args("bad margin"), (2,), ("KEY=FRACTION",)),
]

# ---- gpufleet diagnose ------------------------------------------------------------------------


def diagnose_file(kind: str) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        (tmp / "bin.log").write_bytes(
            b"\xff\xfe NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"
        )
        return {
            "directory": ["diagnose", str(tmp)],
            "missing": ["diagnose", str(tmp / "absent.log")],
            "binary file": ["diagnose", str(tmp / "bin.log")],
        }[kind]

    return setup


DIAGNOSE = [
    Case("diagnose a directory", diagnose_file("directory"), (2,), ("cannot read", "log file")),
    Case("diagnose a missing file", diagnose_file("missing"), (2,), ("cannot read",)),
    Case("diagnose a non-UTF-8 file", diagnose_file("binary file"), (1,), ("nvidia-smi",)),
]

CASES = VALIDATE + DRIFT + REPORT + DIAGNOSE


def test_finding16_the_table_covers_every_input_of_the_audit():
    # 37 tracebacks in the audit; every kind it names is in the table, most of them x3 modes.
    assert len(CASES) + 1 >= 37, len(CASES)  # +1: diagnose's stdin, below


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_finding16_bad_input_gives_a_clear_error_not_a_traceback(case, tmp_path, capsys):
    argv = case.setup(tmp_path)
    code = gpufleet(argv)  # an exception here is the traceback the finding is about
    out, err = capsys.readouterr()
    assert code in case.codes, (code, out, err)
    assert "Traceback" not in out + err
    # The terminal table wraps long messages; validate's full message is the run_error.
    errors = []
    if argv[0] == "validate":
        for path in tmp_path.glob("results/*/*.json"):
            errors.append(json.loads(path.read_text())["run_error"] or "")
    shown = "\n".join([out, err, *errors])
    for words in case.says:
        assert words in shown, (words, out, err, errors)
    if case.name.startswith("--"):
        # Output paths are checked before any host runs: nothing was written anywhere.
        assert not list(tmp_path.rglob("*.json")), list(tmp_path.rglob("*.json"))


def test_finding16_invalid_utf8_on_diagnose_stdin(tmp_path):
    """As a UTF-8 locale's Python reads stdin (strict): stray bytes in a log are no crash."""
    proc = subprocess.run(
        [sys.executable, "-m", "gpufleet.cli", "diagnose", "-"],
        input=b"\xff\xfe Failed to initialize NVML: Driver/library version mismatch\n",
        capture_output=True,
        env={**os.environ, "PYTHONIOENCODING": "utf-8:strict", "PYTHONPATH": str(ROOT)},
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert b"Traceback" not in proc.stderr
    assert b"nvml-driver-library-mismatch" in proc.stdout
