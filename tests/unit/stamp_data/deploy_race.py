"""A deploy that reads one witnessed fact behind gpufleet's deploy stamp (KeyringFingerprints of
``x_keyring``), for tests/unit/test_review_low_findings.py (review finding 7)."""

from pyinfra import host
from pyinfra.operations import files

from gpufleet.operations.probes import KeyringFingerprints
from gpufleet.stages.node import node_plan
from gpufleet.stamp.gate import stamp_done, stamp_holds

plan = node_plan()
if not stamp_holds(plan, deploy_file=__file__):
    host.get_fact(KeyringFingerprints, path=host.data.x_keyring)
    files.directory(name="the test's directory", path=host.data.x_stamp_target)
    stamp_done(plan)
