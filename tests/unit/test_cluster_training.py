"""The cluster job's verdicts and TF_CONFIG, from worker documents (no TensorFlow here)."""

from __future__ import annotations

import json

from gpufleet.cluster import training
from gpufleet.cluster.config import ClusterHost, endpoint, tf_config


def host(name: str, gpu_less: bool = True) -> ClusterHost:
    return ClusterHost(
        name, f"a-{name}", f"10.0.0.{name[-1]}", "/py", "/p", 10, gpu_less, False, None
    )


HOSTS = [host("h1"), host("h2"), host("h3")]


def doc(weights: list[float], loss: float = 0.5, speed: float = 1000.0) -> dict:
    import hashlib
    import struct

    digest = hashlib.sha256(struct.pack(f"{len(weights)}f", *weights)).hexdigest()
    return {
        "weights": weights,
        "weights_sha256": digest,
        "final_loss": loss,
        "examples_per_s": speed,
    }


def outcome(*docs: dict, names: tuple[str, ...] = ("h1", "h2", "h3")) -> training.JobOutcome:
    return training.JobOutcome(documents=dict(zip(names, docs, strict=True)))


def test_tf_config_lists_every_host_once_in_inventory_order() -> None:
    config = json.loads(tf_config(HOSTS, 2))
    assert config == {
        "cluster": {"worker": ["10.0.0.1:23456", "10.0.0.2:23456", "10.0.0.3:23456"]},
        "task": {"type": "worker", "index": 2},
    }
    assert endpoint("fd00::5", 23456) == "[fd00::5]:23456"


def test_identical_workers_that_agree_with_one_host_pass_and_cpu_speed_is_not_judged() -> None:
    w = [0.1, 0.2, 0.3]
    single = outcome(doc([0.1, 0.2, 0.30000003]), names=("h1",))
    section = training.judge(outcome(doc(w), doc(w), doc(w)), single, HOSTS)
    assert section["status"] == "pass" and section["identical_weights"] is True
    assert section["speed"] == {"status": "not_applicable", "reason": "no GPU"}
    assert "weights" not in section["workers"][0]


def test_a_worker_with_other_weights_fails_the_job_and_is_named() -> None:
    w = [0.1, 0.2, 0.3]
    single = outcome(doc(w), names=("h1",))
    section = training.judge(outcome(doc(w), doc([0.1, 0.2, 0.31]), doc(w)), single, HOSTS)
    assert section["status"] == "fail" and section["named"] == "h2"
    assert "h2 differ" in section["reason"]


def test_workers_that_agree_with_each_other_but_not_with_one_host_fail() -> None:
    w = [0.1, 0.2, 0.3]
    single = outcome(doc([0.1, 0.2, 0.4], loss=0.6), names=("h1",))
    section = training.judge(outcome(doc(w), doc(w), doc(w)), single, HOSTS)
    assert section["status"] == "fail" and section["named"] is None
    assert "single-host run by 0.1" in section["reason"] and "final loss" in section["reason"]


def test_a_failed_worker_is_the_named_host() -> None:
    failed = training.JobOutcome({}, "the worker on h3 exited 137 (killed by signal 9)", "h3")
    section = training.judge(failed, outcome(doc([0.1]), names=("h1",)), HOSTS)
    assert section["status"] == "fail" and section["named"] == "h3"


def test_gpu_hosts_get_a_scaling_figure() -> None:
    gpus = [host("h1", False), host("h2", False)]
    w = [0.1]
    group = outcome(doc(w, speed=1800.0), doc(w, speed=1800.0), names=("h1", "h2"))
    section = training.judge(group, outcome(doc(w, speed=1000.0), names=("h1",)), gpus)
    assert section["speed"]["scaling_efficiency"] == 0.9


def test_worker_environment_hides_gpus_only_on_gpu_less_hosts() -> None:
    env = training.worker_env(HOSTS[0], "{}")
    assert env["CUDA_VISIBLE_DEVICES"] == "-1" and env["TF_CONFIG"] == "{}"
    assert "CUDA_VISIBLE_DEVICES" not in training.worker_env(host("h1", False), None)
