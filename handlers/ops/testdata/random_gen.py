"""Writes random_tf.json.gz: what TensorFlow's CPU random kernels produce.

Each case is one node of a tf.compat.v1 graph with explicit seed and seed2
attrs (what tf1.set_random_seed plus an op seed become), run twice in one
session so that the second run shows how the node's generator advanced. The
stateless ops are run once: they keep no state. StatelessRandomGetKeyCounter's case holds its key and counter, one after
the other. The Go test random_test.go
builds the same nodes and compares the bytes.

Run it with TensorFlow 2.x on CPU:

    /work/tfvenv/bin/python handlers/ops/testdata/random_gen.py
"""

import base64
import gzip
import json
import os

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1

SMALL = [[], [1], [3], [17], [4, 5]]
MEDIUM = SMALL + [[129]]
# Several of TensorFlow's shard blocks, and a size that ends in a
# partial group.
BIG = MEDIUM + [[1000, 8], [20001]]
SEEDS = [(1, 7), (87654321, 12345678), (-5, 1 << 40), (0, 3), (3, 0)]
FLOATS = ["float32", "float64", "float16", "bfloat16"]


def shapes_for(dtype, seed_index):
    if seed_index == 0:
        return BIG if dtype == "float32" else MEDIUM
    return SMALL


def stateful_cases():
    for op in ["RandomUniform", "RandomStandardNormal", "TruncatedNormal"]:
        for dtype in FLOATS:
            for i, (seed, seed2) in enumerate(SEEDS):
                for shape in shapes_for(dtype, i):
                    yield dict(op=op, dtype=dtype, shape=shape, seed=seed, seed2=seed2)
    ranges = {"int32": [(-5, 10), (0, (1 << 31) - 1), (-(1 << 31), (1 << 31) - 1)],
              "int64": [(-5, 10), (-(1 << 40), (1 << 40) + 3), (-(1 << 63), (1 << 63) - 1)]}
    for dtype, rs in ranges.items():
        for lo, hi in rs:
            for i, (seed, seed2) in enumerate(SEEDS[:3]):
                for shape in (MEDIUM if i == 0 else SMALL):
                    yield dict(op="RandomUniformInt", dtype=dtype, shape=shape, seed=seed,
                               seed2=seed2, minval=lo, maxval=hi)


# (key, counter) inputs of the stateless V2 ops, as uint64s.
KEYS = [(1, (0, 0)), (0x0123456789ABCDEF, (0xFFFFFFFFFFFFFFF0, 7)), (42, (5, 1 << 63))]


def stateless_cases():
    for op in ["StatelessRandomUniformV2", "StatelessRandomNormalV2", "StatelessTruncatedNormalV2"]:
        for dtype in FLOATS:
            for i, (key, counter) in enumerate(KEYS):
                for shape in shapes_for(dtype, i):
                    yield dict(op=op, dtype=dtype, shape=shape, key=key, counter=list(counter), alg=1)


# Seed pairs of the V1 stateless ops and StatelessRandomGetKeyCounter.
SEED_PAIRS = [("int64", (1, 2)), ("int32", (-7, 2147483647)), ("int64", (-(1 << 63), 123456789012345))]


def seeded_stateless_cases():
    for op in ["StatelessRandomUniform", "StatelessRandomNormal", "StatelessTruncatedNormal"]:
        for dtype in ["float32", "float64"]:
            for i, (tseed, pair) in enumerate(SEED_PAIRS):
                for shape in shapes_for(dtype, i)[:len(MEDIUM) if dtype == "float32" else None]:
                    yield dict(op=op, dtype=dtype, shape=shape, tseed=tseed, seedpair=list(pair))
    for tseed, pair in SEED_PAIRS:
        yield dict(op="StatelessRandomGetKeyCounter", dtype="uint64", shape=[], tseed=tseed, seedpair=list(pair))


