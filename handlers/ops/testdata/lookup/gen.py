"""Writes the lookup-table test data the Go tests of package ops replay.

Run with TensorFlow 2.21 (CPU):

    /work/tfvenv/bin/python handlers/ops/testdata/lookup/gen.py

It starts a ps and a worker as tf.distribute.Server in this process, builds a
tf.compat.v1 graph whose hash tables (tf.lookup.experimental.MutableHashTable
and DenseHashTable), feeds, lookups and sharded Saver all live on the ps, and
runs a sequence of steps through a session on the worker. For every step it
records the ps partition the master registered (RunMetadata.partition_graphs),
the feeds, and what TensorFlow fetched or the error it raised. The Go test
replays the steps on a starwire ps and compares. It also keeps the checkpoint
TensorFlow saved, which the Go test restores.

Outputs, next to this script:
  graphs/<name>.pbtxt   the ps partition of each distinct step
  steps.json            the steps in order, with TensorFlow's results
  ckpt/                 the checkpoint the "save" step wrote (TensorFlow's)
"""

import base64
import json
import os
import re
import shutil
import socket
import tempfile

import numpy as np
import tensorflow as tf
from google.protobuf import text_format

tf1 = tf.compat.v1
tf1.disable_eager_execution()

HERE = os.path.dirname(os.path.abspath(__file__))
PS = "/job:ps/replica:0/task:0/device:CPU:0"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_graph(device=PS):
    """The model: every table and op on the ps (or on device). Returns the
    graph, a dict of the tensors and ops steps refer to by name, and the
    Saver."""
    g = tf.Graph()
    n = {}
    with g.as_default(), tf.device(device):
        emb = tf.lookup.experimental.MutableHashTable(
            tf.int64, tf.float32, default_value=[0.0, 0.0, 0.0, 0.0], name="emb")
        cnt = tf.lookup.experimental.MutableHashTable(
            tf.string, tf.int64, default_value=-1, name="cnt")
        names = tf.lookup.experimental.MutableHashTable(
            tf.int64, tf.string, default_value="?", name="names")
        dense = tf.lookup.experimental.DenseHashTable(
            tf.int64, tf.float32, default_value=-1.0, empty_key=-1,
            deleted_key=-2, initial_num_buckets=8, name="dense")
        dvec = tf.lookup.experimental.DenseHashTable(
            tf.int64, tf.float32, default_value=[0.0, 0.0, 0.0],
            empty_key=[-1, -1], deleted_key=[-2, -2], initial_num_buckets=4,
            name="dvec")
        dstr = tf.lookup.experimental.DenseHashTable(
            tf.string, tf.int64, default_value=0, empty_key="",
            deleted_key="<deleted>", initial_num_buckets=4, name="dstr")
        tables = {"emb": emb, "cnt": cnt, "names": names, "dense": dense,
                  "dvec": dvec, "dstr": dstr}
        specs = {
            "emb": (tf.int64, [None], tf.float32, [None, 4]),
            "cnt": (tf.string, [None], tf.int64, [None]),
            "names": (tf.int64, [None], tf.string, [None]),
            "dense": (tf.int64, [None], tf.float32, [None]),
            "dvec": (tf.int64, [None, 2], tf.float32, [None, 3]),
            "dstr": (tf.string, [None], tf.int64, [None]),
        }
        for t, (kt, ks, vt, vs) in specs.items():
            k = tf1.placeholder(kt, ks, name=t + "_keys")
            v = tf1.placeholder(vt, vs, name=t + "_values")
            tab = tables[t]
            n[t + "_insert"] = tab.insert(k, v, name=t + "_insert")
            n[t + "_find"] = tab.lookup(k, name=t + "_find")
            n[t + "_remove"] = tab.remove(k, name=t + "_remove")
            n[t + "_size"] = tab.size(name=t + "_size")
            ek, ev = tab.export(name=t + "_export")
            n[t + "_export"] = (ek, ev)
        d = tf1.placeholder(tf.float32, [None, 4], name="emb_defaults")
        ek = g.get_tensor_by_name("emb_keys:0")
        n["emb_find_defaults"] = emb.lookup(ek, dynamic_default_values=d,
                                            name="emb_find_defaults")
        saver = tf1.train.Saver(sharded=True)
    n["save"] = g.get_tensor_by_name(saver.saver_def.save_tensor_name)
    n["restore"] = g.get_operation_by_name(saver.saver_def.restore_op_name)
    n["prefix"] = saver.saver_def.filename_tensor_name
    return g, n, saver


