"""Checkpoints both ways between starwire ps tasks and TensorFlow.

job.py trains with a sharded Saver under MonitoredTrainingSession: each
ps saves its own variables (SaveV2), the chief's master merges the shards
(MergeV2Checkpoints), and a new session restores the newest checkpoint
(RestoreV2 on each ps). What starwire ps tasks save, TensorFlow reads
(tf.train.load_checkpoint, a SavedModel export); what TensorFlow's own ps
saved, starwire ps tasks restore and train on from, and the other way.
"""

import os

import numpy as np
import pytest

import harness

STEPS = 12  # the first job's steps
MORE = 8  # the steps a job restored from its checkpoint goes on for
NUM_PS = 2


def train(procs, starwire, kind, ckpt, steps, *args, num_ps=NUM_PS):
    """Runs job.py's chief alone against num_ps ps of kind ("starwire" or
    "tf") with checkpoint_dir ckpt until global step steps; returns its
    loss records. The tasks are ended when it is done."""
    c = harness.Cluster(procs, starwire, num_ps, 1)
    if kind == "tf":
        c.start_tf_ps_at_once()
    else:
        for i in range(num_ps):
            # What TensorFlow sent, beside the logs, for a failure's post-mortem.
            rec = os.path.join(procs.log_dir, "record-%d-ps%d" % (len(procs.procs), i))
            c.start_starwire_ps(i, ckpt, ["--record_dir", rec])
    w = c.start_worker(0, "--steps", str(steps), "--checkpoint_dir", ckpt,
                       "--save_steps", "1000", *args)
    try:
        code = w.wait(300)
    except AssertionError as e:
        # A TensorFlow master waits for a ps that is gone as long as it
        # takes: say which ps ended, and how.
        raise AssertionError("%s\n%s" % (e, "\n".join(
            "%s: %s" % (p.name, "running" if p.popen.poll() is None else
                        "exited %s: %s" % (p.popen.returncode, harness.tail(p.log(), 3)))
            for p in c.ps.values())))
    finally:
        for p in c.ps.values():
            p.kill()
    assert code == 0, w.log()[-4000:]
    return [r for r in w.json_lines() if "loss" in r]


def load(path):
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def assert_same_values(got, want, what):
    assert sorted(got) == sorted(want), what
    for name in want:
        assert got[name].dtype == want[name].dtype, "%s: %s dtype" % (what, name)
        assert got[name].shape == want[name].shape, "%s: %s shape" % (what, name)
        assert np.array_equal(got[name], want[name]), "%s: %s values" % (what, name)


def trained_on(kind, starwire, tmp_path_factory):
    """Trains a job STEPS steps on ps of kind; yields its checkpoint
    directory and the values its worker fetched after the last step."""
    d = tmp_path_factory.mktemp("trained-" + kind)
    procs = harness.Procs(str(d))
    ckpt, values = str(d / "ckpt"), str(d / "values.npz")
    try:
        recs = train(procs, starwire, kind, ckpt, STEPS, "--dump_values", values)
        assert len(recs) == STEPS, procs.logs()
        yield ckpt, load(values)
    finally:
        procs.close()


@pytest.fixture(scope="module")
def trained(starwire, tmp_path_factory):
    """A job trained on starwire ps tasks (see trained_on)."""
    yield from trained_on("starwire", starwire, tmp_path_factory)


@pytest.fixture(scope="module")
def tf_trained(starwire, tmp_path_factory):
    """A job trained on TensorFlow's ps (see trained_on)."""
    yield from trained_on("tf", starwire, tmp_path_factory)


def test_tensorflow_reads_starwire_checkpoint(trained):
    """tf.train.list_variables and load_checkpoint see every variable the
    worker has, with its dtype, shape and the value it fetched last."""
    import tensorflow as tf
    ckpt, values = trained
    state = tf.train.get_checkpoint_state(ckpt)
    assert state.model_checkpoint_path.endswith("model.ckpt-%d" % STEPS)
    listed = dict(tf.train.list_variables(ckpt))
    assert listed == {k: list(v.shape) for k, v in values.items()}
    reader = tf.train.load_checkpoint(ckpt)
    dtypes = reader.get_variable_to_dtype_map()
    got = {}
    for name in listed:
        got[name] = reader.get_tensor(name)
        assert dtypes[name].as_numpy_dtype == values[name].dtype, name
    assert_same_values(got, values, "starwire's checkpoint")
    assert got["global_step"] == STEPS
    assert got["embedding/Adagrad"].shape == (1000, 8)


