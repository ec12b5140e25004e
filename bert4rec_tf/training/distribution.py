"""`tf.distribute` for the trainer: the strategy by name, which process writes the run, CPU devices."""

from __future__ import annotations

import os
import shutil
import tempfile

import tensorflow as tf


def make_strategy(name: str) -> tf.distribute.Strategy:
    """"default", "mirrored" (all local GPUs, else all logical CPUs) or "multi_worker" (TF_CONFIG)."""
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
        return tf.distribute.MirroredStrategy(devices=[device.name for device in devices])
    if name == "multi_worker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    raise ValueError(f"unknown strategy {name!r}; known: default, mirrored, multi_worker")


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """Whether this process writes the run: always, except for the non-chief workers of a multi-worker run
    (the chief is task "chief", or worker 0 when the cluster has no "chief")."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "chief" or (not has_chief and resolver.task_type == "worker"
                                             and resolver.task_id == 0)


def worker_folder(model_dir: str) -> str:
    """A private copy of `model_dir` for a non-chief worker: it resumes from the chief's files and
    writes its own (identical) checkpoints there, which are removed at the end."""
    scratch = tempfile.mkdtemp(prefix="bert4rec-worker-")
    if os.path.isdir(model_dir):
        shutil.copytree(model_dir, scratch, dirs_exist_ok=True)
    return scratch


def split_cpu(devices: int) -> None:
    """Splits the CPU into `devices` logical devices (to run a strategy on CPU); call before TF starts."""
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * devices)
