"""A deploy of one operation behind gpufleet's deploy stamp, for tests/unit/test_stamp_cli.py.

Planned on @local: node_plan() probes this machine (an OS gpufleet does not provision, so the
plan says why and preflight would refuse it; the stamp only needs the plan's inputs).
"""

from pyinfra import host
from pyinfra.api.exceptions import OperationError
from pyinfra.operations import files

from gpufleet.stages.node import node_plan
from gpufleet.stamp.gate import stamp_done, stamp_holds

plan = node_plan()
if not stamp_holds(plan, deploy_file=__file__):
    files.directory(name="the test's directory", path=host.data.x_stamp_target)
    if host.data.get("x_stamp_raise"):  # a plan that stops with an error before its end
        raise OperationError("the test's deploy stops while planning")
    stamp_done(plan)
