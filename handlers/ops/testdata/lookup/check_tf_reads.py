"""Checks that TensorFlow reads the lookup-table checkpoint a starwire ps writes.

Run from the module root with TensorFlow 2.21 (CPU):

    /work/tfvenv/bin/python handlers/ops/testdata/lookup/check_tf_reads.py

It runs the Go test TestTableCheckpointForTensorFlow, which replays the steps
of steps.json on a starwire ps up to its sharded Saver's save and copies the
checkpoint out. Then, in TensorFlow:
  - tf.train.load_checkpoint reads every tensor TensorFlow's own checkpoint of
    the same steps (ckpt/) holds, with its dtype and shape: a hash table's
    rows as the same key -> value map, a dense table's buckets exactly;
  - a tf.compat.v1 Saver restores it into gen.py's graph, and the lookups of
    the steps after TensorFlow's own restore return what they returned there.
Exits non-zero on the first difference.
"""

import base64
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
tf1 = tf.compat.v1


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def as_map(keys, values):
    keys = [k.tobytes() if isinstance(k, np.ndarray) else
            (k if isinstance(k, bytes) else np.asarray(k).tobytes()) for k in keys]
    return {k: np.asarray(v).tobytes() if not isinstance(v, bytes) else v
            for k, v in zip(keys, values)}


def compare_checkpoints(ours, theirs):
    r_ours = tf.train.load_checkpoint(ours)
    r_theirs = tf.train.load_checkpoint(theirs)
    shapes_ours = r_ours.get_variable_to_shape_map()
    shapes_theirs = r_theirs.get_variable_to_shape_map()
    if set(shapes_ours) != set(shapes_theirs):
        fail(f"tensors {sorted(shapes_ours)} vs TensorFlow's {sorted(shapes_theirs)}")
    dtypes_ours = r_ours.get_variable_to_dtype_map()
    dtypes_theirs = r_theirs.get_variable_to_dtype_map()
    for name in sorted(shapes_theirs):
        if dtypes_ours[name] != dtypes_theirs[name]:
            fail(f"{name}: dtype {dtypes_ours[name]} vs {dtypes_theirs[name]}")
        if name.endswith("-values"):
            continue
        table = name[: -len("-keys")]
        ko, vo = r_ours.get_tensor(name), r_ours.get_tensor(table + "-values")
        kt, vt = r_theirs.get_tensor(name), r_theirs.get_tensor(table + "-values")
        if table.startswith("d"):  # dense tables: their buckets, exactly
            same = ko.shape == kt.shape and (ko == kt).all() and (vo == vt).all()
        else:
            same = ko.shape == kt.shape and as_map(ko, vo) == as_map(kt, vt)
        if not same:
            fail(f"{table}: ours\n{ko}\n{vo}\nTensorFlow's\n{kt}\n{vt}")
        print(f"ok  {table}: {ko.shape[0]} rows as TensorFlow's")


def decode(w):
    shape = w["shape"]
    if w["dtype"] == "string":
        return np.array([base64.b64decode(s) for s in w["strings"]], object).reshape(shape)
    dt = {"int64": np.int64, "int32": np.int32, "float": np.float32}[w["dtype"]]
    return np.array(w["values"], dt).reshape(shape)


def restore_and_look_up(prefix):
    steps = json.load(open(os.path.join(HERE, "steps.json")))["steps"]
    after = steps[[s["name"] for s in steps].index("restore") + 1:]
    g, n, saver = gen.build_graph(device="/cpu:0")
    with tf1.Session(graph=g) as sess:
        saver.restore(sess, prefix)
        for s in after:
            feeds = {g.get_tensor_by_name(k): decode(v) for k, v in s["feeds"].items()}
            fetches = [g.get_tensor_by_name(f) for f in s["fetches"]]
            got = sess.run(fetches, feeds)
            for f, o, w in zip(s["fetches"], got, s["want"]):
                if not np.array_equal(np.asarray(o), decode(w)):
                    fail(f"step {s['name']!r}: {f} = {o}, TensorFlow's {decode(w)}")
            print(f"ok  {s['name']}")


def main():
    out = tempfile.mkdtemp()
    env = dict(os.environ, STARWIRE_TABLE_CHECKPOINT_DIR=out)
    subprocess.run(["go", "test", "-count=1", "-run", "^TestTableCheckpointForTensorFlow$",
                    "./handlers/ops/"], cwd=ROOT, env=env, check=True)
    prefix = os.path.join(out, "model.ckpt")
    compare_checkpoints(prefix, os.path.join(HERE, "ckpt", "model.ckpt"))
    restore_and_look_up(prefix)
    print("TensorFlow reads the checkpoint starwire wrote")


if __name__ == "__main__":
    main()
