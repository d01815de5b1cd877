"""TensorFlow 2's ParameterServerStrategy on starwire ps.

The chief (ps_strategy_job.py) runs a ClusterCoordinator; TensorFlow's own
workers (tf.distribute.Server) run its closures; the ps are starwire
`serve --job ps --protocol grpc` tasks, which serve the eager service the
coordinator and the workers place variables and run functions through.
Each task is a process of its own. The same jobs on TensorFlow's ps are
the reference.
"""

import json
import os
import signal
import time

import numpy as np
import pytest

import harness

JOB = os.path.join(harness.HERE, "ps_strategy_job.py")
STEPS = 200


def start_cluster(cluster, kind, workers, ckpt=None):
    """Two ps of kind ("starwire" or "tf"), TensorFlow workers, a chief's
    address; returns the harness.Cluster."""
    c = cluster(2, workers, extra_jobs={"chief": 1})
    c.start_ps(kind, checkpoint_dir=ckpt)
    for i in range(workers):
        c.start_tf_task("worker", i)
    return c


def start_chief(c, procs, *args):
    return procs.start("chief", [harness.PY, JOB, "--cluster", json.dumps(c.spec)] + list(args),
                       env=harness.tf_env())


def run_chief(c, procs, *args, timeout=600):
    """Runs the chief to its end; returns the JSON lines it printed."""
    p = start_chief(c, procs, *args)
    assert p.wait(timeout) == 0, p.log()[-3000:]
    return p.json_lines()


def losses(lines, key="step"):
    return np.array([r["loss"] for r in lines if key in r])


def done(lines):
    (d,) = [r for r in lines if r.get("done")]
    return d


def placed_on_both_ps(lines):
    (ready,) = [r for r in lines if r.get("ready")]
    return ready["devices"] == ["/job:ps/replica:0/task:0/device:CPU:0",
                                "/job:ps/replica:0/task:1/device:CPU:0"]


@pytest.mark.timeout(2400)
def test_custom_loop_loss_matches_tensorflow_ps(cluster, procs):
    """One worker, fixed data and initial values: every step's loss of a
    custom loop (embedding and dense layers sharded over both ps, Adagrad)
    as on TensorFlow's own ps."""
    args = ["--mode", "custom", "--steps", str(STEPS), "--partition", "--optimizer", "adagrad"]
    ours = run_chief(start_cluster(cluster, "starwire", 1), procs, *args, timeout=900)
    procs.close()
    theirs = run_chief(start_cluster(cluster, "tf", 1), procs, *args, timeout=900)
    assert placed_on_both_ps(ours)
    a, b = losses(ours), losses(theirs)
    assert len(a) == len(b) == STEPS
    rel = np.abs(a - b) / np.maximum(np.abs(b), 1e-12)
    worst = int(np.argmax(rel))
    assert rel.max() <= 1e-4, "step %d: starwire %.8f, tensorflow %.8f (rel %.2e)" % (
        worst, a[worst], b[worst], rel[worst])
    assert a[-50:].mean() < 0.9 * a[:20].mean(), "loss did not fall: %s" % a
    print("custom loop, %d steps: starwire %.2f steps/s, tensorflow %.2f steps/s" % (
        STEPS, done(ours)["steps_per_s"], done(theirs)["steps_per_s"]))


@pytest.mark.timeout(1500)
def test_fit_saves_and_a_fresh_cluster_restores(cluster, procs, tmp_path):
    """tf_keras Model.fit with two workers; the coordinator's
    tf.train.Checkpoint, written by the starwire ps, restores into a fresh
    cluster of new processes, which trains on."""
    ckpt = str(tmp_path / "ckpt")
    os.makedirs(ckpt)
    c = start_cluster(cluster, "starwire", 2, ckpt=ckpt)
    first = run_chief(c, procs, "--mode", "fit", "--steps", "20", "--epochs", "3", "--partition",
                      "--checkpoint_dir", ckpt)
    assert placed_on_both_ps(first)
    fl = losses(first, "epoch")
    assert len(fl) == 3 and fl[-1] < fl[0], fl
    saved = done(first)["checksum"]
    procs.close()

    c = start_cluster(cluster, "starwire", 2, ckpt=ckpt)
    again = run_chief(c, procs, "--mode", "fit", "--steps", "20", "--epochs", "1", "--partition",
                      "--checkpoint_dir", ckpt, "--restore")
    (restored,) = [r for r in again if "restored" in r]
    assert restored["restored"], again
    assert abs(restored["checksum"] - saved) <= 1e-6 * max(1.0, abs(saved)), (restored, saved)
    al = losses(again, "epoch")
    assert len(al) == 1 and al[0] < fl[0], (al, fl)


@pytest.mark.timeout(600)
def test_killed_ps_reaches_the_coordinator_named(cluster, procs):
    """A starwire ps killed mid-training: the coordinator raises what
    TensorFlow's contract promises, UnavailableError or AbortedError naming
    the ps, within seconds."""
    c = start_cluster(cluster, "starwire", 1)
    chief = start_chief(c, procs, "--mode", "custom", "--steps", "100000", "--partition")
    chief.wait_for(r'"step": 10,', 300)
    killed = time.monotonic()
    os.killpg(c.ps[1].popen.pid, signal.SIGKILL)
    assert chief.wait(120) == 3, chief.log()[-3000:]
    (err,) = [r for r in chief.json_lines() if "error" in r]
    assert err["error"] in ("UnavailableError", "AbortedError"), err
    assert "/job:ps/replica:0/task:1" in err["message"], err
    secs = err["at"] - killed
    print("ps killed -> coordinator's %s in %.1f s" % (err["error"], secs))
    assert secs < 30, err


@pytest.mark.timeout(600)
def test_killed_worker_closures_are_rescheduled(cluster, procs):
    """A TensorFlow worker killed mid-training: the coordinator runs its
    closures on the other worker, as on TensorFlow's ps, and every step
    completes."""
    c = start_cluster(cluster, "starwire", 2)
    steps = 60
    chief = start_chief(c, procs, "--mode", "custom", "--steps", str(steps), "--partition",
                        "--join_every")
    chief.wait_for(r'"step": 10,', 300)
    worker1 = [p for p in procs.procs if p.name == "tf-worker1"][0]
    os.killpg(worker1.popen.pid, signal.SIGKILL)
    assert chief.wait(400) == 0, chief.log()[-3000:]
    got = losses(chief.json_lines())
    assert len(got) == steps and np.all(np.isfinite(got)), got
