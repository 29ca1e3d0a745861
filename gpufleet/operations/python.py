"""Python environments for TensorFlow: Miniforge, conda envs, venvs, and a checked pip install."""

from __future__ import annotations

import hashlib
import re

from pyinfra import host, logger
from pyinfra.api import HiddenValue, OperationError, QuoteString, StringCommand, operation
from pyinfra.facts.files import FileContents

from gpufleet.matrix import locks
from gpufleet.operations.env_check import EnvProblems, checked_pins, stray_pth
from gpufleet.operations.probes import PathExists, PipVersion
from gpufleet.operations.stdin import FETCH, PRIVATE_TMP, SECRET_ENV, secret_lines

# Runs inside the environment (through the gpufleet-python wrapper, so the CUDA wheels are on
# the library path): exits non-zero with a reason unless TensorFlow is the wanted version and,
# when asked, a CUDA build.
_SELF_CHECK = """\
import sys
import tensorflow as tf
built = tf.test.is_built_with_cuda()
print("gpufleet self-check: tensorflow", tf.__version__, "built with CUDA:", built)
if tf.__version__ != sys.argv[1]:
    sys.exit("gpufleet: tensorflow " + tf.__version__ + " imported, " + sys.argv[1] + " wanted")
if sys.argv[2] == "cuda" and not built:
    sys.exit("gpufleet: this TensorFlow was not built with CUDA; install tensorflow[and-cuda]")
"""


# $1: expected sha256, $2: installation root; stdin: proxy, pip index (unused), installer URL.
# Download, check and run happen in one root shell on one private copy (mktemp -d, mode 700),
# so nothing can change the installer between its check and its run; a mismatch is deleted
# with the directory.
_MINIFORGE = (
    "set -e\n"
    + PRIVATE_TMP
    + SECRET_ENV
    + "name=installer.sh\n"
    + FETCH
    + r"""got=$(sha256sum < "$tmp/installer.sh" | cut -d' ' -f1)
if [ "$got" != "$1" ]; then
  echo "gpufleet: the Miniforge installer at miniforge_url has sha256 $got, expected $1;" \
    "not running it. Fix: check miniforge_url, miniforge_version and miniforge_sha256." >&2
  exit 1
fi
bash "$tmp/installer.sh" -b -u -p "$2"
"""
)


@operation()
def miniforge(
    url: str | HiddenValue, sha256: str, root: str, proxy: str | HiddenValue | None = None
):
    """
    Download the Miniforge installer, check its sha256 and run it, in one command on one
    private copy, unless conda is already installed in ``root``.

    + url: the installer's URL (sent on stdin: it may carry credentials)
    + sha256: the installer's sha256 (64 lower-case hex digits)
    + root: installation directory, e.g. ``/opt/gpufleet/miniforge3``
    + proxy: HTTP proxy for the download (sent on stdin)

    **Example:**

    .. code:: python

        miniforge(
            url="https://github.com/conda-forge/miniforge/releases/download/25.3.0-3/"
            "Miniforge3-25.3.0-3-Linux-x86_64.sh",
            sha256="1b57f8cb991982063f79b56176881093abb1dc76d73fda32102afde60585b5a1",
            root="/opt/gpufleet/miniforge3",
        )
    """
    if not re.fullmatch(r"[0-9a-f]{64}", sha256):
        raise OperationError(f"miniforge: sha256 {sha256!r} is not 64 lower-case hex digits")
    if host.get_fact(PathExists, path=f"{root}/bin/conda"):
        host.noop(f"Miniforge is installed in {root}")
        return
    yield StringCommand(
        "sh -c",
        QuoteString(_MINIFORGE),
        "gpufleet-miniforge",
        sha256,
        QuoteString(root),
        _stdin=secret_lines(proxy=proxy, url=url),
    )


# conda-forge only: `--override-channels -c conda-forge` keeps out whatever other channels a
# .condarc on the host lists (Anaconda's `defaults` with its terms of service among them).
CONDA_CHANNEL = "conda-forge"