def build(case):
    shape = tf.constant(case["shape"], dtype=tf.int32)
    dtype = tf.as_dtype(case["dtype"])
    op = case["op"]
    if op == "RandomUniformInt":
        return tf.raw_ops.RandomUniformInt(
            shape=shape, minval=tf.constant(case["minval"], dtype=dtype),
            maxval=tf.constant(case["maxval"], dtype=dtype), seed=case["seed"], seed2=case["seed2"])
    if "seedpair" in case:
        seed = tf.constant(case["seedpair"], dtype=tf.as_dtype(case["tseed"]))
        if op == "StatelessRandomGetKeyCounter":
            return tf.concat(tf.raw_ops.StatelessRandomGetKeyCounter(seed=seed), 0)
        return getattr(tf.raw_ops, op)(shape=shape, seed=seed, dtype=dtype)
    if op.startswith("Stateless"):
        key = tf.constant(np.array([case["key"]], dtype=np.uint64))
        counter = tf.constant(np.array(case["counter"], dtype=np.uint64))
        alg = tf.constant(case["alg"], dtype=tf.int32)
        return getattr(tf.raw_ops, op)(shape=shape, key=key, counter=counter, alg=alg, dtype=dtype)
    return getattr(tf.raw_ops, op)(shape=shape, dtype=dtype, seed=case["seed"], seed2=case["seed2"])


def initializer_graphs():
    """The initial values of variables as tf.compat.v1 and Keras make them
    under tf1.set_random_seed, each a GraphDef of what computes it (the
    random op and its scaling) with the values TensorFlow computed."""
    g = tf.Graph()
    with g.as_default(), tf.device("/cpu:0"):
        tf1.set_random_seed(1)
        inits = {
            "glorot_uniform": tf1.glorot_uniform_initializer(),
            "truncated_normal": tf1.truncated_normal_initializer(stddev=0.1),
            "random_normal": tf1.random_normal_initializer(mean=0.5, stddev=2.0),
            "random_uniform": tf1.random_uniform_initializer(-0.05, 0.05),
            "he_normal": tf1.initializers.he_normal(),
            "keras_glorot_uniform": tf.keras.initializers.GlorotUniform(seed=4),
            "keras_he_normal": tf.keras.initializers.HeNormal(seed=5),
            "keras_random_normal": tf.keras.initializers.RandomNormal(stddev=0.3, seed=6),
        }
        vs = [tf1.get_variable(name, [37, 129], initializer=init) for name, init in inits.items()]
        values = [v.initial_value for v in vs]
        with tf1.Session() as sess:
            got = sess.run(values)
    gd = g.as_graph_def()
    out = []
    for v, val in zip(values, got):
        sub = tf1.graph_util.extract_sub_graph(gd, [v.op.name])
        out.append(dict(name=v.op.name, graph=base64.b64encode(sub.SerializeToString(deterministic=True)).decode(),
                        dtype="float32", runs=[raw(val, "float32")]))
    return out


def raw(value, dtype):
    # Little-endian bytes of the values, as the Go tensor holds them.
    return base64.b64encode(np.ascontiguousarray(value).view(np.uint8).tobytes()).decode()


def main():
    cases = list(stateful_cases()) + list(stateless_cases()) + list(seeded_stateless_cases())
    with tf.Graph().as_default(), tf.device("/cpu:0"):
        outs = [build(c) for c in cases]
        with tf1.Session() as sess:
            first = sess.run(outs)
            second = sess.run(outs)
    for c, a, b in zip(cases, first, second):
        c["runs"] = [raw(a, c["dtype"])]
        if not c["op"].startswith("Stateless"):
            c["runs"].append(raw(b, c["dtype"]))
        elif a.tobytes() != b.tobytes():
            raise SystemExit(f"stateless case changed between runs: {c}")
    doc = {"tensorflow": tf.__version__, "cases": cases, "graphs": initializer_graphs()}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "random_tf.json.gz")
    with gzip.GzipFile(path, "wb", mtime=0) as f:
        f.write(json.dumps(doc, separators=(",", ":")).encode())
    print(f"{len(cases)} cases, TensorFlow {tf.__version__}, wrote {path}")


if __name__ == "__main__":
    main()
