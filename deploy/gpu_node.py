"""pyinfra entry point: takes each host to a pinned NVIDIA driver, CUDA stack and TensorFlow.

    pyinfra inventories/prod.py deploy/gpu_node.py --dry    # the plan, stage by stage
    pyinfra inventories/prod.py deploy/gpu_node.py          # apply (idempotent)

The stages live in gpufleet.stages; this file only wires them in order. A host that fails
preflight is left untouched and reported failed; the other hosts carry on. The reboot (and its
wait) comes last but for XLA's warm-up, which needs the driver it boots: a host that does not
come back holds the others only at that operation.
"""

from gpufleet.stages.cluster_tools import cluster_tools
from gpufleet.stages.cuda_stack import cuda_stack
from gpufleet.stages.dcgm import dcgm
from gpufleet.stages.driver import driver
from gpufleet.stages.fleet_cache import fleet_cache
from gpufleet.stages.monitoring import periodic_checks
from gpufleet.stages.nccl_tests import nccl_tests
from gpufleet.stages.node import node_plan
from gpufleet.stages.nvidia_repo import nvidia_repo
from gpufleet.stages.preflight import preflight
from gpufleet.stages.python_env import python_env
from gpufleet.stages.run_guard import run_end, run_start
from gpufleet.stages.scheduler import scheduler_integration
from gpufleet.stages.validation_payload import validation_payload
from gpufleet.stages.xla_warm_up import xla_warm_up
from gpufleet.stamp.gate import stamp_done, stamp_holds

plan = node_plan()  # validates the inventory (stops the whole run on a bad value)
# A host whose last run changed nothing, with every fact and input reading the same now, is
# not planned again (one round trip; gpufleet.stamp). Otherwise every stage, recorded:
if not stamp_holds(plan, deploy_file=__file__):
    fleet_cache(plan=plan)  # group gpufleet_cache: its host first, then every client checks it

    if preflight(plan=plan):
        run_start(plan=plan)  # the host's deploy lock; an interrupted dpkg finished
        nvidia_repo(plan=plan)
        driver(plan=plan)
        cuda_stack(plan=plan)
        dcgm(plan=plan)  # a no-op where DCGM does not apply (the plan says why)
        nccl_tests(plan=plan)  # likewise: multi-GPU hosts
        python_env(plan=plan)
        validation_payload(plan=plan)
        cluster_tools(plan=plan)  # iperf3 and ping for `gpufleet validate --tier cluster`
        periodic_checks(plan=plan)  # a no-op with periodic_checks: False
        scheduler_integration(plan=plan)  # a no-op unless scheduler: slurm
        run_end(plan=plan)  # lock released, then the reboot the driver needs (reboot policy)
        xla_warm_up(plan=plan)  # every XLA step of both tiers compiled once; no-op without GPUs
    stamp_done(plan)  # the plan reached its end: only then may an empty one be stamped