def encode(a):
    """A numpy value as the JSON the Go test reads."""
    a = np.asarray(a)
    dt = {np.dtype("int64"): "int64", np.dtype("int32"): "int32",
          np.dtype("float32"): "float", np.dtype("float64"): "double",
          np.dtype("bool"): "bool"}.get(a.dtype)
    if dt is None and a.dtype.kind in "SOU":
        flat = [x if isinstance(x, bytes) else str(x).encode() for x in a.reshape(-1)]
        return {"dtype": "string", "shape": list(a.shape),
                "strings": [base64.b64encode(x).decode() for x in flat]}
    vals = a.reshape(-1).tolist()
    return {"dtype": dt, "shape": list(a.shape), "values": vals}


class Recorder:
    def __init__(self, sess, g, n, ckpt_dir):
        self.sess, self.g, self.n = sess, g, n
        self.ckpt_dir = ckpt_dir
        self.steps = []
        self.graphs = {}

    def run(self, name, graph, fetches=(), targets=(), feeds=None,
            unordered=False):
        """Runs one step; graph names the partition (steps with the same
        feeds, fetches and targets share one)."""
        feeds = feeds or {}
        fetch_ts = []
        for f in fetches:
            v = self.n[f]
            fetch_ts.extend(v if isinstance(v, tuple) else [v])
        target_ops = [self.n[t] if not isinstance(self.n[t], tf.Tensor)
                      else self.n[t].op for t in targets]
        feed_dict = {self.g.get_tensor_by_name(k): v for k, v in feeds.items()}
        opts = tf1.RunOptions(output_partition_graphs=True)
        md = tf1.RunMetadata()
        step = {"name": name, "graph": graph,
                "feeds": {k: encode(v) for k, v in feeds.items()},
                "fetches": [t.name for t in fetch_ts], "unordered": unordered}
        try:
            out = self.sess.run(fetch_ts + target_ops, feed_dict,
                                options=opts, run_metadata=md)
            step["want"] = [encode(o) for o in out[:len(fetch_ts)]]
        except tf.errors.OpError as e:
            # The kernel's own words, without the tracebacks around them.
            m = re.search(r"From /job:ps/replica:0/task:0:\n(.*)", e.message)
            step["error"] = {"code": e.error_code,
                             "message": m.group(1) if m else e.message}
        if graph not in self.graphs:
            parts = [p for p in md.partition_graphs
                     if any("/job:ps/" in nd.device for nd in p.node)]
            if len(parts) != 1:
                raise SystemExit(f"step {name}: {len(parts)} ps partitions")
            self.graphs[graph] = parts[0]
        self.steps.append(step)
        return step


