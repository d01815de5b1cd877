"""A TensorFlow 1.x client whose hash tables live on the ps.

`python tables_client.py --ps ADDR --worker ADDR --ckpt_dir DIR`: this
process is the worker (and the master); it builds a graph whose
tf.lookup.experimental.MutableHashTable and DenseHashTable, their ops and a
sharded Saver are all placed on /job:ps/task:0, runs inserts, lookups,
removes, sizes and exports, saves into DIR, changes the tables, restores,
and looks up again; then it reads the checkpoint with
tf.train.load_checkpoint. Every outcome is one JSON line, in order, with
MutableHashTable exports sorted by key (their order is the table's own).
test_tables.py runs it against TensorFlow's ps and starwire's and compares.
"""

import argparse
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1
tf1.disable_eager_execution()


def plain(v):
    """A fetched value as JSON."""
    a = np.asarray(v)
    if a.dtype.kind in "SO":
        return [x.decode("latin-1") for x in a.reshape(-1)]
    return a.tolist()


def sorted_export(keys, values):
    order = sorted(range(len(keys)), key=lambda i: keys[i])
    return [[plain(keys)[i] for i in order], [plain(values[i]) for i in order]]


def build():
    n = {}
    with tf1.device("/job:ps/task:0"):
        emb = tf.lookup.experimental.MutableHashTable(
            tf.int64, tf.float32, default_value=[0.0, 0.0, 0.0], name="emb")
        cnt = tf.lookup.experimental.MutableHashTable(
            tf.string, tf.int64, default_value=-1, name="cnt")
        dense = tf.lookup.experimental.DenseHashTable(
            tf.int64, tf.float32, default_value=-1.0, empty_key=-1, deleted_key=-2,
            initial_num_buckets=8, name="dense")
        n["ek"] = tf1.placeholder(tf.int64, [None])
        n["ev"] = tf1.placeholder(tf.float32, [None, 3])
        n["ck"] = tf1.placeholder(tf.string, [None])
        n["cv"] = tf1.placeholder(tf.int64, [None])
        n["dk"] = tf1.placeholder(tf.int64, [None])
        n["dv"] = tf1.placeholder(tf.float32, [None])
        n["emb_insert"] = emb.insert(n["ek"], n["ev"])
        n["emb_find"] = emb.lookup(n["ek"])
        n["emb_remove"] = emb.remove(n["ek"])
        n["emb_export"] = emb.export()
        n["cnt_insert"] = cnt.insert(n["ck"], n["cv"])
        n["cnt_find"] = cnt.lookup(n["ck"])
        n["dense_insert"] = dense.insert(n["dk"], n["dv"])
        n["dense_find"] = dense.lookup(n["dk"])
        n["dense_remove"] = dense.remove(n["dk"])
        n["dense_export"] = dense.export()
        n["sizes"] = [emb.size(), cnt.size(), dense.size()]
        n["saver"] = tf1.train.Saver(sharded=True)
    return n


def run(sess, name, fetch, feeds=None):
    try:
        out = sess.run(fetch, feeds or {})
        rec = {"step": name, "ok": True}
        if name.endswith("export") and "dense" not in name:
            rec["value"] = sorted_export(*out)
        elif out is not None:
            rec["value"] = plain(out) if not isinstance(out, (list, tuple)) else [plain(o) for o in out]
    except tf.errors.OpError as e:
        rec = {"step": name, "ok": False, "error": type(e).__name__}
    print(json.dumps(rec), flush=True)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--ps", required=True)
    p.add_argument("--worker", required=True)
    p.add_argument("--ckpt_dir", required=True)
    args = p.parse_args(argv)
    cluster = tf.train.ClusterSpec({"ps": [args.ps], "worker": [args.worker]})
    server = tf.distribute.Server(cluster, job_name="worker", task_index=0, protocol="grpc")
    n = build()
    prefix = os.path.join(args.ckpt_dir, "model.ckpt")
    ids = np.array([3, 1 << 40, -9, 11, 19, 27, 35, 4, 100], np.int64)
    with tf1.Session(server.target) as s:
        run(s, "emb insert", n["emb_insert"], {n["ek"]: ids, n["ev"]: np.arange(27, dtype=np.float32).reshape(9, 3)})
        run(s, "emb find", n["emb_find"], {n["ek"]: np.array([3, 5, -9, 1 << 40], np.int64)})
        run(s, "emb remove", n["emb_remove"], {n["ek"]: np.array([3, 77], np.int64)})
        run(s, "emb insert bad shape", n["emb_insert"], {n["ek"]: ids[:2], n["ev"]: np.zeros((3, 3), np.float32)})
        run(s, "cnt insert", n["cnt_insert"], {n["ck"]: np.array([b"a", b"bb", b""], object), n["cv"]: np.array([1, 2, 3], np.int64)})
        run(s, "cnt find", n["cnt_find"], {n["ck"]: np.array([b"bb", b"zz", b""], object)})
        # Eight buckets at 0.8 hold six keys: this insert grows the table.
        run(s, "dense insert", n["dense_insert"], {n["dk"]: ids, n["dv"]: np.arange(9, dtype=np.float32) / 2})
        run(s, "dense remove", n["dense_remove"], {n["dk"]: np.array([11, 12], np.int64)})
        run(s, "dense find", n["dense_find"], {n["dk"]: np.array([3, 11, 19, 5, 1 << 40], np.int64)})
        run(s, "dense find deleted key", n["dense_find"], {n["dk"]: np.array([-2], np.int64)})
        run(s, "sizes", n["sizes"])
        run(s, "emb export", n["emb_export"])
        run(s, "dense export", n["dense_export"])
        saved = n["saver"].save(s, prefix)
        print(json.dumps({"step": "save", "ok": saved == prefix}), flush=True)
        run(s, "emb insert after save", n["emb_insert"], {n["ek"]: ids[:2], n["ev"]: np.full((2, 3), -1, np.float32)})
        run(s, "dense insert after save", n["dense_insert"], {n["dk"]: np.array([5, 3], np.int64), n["dv"]: np.array([-1, -1], np.float32)})
        n["saver"].restore(s, prefix)
        run(s, "emb find after restore", n["emb_find"], {n["ek"]: ids})
        run(s, "dense export after restore", n["dense_export"])
        run(s, "sizes after restore", n["sizes"])
    r = tf.train.load_checkpoint(prefix)
    shapes = r.get_variable_to_shape_map()
    print(json.dumps({"step": "load_checkpoint", "ok": True,
                      "value": sorted([name, list(shapes[name])] for name in shapes)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