@operation()
def conda_env(conda: str, env_dir: str, python_version: str, channel: str = CONDA_CHANNEL):
    """
    Create a conda environment at ``env_dir`` with Python ``python_version`` and pip, from
    ``channel`` alone, without a prompt.

    + conda: the conda executable
    + env_dir: environment prefix
    + python_version: e.g. ``"3.11"``
    + channel: the one channel to install from (a name the .condarc's channel_alias maps)

    **Example:**

    .. code:: python

        conda_env(
            conda="/opt/gpufleet/miniforge3/bin/conda",
            env_dir="/opt/gpufleet/miniforge3/envs/tf",
            python_version="3.11",
        )
    """
    if not re.fullmatch(r"[0-9]+\.[0-9]+(\.[0-9]+)?", python_version):
        raise OperationError(f"conda_env: python_version {python_version!r} is not like 3.11")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", channel):
        raise OperationError(f"conda_env: channel {channel!r} is not a channel name")
    if host.get_fact(PathExists, path=f"{env_dir}/bin/python"):
        host.noop(f"conda environment {env_dir} exists")
        return
    yield StringCommand(
        QuoteString(conda),
        "create --yes --quiet --override-channels --channel",
        QuoteString(channel),
        "--prefix",
        QuoteString(env_dir),
        QuoteString(f"python={python_version}"),
        "pip",
    )


@operation()
def venv(
    env_dir: str,
    python: str = "python3",
    uv: str | None = None,
    python_version: str = "",
    proxy: str | HiddenValue | None = None,
):
    """
    Create a virtual environment at ``env_dir`` with ``python -m venv``, or with uv.

    + env_dir: environment directory
    + python: the interpreter for ``-m venv``
    + uv: path of a uv executable; when given, ``uv venv --seed --python python_version``
    + python_version: the Python uv provides, e.g. ``"3.11"``
    + proxy: HTTP proxy uv downloads a Python through (sent on stdin)

    **Example:**

    .. code:: python

        venv(env_dir="/opt/gpufleet/venvs/tf")
    """
    if uv and not python_version:
        raise OperationError("venv: uv needs python_version")
    if host.get_fact(PathExists, path=f"{env_dir}/bin/python"):
        host.noop(f"virtual environment {env_dir} exists")
        return
    if uv:
        yield StringCommand(
            *with_secrets(),
            QuoteString(uv),
            "venv --seed --python",
            QuoteString(python_version),
            QuoteString(env_dir),
            _stdin=secret_lines(proxy=proxy),
        )
    else:
        yield StringCommand(QuoteString(python), "-m venv", QuoteString(env_dir))


def _stamp_lines(requirement: str, lock_sha256: str) -> list[str]:
    return [f"requirement {requirement}", f"lock-sha256 {lock_sha256}"]


def checked_lock(requirement: str, lock_text: str) -> str:
    """The lock's sha256 once every line is ``name==version --hash=sha256:...`` and it pins
    ``requirement`` (``name[extras]==version``); ``OperationError`` otherwise."""
    try:
        pins = locks.parse_lock(lock_text)
    except locks.LockError as exc:
        raise OperationError(f"pip_install_checked: {exc}") from None
    name, _, version = requirement.partition("==")
    wanted = locks.normalize(name.split("[", 1)[0].strip())
    if not any(pin.name == wanted and pin.version == version.strip() for pin in pins):
        raise OperationError(
            f"pip_install_checked: the lock does not pin {requirement}. Fix: regenerate it "
            f"with {locks.MAKE_LOCKS}."
        )
    return hashlib.sha256(lock_text.encode()).hexdigest()


