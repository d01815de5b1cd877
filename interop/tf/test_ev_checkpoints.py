"""Embedding-variable checkpoints of starwire's ps, read by TensorFlow.

`starwire train --embedding hash` keeps the embedding in DeepRec's
embedding variables, one piece per ps, and each ps saves its piece
through SaveV2 under DeepRec's names (<var>-keys, -values, -freqs,
-versions, -partition_offset, the _filtered tensors of ids looked up but
not yet admitted, -partition_filter_offset, and the same for the slot
<var>/Adagrad). TensorFlow's own reader must read every one of them, with
the dtypes and shapes DeepRec's EmbeddingVarCkptData::ExportToCkpt gives
them, and RestoreV2 must restore them by name.

With STARWIRE_EV_TESTDATA=DIR the test also copies the checkpoint it read
into DIR with TensorFlow's listing of it (layout.json): that is
handlers/ops/testdata/ev_checkpoint, which `go test ./handlers/ops/`
checks starwire's current writer against without Python.
"""

import json
import os
import shutil

import numpy as np
import pytest

import harness

NUM_PS = 2
STEPS = 4
DIM = 2
FILTER_FREQ = 2
SAVED_PARTS = 1000  # DeepRec's kSavedPartitionNum

# DeepRec's tensors of a saved embedding variable, and their dtypes: keys
# are the variable's key dtype (int64 here), values its value dtype.
SUFFIXES = {
    "-keys": "int64", "-values": "float32", "-freqs": "int64", "-versions": "int64",
    "-keys_filtered": "int64", "-freqs_filtered": "int64", "-versions_filtered": "int64",
    "-partition_offset": "int32", "-partition_filter_offset": "int32",
}


def ev_names(piece):
    """The saved variables of a ps's piece: the embedding and its slot."""
    var = "embedding/part_%d" % piece
    return [var, var + "/Adagrad"]


def run_training(procs, starwire, ckpt):
    """Trains STEPS steps on NUM_PS starwire ps and one starwire worker,
    each its own process, saving into ckpt once at the end."""
    c = harness.Cluster(procs, starwire, NUM_PS, 1)
    for i in range(NUM_PS):
        c.start_starwire_ps(i, ckpt)
    w = procs.start("starwire-worker0", [
        starwire, "serve", "--job", "worker", "--task", "0", "--protocol", "grpc",
        "--cluster", harness.cluster_flag(c.spec), "--report", "0"])
    w.wait_for(r"serving:", 30)
    train = procs.start("starwire-train", [
        starwire, "train", "--cluster", harness.cluster_flag(c.spec), "--protocol", "grpc",
        "--embedding", "hash", "--checkpoint_dir", ckpt, "--filter_freq", str(FILTER_FREQ),
        "--steps", str(STEPS), "--batch_size", "16", "--fields", "4", "--values", "20",
        "--embedding_dim", str(DIM), "--held_out", "64", "--save_checkpoint_secs", "0",
        "--on_failure", "fail"])
    assert train.wait(120) == 0, train.log()[-3000:]
    return train


def check_offsets(offsets, keys, what):
    """offsets are DeepRec's: int32 [1001], non-decreasing from 0 to the
    row count, part q's rows being keys[offsets[q]:offsets[q+1]], each of
    part id mod 1000 (taken non-negative, as Python's % does)."""
    assert offsets.dtype == np.int32 and offsets.shape == (SAVED_PARTS + 1,), what
    assert offsets[0] == 0 and offsets[-1] == len(keys), what
    assert np.all(np.diff(offsets) >= 0), what
    for q in np.nonzero(np.diff(offsets))[0]:
        part = keys[offsets[q]:offsets[q + 1]]
        assert np.all(part % SAVED_PARTS == q), "%s: part %d holds %s" % (what, q, part)


