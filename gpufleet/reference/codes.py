"""docs/reference/diagnose-codes.md: every `gpufleet diagnose` code with its severity and fix."""

from __future__ import annotations

from gpufleet.parsers.diagnosis import codes_markdown
from gpufleet.reference.markdown import page

INTRO = """\
Paste any log or command output into `gpufleet diagnose` (a file, or standard input), a failed
deploy's included: it names the known failure signatures (driver, CUDA, TensorFlow, and
provisioning: dpkg, apt, disk space, SSH, reboots; DCGM's own errors) with a fix, and exits 1
when it finds an error. `gpufleet diagnose --codes` prints this table. Troubleshooting by
symptom: [troubleshooting](../howto/troubleshooting.md)."""


def render() -> str:
    return page("Diagnose codes", INTRO, codes_markdown())