def test_tensorflow_checkpoint_restores_on_starwire(tf_trained, procs, starwire, tmp_path):
    """A checkpoint TensorFlow's ps saved restores into starwire ps tasks
    through the same graph, and training goes on from it as it does on
    TensorFlow's ps from the same checkpoint."""
    ckpt, values = tf_trained
    mine, theirs = str(tmp_path / "ckpt"), str(tmp_path / "ckpt-tf")
    harness.copy_checkpoints(ckpt, mine)
    harness.copy_checkpoints(ckpt, theirs)
    restored = str(tmp_path / "restored.npz")
    ours = train(procs, starwire, "starwire", mine, STEPS + MORE, "--dump_restored", restored)
    assert_same_values(load(restored), values, "starwire ps restored from TensorFlow's checkpoint")
    on_tf = train(procs, starwire, "tf", theirs, STEPS + MORE)
    assert len(ours) == len(on_tf) == MORE
    assert min(r["step"] for r in ours) >= STEPS
    a = np.array([r["loss"] for r in ours])
    b = np.array([r["loss"] for r in on_tf])
    np.testing.assert_allclose(a, b, rtol=1e-4)
    import tensorflow as tf
    assert tf.train.load_checkpoint(mine).get_tensor("global_step") == STEPS + MORE


def test_tensorflow_checkpoint_repartitions_on_starwire(tf_trained, procs, starwire, tmp_path):
    """Saved by two TensorFlow ps, restored into three starwire ps: each
    part of the embedding and its slots is read across the two saved
    slices, and what the three save again TensorFlow reads whole."""
    ckpt, values = tf_trained
    mine = str(tmp_path / "ckpt")
    harness.copy_checkpoints(ckpt, mine)
    restored = str(tmp_path / "restored.npz")
    recs = train(procs, starwire, "starwire", mine, STEPS + MORE, "--dump_restored", restored,
                 "--dump_values", str(tmp_path / "values.npz"), num_ps=3)
    assert_same_values(load(restored), values, "three starwire ps restored from two TensorFlow ps")
    assert len(recs) == MORE
    import tensorflow as tf
    reader = tf.train.load_checkpoint(mine)
    saved = {name: reader.get_tensor(name) for name, _ in tf.train.list_variables(mine)}
    assert_same_values(saved, load(str(tmp_path / "values.npz")), "three starwire ps' checkpoint")
    assert saved["global_step"] == STEPS + MORE


def test_starwire_checkpoint_restores_on_tensorflow(trained, procs, starwire, tmp_path):
    """The other way: TensorFlow's ps restore what starwire's saved."""
    ckpt, values = trained
    mine = str(tmp_path / "ckpt")
    harness.copy_checkpoints(ckpt, mine)
    restored = str(tmp_path / "restored.npz")
    recs = train(procs, starwire, "tf", mine, STEPS + MORE, "--dump_restored", restored)
    assert_same_values(load(restored), values,
                       "TensorFlow's ps restored from starwire's checkpoint")
    assert len(recs) == MORE and min(r["step"] for r in recs) >= STEPS


def test_saved_model_of_starwire_training(trained, procs, tmp_path):
    """TensorFlow exports the model trained on starwire ps as a SavedModel
    (its own process, restoring the checkpoint), and tf.saved_model.load
    serves it with the trained values."""
    ckpt, _ = trained
    export = str(tmp_path / "export")
    p = procs.start("export", [harness.PY, os.path.join(harness.HERE, "export_model.py"),
                               "--checkpoint_dir", ckpt, "--export_dir", export,
                               "--num_ps", str(NUM_PS)], env=harness.tf_env())
    assert p.wait(120) == 0, p.log()[-3000:]

    import tensorflow as tf
    serve = tf.saved_model.load(export).signatures["serving_default"]
    ids = np.random.RandomState(3).randint(0, 1000, size=(16, 4)).astype(np.int64)
    got = serve(ids=tf.constant(ids))

    reader = tf.train.load_checkpoint(ckpt)
    emb = reader.get_tensor("embedding")
    # Trained: not the values the job started from.
    start = tf.train.load_checkpoint(os.path.join(ckpt, "model.ckpt-0"))
    assert not np.array_equal(emb, start.get_tensor("embedding"))
    assert not np.array_equal(reader.get_tensor("dense/kernel"), start.get_tensor("dense/kernel"))
    # The "mod" strategy job.py looks ids up with: id i is row i // NUM_PS
    # of part i % NUM_PS, the parts being the whole's consecutive rows.
    assert emb.shape[0] % NUM_PS == 0
    rows = emb.shape[0] // NUM_PS * (ids % NUM_PS) + ids // NUM_PS
    logits = (emb[rows].mean(axis=1) @ reader.get_tensor("dense/kernel")
              + reader.get_tensor("dense/bias"))
    np.testing.assert_allclose(got["logits"].numpy(), logits, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["prob"].numpy(), 1 / (1 + np.exp(-logits)), rtol=1e-5, atol=1e-6)