def check_piece(t, var, piece, primary=None):
    """Checks the tensors t[suffix] of the variable var, saved by ps piece;
    a slot's rows are its primary's, row for row."""
    keys, fkeys = t["-keys"], t["-keys_filtered"]
    n, m = len(keys), len(fkeys)
    assert n > 0 and m > 0, "%s: %d rows, %d filtered ids: want some of each" % (var, n, m)
    assert t["-values"].shape == (n, DIM), var
    for s in ("-freqs", "-versions"):
        assert t[s].shape == (n,), (var, s)
    for s in ("-freqs_filtered", "-versions_filtered"):
        assert t[s].shape == (m,), (var, s)
    assert len(np.unique(keys)) == n and len(np.unique(fkeys)) == m, var
    assert not np.intersect1d(keys, fkeys).size, "%s: an id both admitted and filtered" % var
    # The piece of a ps is the ids of its partition ("mod", as DeepRec's
    # restore takes part q into partition q mod NUM_PS).
    assert np.all(keys % SAVED_PARTS % NUM_PS == piece), var
    assert np.all(fkeys % SAVED_PARTS % NUM_PS == piece), var
    check_offsets(t["-partition_offset"], keys, var + "-partition_offset")
    check_offsets(t["-partition_filter_offset"], fkeys, var + "-partition_filter_offset")
    # Admitted: looked up filter_freq times at least; filtered: fewer.
    assert np.all(t["-freqs"] >= FILTER_FREQ), var
    assert np.all((t["-freqs_filtered"] >= 1) & (t["-freqs_filtered"] < FILTER_FREQ)), var
    # A row's version is the global step of its last update; an id not
    # admitted was never updated.
    assert np.all((t["-versions"] >= 0) & (t["-versions"] <= STEPS)), var
    assert np.any(t["-versions"] > 0), var
    assert np.all(t["-versions_filtered"] == 0), var
    assert np.all(np.isfinite(t["-values"])), var
    if primary is not None:
        for s in ("-keys", "-freqs", "-versions", "-keys_filtered", "-freqs_filtered",
                  "-partition_offset", "-partition_filter_offset"):
            assert np.array_equal(t[s], primary[s]), "%s%s is not its primary's" % (var, s)
        # Adagrad's accumulators start at 0.1 and only grow.
        assert np.all(t["-values"] >= 0.1 - 1e-6), var


@pytest.mark.timeout(240)
def test_tensorflow_reads_embedding_variable_checkpoint(procs, starwire, tmp_path):
    ckpt = str(tmp_path / "ckpt")
    run_training(procs, starwire, ckpt)
    for p in procs.procs:
        p.kill()

    import tensorflow as tf
    state = tf.train.get_checkpoint_state(ckpt)
    prefix = state.model_checkpoint_path
    assert prefix.endswith("model.ckpt-%d" % STEPS), prefix
    listed = dict(tf.train.list_variables(prefix))
    reader = tf.train.load_checkpoint(prefix)
    dtypes = reader.get_variable_to_dtype_map()

    want = {"global_step"} | {v + s for p in range(NUM_PS) for v in ev_names(p) for s in SUFFIXES}
    assert set(listed) == want, sorted(set(listed) ^ want)
    assert reader.get_tensor("global_step") == STEPS

    got = {}
    for name in sorted(listed):
        got[name] = reader.get_tensor(name)
        assert list(got[name].shape) == listed[name], name
        assert dtypes[name].as_numpy_dtype == got[name].dtype, name
    seen = []
    for piece in range(NUM_PS):
        primary = None
        for var in ev_names(piece):
            t = {s: got[var + s] for s in SUFFIXES}
            for s, dt in SUFFIXES.items():
                assert dtypes[var + s].name == dt, (var + s, dtypes[var + s].name)
            check_piece(t, var, piece, primary)
            primary = primary or t
        seen.append(np.concatenate([primary["-keys"], primary["-keys_filtered"]]))
    all_ids = np.concatenate(seen)
    assert len(np.unique(all_ids)) == len(all_ids), "an id saved by two ps"

    # RestoreV2, TensorFlow's kernel, restores every tensor by name.
    names = sorted(n for n in listed if n != "global_step")
    restored = tf.raw_ops.RestoreV2(prefix=prefix, tensor_names=names,
                                    shape_and_slices=[""] * len(names),
                                    dtypes=[dtypes[n] for n in names])
    for name, t in zip(names, restored):
        assert t.dtype == dtypes[name], name
        assert np.array_equal(t.numpy(), got[name]), name

    out = os.environ.get("STARWIRE_EV_TESTDATA")
    if out:
        os.makedirs(out, exist_ok=True)
        base = os.path.basename(prefix)
        for f in os.listdir(ckpt):
            if f.startswith(base + "."):
                shutil.copy(os.path.join(ckpt, f), os.path.join(out, f))
        layout = {
            "prefix": base,
            "tensorflow": tf.__version__,
            "tensors": [{"name": n, "dtype": dtypes[n].name,
                         "dtype_enum": dtypes[n].as_datatype_enum, "shape": listed[n]}
                        for n in sorted(listed)],
        }
        with open(os.path.join(out, "layout.json"), "w") as f:
            json.dump(layout, f, indent=1)
            f.write("\n")
