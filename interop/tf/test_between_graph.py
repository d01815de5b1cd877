"""Between-graph replication in TensorFlow 1.x graph mode on starwire ps.

TensorFlow's own workers (each with its in-process master) train the
model of job.py through MonitoredTrainingSession, their variables placed
by replica_device_setter on starwire `serve --job ps` tasks speaking gRPC.
"""

import os

import numpy as np
import pytest

STEPS = 200


def run_job(cluster, kind, workers, steps, ckpt, *args):
    """Runs job.py's workers against ps of kind; returns each one's losses by step."""
    c = cluster(2, workers)
    c.start_ps(kind, checkpoint_dir=ckpt)
    ws = []
    for i in range(workers):
        ws.append(c.start_worker(i, "--steps", str(steps), "--checkpoint_dir", ckpt, *args))
    for w in ws:
        assert w.wait(300) == 0, w.log()[-3000:]
    return c, [[r for r in w.json_lines() if "loss" in r] for w in ws]


def mean_loss(records):
    return float(np.mean([r["loss"] for r in records]))


# Global steps of the two-worker job: enough that each worker's loss is
# well below the 0.9x of its first that the test asks, also for a worker
# that a loaded machine lets run fewer of them (at 200 the model had only
# begun to learn; the figures are in the commit that set this).
TWO_WORKER_STEPS = 400


def test_two_workers_train_on_starwire_ps(cluster, tmp_path):
    ckpt = str(tmp_path / "ckpt")
    _, runs = run_job(cluster, "starwire", 2, TWO_WORKER_STEPS, ckpt)
    for i, recs in enumerate(runs):
        assert len(recs) > 30, "worker %d ran %d steps" % (i, len(recs))
        first, last = mean_loss(recs[:20]), mean_loss(recs[-20:])
        assert last < 0.9 * first, "worker %d: loss %.4f -> %.4f" % (i, first, last)
    steps = sorted(r["step"] for recs in runs for r in recs)
    assert steps[-1] >= TWO_WORKER_STEPS - 1
    import tensorflow as tf
    names = dict(tf.train.list_variables(ckpt))
    assert names["embedding"] == [1000, 8]
    assert names["embedding/Adagrad"] == [1000, 8]
    assert names["dense/kernel/Adam"] == [8, 1]
    assert tf.train.load_checkpoint(ckpt).get_tensor("global_step") >= TWO_WORKER_STEPS


def test_loss_per_step_matches_tensorflow_ps(cluster, tmp_path):
    """One worker, fixed seeds: every step's loss as on TensorFlow's own ps."""
    _, (ours,) = run_job(cluster, "starwire", 1, STEPS, str(tmp_path / "starwire"))
    _, (theirs,) = run_job(cluster, "tf", 1, STEPS, str(tmp_path / "tf"))
    a = np.array([r["loss"] for r in ours])
    b = np.array([r["loss"] for r in theirs])
    assert len(a) == len(b) == STEPS
    rel = np.abs(a - b) / np.maximum(np.abs(b), 1e-12)
    worst = int(np.argmax(rel))
    print("loss per step, starwire's ps against TensorFlow's: max relative difference "
          "%.3g at step %d of %d" % (rel[worst], worst, STEPS))
    assert rel.max() <= 1e-4, "step %d: starwire %.8f, tensorflow %.8f (rel %.2e)" % (
        worst, a[worst], b[worst], rel[worst])