@operation()
def pip_install_checked(
    python: str,
    requirement: str,
    tf_version: str,
    lock: str,
    lock_text: str,
    stamp: str,
    check_python: str,
    index_url: str | HiddenValue | None = None,
    trusted_host: str | None = None,
    require_cuda_build: bool = True,
    proxy: str | HiddenValue | None = None,
):
    """
    Install a hashed lock with ``pip install --require-hashes --no-deps -r lock`` (pip refuses
    any file whose sha256 the lock does not list), check nothing is missing (``pip check``) and
    that TensorFlow imports (as a CUDA build, when asked), then record the lock's digest in
    ``stamp``; a run whose stamp already matches does nothing. Does nothing only when
    the stamp matches and the environment really holds the lock (every pin's files as pip
    recorded them, size and sha256, and no ``.pth`` file no package recorded: ``EnvProblems``);
    otherwise removes such ``.pth`` files and reinstalls with ``--force-reinstall``.

    + python: the environment's python
    + requirement: the locked TensorFlow, e.g. ``"tensorflow[and-cuda]==2.21.0"``
    + tf_version: the version the import must report
    + lock: path of the lock on the host (written before, e.g. with ``files.content``)
    + lock_text: its content, checked here: every line ``==`` pinned with a ``--hash``
    + stamp: file recording the installed requirement and the lock's sha256
    + check_python: interpreter for the self-check (the ``gpufleet-python`` wrapper)
    + index_url: pip index (mirror), may be a ``HiddenValue`` carrying credentials
    + trusted_host: host pip may reach without TLS verification (the hashes still hold)
    + require_cuda_build: fail unless ``tf.test.is_built_with_cuda()``
    + proxy: HTTP proxy for pip (``index_url`` and ``proxy`` go on stdin, never in argv)

    **Example:**

    .. code:: python

        pip_install_checked(
            python="/opt/gpufleet/venvs/tf/bin/python",
            requirement="tensorflow[and-cuda]==2.21.0",
            tf_version="2.21.0",
            lock="/opt/gpufleet/venvs/tf/etc/gpufleet/requirements.lock.txt",
            lock_text=locks.lock_text("tensorflow[and-cuda]", "2.21.0"),
            stamp="/opt/gpufleet/venvs/tf/etc/gpufleet/installed.txt",
            check_python="/usr/local/bin/gpufleet-python",
        )
    """
    wanted = _stamp_lines(requirement, checked_lock(requirement, lock_text))
    # The stamp says what the last checked install was; the environment itself says whether it
    # is still there (a cut-off install or a deleted package directory leave the stamp as is).
    pins = checked_pins(requirement, locks.parse_lock(lock_text))  # every pin of the lock
    problems = host.get_fact(EnvProblems, python=python, requirements=pins)
    if problems is None:  # the check's command itself failed: nothing says the env is sound
        problems = ["the environment check did not run"]
    stray, installed = (
        stray_pth(python, problems),
        host.get_fact(FileContents, path=stamp) == wanted,
    )
    if installed and not problems:
        host.noop(f"{requirement} is installed and checked")
        return
    if problems:
        logger.info(f"{host.print_prefix}environment {python}: {'; '.join(problems)}")
    if installed and len(stray) == len(problems):  # only .pth files no package put there
        yield StringCommand("rm -f", *map(QuoteString, stray))
        return
    # The stamp goes first and comes back only after the check passed.
    yield StringCommand("rm -f", QuoteString(stamp), *map(QuoteString, stray))
    # --force-reinstall: pip trusts the metadata of a half-installed package ("Requirement
    # already satisfied"); an install that is redone at all is redone in full.
    yield StringCommand(
        *with_secrets(),
        QuoteString(python),
        "-m pip install --disable-pip-version-check --no-input --force-reinstall",
        "--require-hashes --no-deps",
        *_trusted_args(trusted_host),
        "-r",
        QuoteString(lock),
        _stdin=secret_lines(proxy=proxy, index_url=index_url),
    )
    # --no-deps trusts the lock to be complete; pip check proves it for this host's markers.
    yield StringCommand(QuoteString(python), "-m pip check --disable-pip-version-check")
    yield StringCommand(
        QuoteString(check_python),
        "-c",
        QuoteString(_SELF_CHECK),
        QuoteString(tf_version),
        "cuda" if require_cuda_build else "any",
    )
    yield StringCommand(
        "printf '%s\\n'", *[QuoteString(line) for line in wanted], ">", QuoteString(stamp)
    )