def main():
    cluster = tf.train.ClusterSpec({"ps": [f"127.0.0.1:{free_port()}"],
                                    "worker": [f"127.0.0.1:{free_port()}"]})
    tf.distribute.Server(cluster, job_name="ps", task_index=0)
    worker = tf.distribute.Server(cluster, job_name="worker", task_index=0)
    g, n, saver = build_graph()
    tmp = tempfile.mkdtemp()
    prefix = os.path.join(tmp, "model.ckpt")
    with tf1.Session(worker.target, graph=g) as sess:
        r = Recorder(sess, g, n, tmp)
        f32 = np.float32
        r.run("emb insert", "emb_insert", targets=["emb_insert"], feeds={
            "emb_keys:0": np.array([1, 5, 1 << 40, -3], np.int64),
            "emb_values:0": np.arange(16, dtype=f32).reshape(4, 4) / 4})
        r.run("emb insert duplicates", "emb_insert", targets=["emb_insert"], feeds={
            "emb_keys:0": np.array([9, 9], np.int64),
            "emb_values:0": np.array([[1, 1, 1, 1], [2, 2, 2, 2]], f32)})
        r.run("emb find", "emb_find", fetches=["emb_find"], feeds={
            "emb_keys:0": np.array([5, 7, 1 << 40, -3, 1, 9], np.int64)})
        r.run("emb find defaults", "emb_find_defaults",
              fetches=["emb_find_defaults"], feeds={
                  "emb_keys:0": np.array([5, 7], np.int64),
                  "emb_defaults:0": np.array([[9, 9, 9, 9], [7, 7, 7, 7]], f32)})
        r.run("emb remove", "emb_remove", targets=["emb_remove"], feeds={
            "emb_keys:0": np.array([5, 99], np.int64)})
        r.run("emb size", "emb_size", fetches=["emb_size"])
        r.run("emb export", "emb_export", fetches=["emb_export"], unordered=True)
        r.run("emb insert bad shape", "emb_insert", targets=["emb_insert"], feeds={
            "emb_keys:0": np.array([1, 2, 3], np.int64),
            "emb_values:0": np.zeros((2, 4), f32)})

        r.run("cnt insert", "cnt_insert", targets=["cnt_insert"], feeds={
            "cnt_keys:0": np.array([b"user:1", b"item:22", b""], object),
            "cnt_values:0": np.array([3, 1 << 50, 7], np.int64)})
        r.run("cnt find", "cnt_find", fetches=["cnt_find"], feeds={
            "cnt_keys:0": np.array([b"item:22", b"nope", b"", b"user:1"], object)})
        r.run("cnt export", "cnt_export", fetches=["cnt_export"], unordered=True)
        r.run("names insert", "names_insert", targets=["names_insert"], feeds={
            "names_keys:0": np.array([10, 20], np.int64),
            "names_values:0": np.array([b"ten", b"twenty"], object)})
        r.run("names find", "names_find", fetches=["names_find"], feeds={
            "names_keys:0": np.array([20, 30, 10], np.int64)})

        # 8 buckets at a load of 0.8 hold 6 keys: the second insert grows
        # the table, the remove leaves deleted_key in its bucket.
        r.run("dense insert", "dense_insert", targets=["dense_insert"], feeds={
            "dense_keys:0": np.array([3, 11, 19, 4], np.int64),
            "dense_values:0": np.array([0.5, 1.5, 2.5, 3.5], f32)})
        r.run("dense export small", "dense_export", fetches=["dense_export"])
        r.run("dense insert grow", "dense_insert", targets=["dense_insert"], feeds={
            "dense_keys:0": np.array([100, 1 << 33, -7, 27, 3], np.int64),
            "dense_values:0": np.array([4.5, 5.5, 6.5, 7.5, 8.5], f32)})
        r.run("dense remove", "dense_remove", targets=["dense_remove"], feeds={
            "dense_keys:0": np.array([11, 12345], np.int64)})
        r.run("dense find", "dense_find", fetches=["dense_find"], feeds={
            "dense_keys:0": np.array([3, 11, 19, 100, 1 << 33, -7, 27, 5], np.int64)})
        r.run("dense size", "dense_size", fetches=["dense_size"])
        r.run("dense export", "dense_export", fetches=["dense_export"])
        r.run("dense insert empty key", "dense_insert", targets=["dense_insert"], feeds={
            "dense_keys:0": np.array([8, -1], np.int64),
            "dense_values:0": np.array([1, 1], f32)})
        r.run("dense find deleted key", "dense_find", fetches=["dense_find"], feeds={
            "dense_keys:0": np.array([-2], np.int64)})

        r.run("dvec insert", "dvec_insert", targets=["dvec_insert"], feeds={
            "dvec_keys:0": np.array([[1, 2], [2, 1], [0, 0], [7, 1 << 40]], np.int64),
            "dvec_values:0": np.arange(12, dtype=f32).reshape(4, 3)})
        r.run("dvec find", "dvec_find", fetches=["dvec_find"], feeds={
            "dvec_keys:0": np.array([[2, 1], [1, 1], [7, 1 << 40]], np.int64)})
        r.run("dvec export", "dvec_export", fetches=["dvec_export"])
        r.run("dstr insert", "dstr_insert", targets=["dstr_insert"], feeds={
            "dstr_keys:0": np.array([b"a", b"bb", b"a longer key than eight", b"\xff\x00"], object),
            "dstr_values:0": np.array([1, 2, 3, 4], np.int64)})
        r.run("dstr remove", "dstr_remove", targets=["dstr_remove"], feeds={
            "dstr_keys:0": np.array([b"bb"], object)})
        r.run("dstr export", "dstr_export", fetches=["dstr_export"])
        r.run("dstr find", "dstr_find", fetches=["dstr_find"], feeds={
            "dstr_keys:0": np.array([b"a", b"bb", b"a longer key than eight", b"\xff\x00", b"c"], object)})

        save = r.run("save", "save", fetches=["save"],
                     feeds={n["prefix"]: np.array(prefix.encode(), object)})
        # The prefix fed is a path of this run; the Go test feeds its own,
        # and the save step fetches back what it was fed.
        save["prefix_feed"] = n["prefix"]
        save["feeds"] = {}
        save["want"] = "prefix"
        # Change every table, then restore: the tables are as saved again.
        r.run("emb insert after save", "emb_insert", targets=["emb_insert"], feeds={
            "emb_keys:0": np.array([1, 1000], np.int64),
            "emb_values:0": np.full((2, 4), -5, f32)})
        r.run("dense insert after save", "dense_insert", targets=["dense_insert"], feeds={
            "dense_keys:0": np.array([3, 2000], np.int64),
            "dense_values:0": np.array([-5, -5], f32)})
        restore = r.run("restore", "restore", targets=["restore"],
                        feeds={n["prefix"]: np.array(prefix.encode(), object)})
        restore["prefix_feed"] = n["prefix"]
        restore["feeds"] = {}
        r.run("emb find after restore", "emb_find", fetches=["emb_find"], feeds={
            "emb_keys:0": np.array([1, 1000, 9, 5], np.int64)})
        r.run("dense find after restore", "dense_find", fetches=["dense_find"], feeds={
            "dense_keys:0": np.array([3, 2000, 27, 11], np.int64)})
        r.run("dense export after restore", "dense_export", fetches=["dense_export"])
        r.run("cnt find after restore", "cnt_find", fetches=["cnt_find"], feeds={
            "cnt_keys:0": np.array([b"item:22", b"user:1"], object)})
        r.run("dstr find after restore", "dstr_find", fetches=["dstr_find"], feeds={
            "dstr_keys:0": np.array([b"a", b"a longer key than eight", b"bb"], object)})

    os.makedirs(os.path.join(HERE, "graphs"), exist_ok=True)
    for name, gd in r.graphs.items():
        with open(os.path.join(HERE, "graphs", name + ".pbtxt"), "w") as f:
            f.write(text_format.MessageToString(gd))
    with open(os.path.join(HERE, "steps.json"), "w") as f:
        json.dump({"ps_device": PS, "steps": r.steps}, f, indent=1)
        f.write("\n")
    ckpt = os.path.join(HERE, "ckpt")
    shutil.rmtree(ckpt, ignore_errors=True)
    os.makedirs(ckpt)
    for fn in os.listdir(tmp):
        if fn.startswith("model.ckpt"):
            shutil.copy(os.path.join(tmp, fn), ckpt)
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
