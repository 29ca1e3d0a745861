"""pyinfra deploy for the Slurm e2e tests: deploy/gpu_node.py's stages that the health check
judges (driver packages, persistenced, the payload) plus scheduler_integration; the Python
environment (TensorFlow) is left out to keep the locked sandbox run short."""

from gpufleet.stages.driver import driver
from gpufleet.stages.node import node_plan
from gpufleet.stages.nvidia_repo import nvidia_repo
from gpufleet.stages.preflight import preflight
from gpufleet.stages.run_guard import run_end, run_start
from gpufleet.stages.scheduler import scheduler_integration
from gpufleet.stages.validation_payload import validation_payload

plan = node_plan()

if preflight(plan=plan):
    run_start(plan=plan)
    nvidia_repo(plan=plan)
    driver(plan=plan)
    validation_payload(plan=plan)
    scheduler_integration(plan=plan)
    run_end(plan=plan)