@operation()
def pip_tool(
    python: str,
    package: str,
    executable: str,
    index_url: str | HiddenValue | None = None,
    trusted_host: str | None = None,
    proxy: str | HiddenValue | None = None,
    lock: str | None = None,
    lock_text: str | None = None,
):
    """
    ``pip install`` a command-line tool into an environment unless its executable exists; with
    ``lock``, from that hashed lock (``--require-hashes --no-deps -r``) instead of by name.

    + python: the environment's python
    + package: pip requirement, e.g. ``"uv"``
    + executable: the file the package installs, e.g. ``/opt/gpufleet/tools/bin/uv``
    + index_url: pip index (mirror), may be a ``HiddenValue``
    + trusted_host: host pip may reach without TLS verification
    + proxy: HTTP proxy for pip (sent on stdin, as ``index_url``)
    + lock: path of the tool's hashed lock on the host (written before)
    + lock_text: its content, checked here: it must pin ``package`` (``name==version``)

    **Example:**

    .. code:: python

        pip_tool(python="/opt/gpufleet/tools/bin/python", package="uv==0.13.8",
                 executable="/opt/gpufleet/tools/bin/uv")
    """
    if (lock is None) != (lock_text is None):
        raise OperationError("pip_tool: lock and lock_text go together")
    if lock_text is not None:
        checked_lock(package, lock_text)
    if host.get_fact(PathExists, path=executable):
        host.noop(f"{executable} exists")
        return
    if lock is not None:
        what = ["--require-hashes --no-deps", *_trusted_args(trusted_host), "-r", QuoteString(lock)]
    else:
        what = [*_trusted_args(trusted_host), "--", QuoteString(package)]
    yield StringCommand(
        *with_secrets(),
        QuoteString(python),
        "-m pip install --disable-pip-version-check --no-input",
        *what,
        _stdin=secret_lines(proxy=proxy, index_url=index_url),
    )


@operation()
def pip_at_least(
    python: str,
    minimum: str,
    requirement: str,
    lock: str,
    lock_text: str,
    index_url: str | HiddenValue | None = None,
    trusted_host: str | None = None,
    proxy: str | HiddenValue | None = None,
):
    """
    Upgrade an environment's pip from its hashed lock unless it is ``minimum`` or newer.

    + python: the environment's python; minimum: the oldest pip that will do, e.g. ``"20.3"``
    + requirement: the lock's pinned pip, e.g. ``"pip==26.0.1"``
    + lock: path of that hashed lock on the host (written before); lock_text: its content
    + index_url, trusted_host, proxy: as for ``pip_install_checked``

    **Example:** ``pip_at_least(python=".../bin/python", minimum="20.3", requirement=
    "pip==26.0.1", lock=".../pip.lock.txt", lock_text=tool_lock_text("pip==26.0.1"))``
    """
    checked_lock(requirement, lock_text)
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)*", minimum):
        raise OperationError(f"pip_at_least: minimum {minimum!r} is not a version like 20.3")
    found = host.get_fact(PipVersion, python=python)
    numbers = [int(n) for n in re.findall(r"[0-9]+", found or "")[:3]]
    if found and numbers >= [int(n) for n in minimum.split(".")]:
        host.noop(f"pip {found} in {python} is new enough (>= {minimum})")
        return
    yield StringCommand(
        *with_secrets(),
        QuoteString(python),
        "-m pip install --disable-pip-version-check --no-input --require-hashes --no-deps",
        *_trusted_args(trusted_host),
        "-r",
        QuoteString(lock),
        _stdin=secret_lines(proxy=proxy, index_url=index_url),
    )


def with_secrets() -> list:
    """The start of a command that first reads the proxy and pip index from stdin into its
    environment (``stdin.SECRET_ENV``), then runs the rest: ``sh -c '...' gpufleet-env CMD``."""
    return ["sh -c", QuoteString(SECRET_ENV + 'exec "$@"\n'), "gpufleet-env"]


def _trusted_args(trusted_host: str | None) -> list:
    """pip's ``--trusted-host`` for a mirror, quoted for the shell."""
    return ["--trusted-host", QuoteString(trusted_host)] if trusted_host else []
