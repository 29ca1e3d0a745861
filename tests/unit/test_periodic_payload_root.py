"""The periodic runner starts the workloads with the payload's root on PYTHONPATH: that root
must be the folder holding the validation package, wherever the runner's module sits."""

from __future__ import annotations

from validation.periodic import checks


def test_the_payload_root_holds_the_validation_package() -> None:
    assert (checks.PAYLOAD_ROOT / "validation" / "__init__.py").is_file(), checks.PAYLOAD_ROOT
    assert (checks.PAYLOAD_ROOT / "validation" / "workloads" / "bundle.py").is_file()
