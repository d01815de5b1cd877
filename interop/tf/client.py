"""Small TensorFlow 1.x clients the suite runs as processes of their own.

`python client.py unsupported --ps ADDR --worker ADDR`: a graph with an op
starwire has no kernel for, placed on the ps, then one it has; prints each
outcome as a JSON line.

`python client.py seastar --ps ADDR --worker ADDR --client ADDR`: a
TensorFlow master, the client job's task, runs a graph placed on a
worker and a ps that are both starwire tasks.
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1
tf1.disable_eager_execution()


def run_on_ps(target, build):
    """Runs build()'s tensor on /job:ps/task:0; returns an outcome record."""
    g = tf1.Graph()
    with g.as_default():
        with tf1.device("/job:ps/task:0"):
            out = build()
        start = time.monotonic()
        try:
            with tf1.Session(target, graph=g) as s:
                value = s.run(out)
            return {"ok": True, "value": value.tolist(), "secs": time.monotonic() - start}
        except tf.errors.OpError as e:
            return {"ok": False, "error": type(e).__name__, "code": e.error_code,
                    "message": e.message, "secs": time.monotonic() - start}


def unsupported(args, target):
    x = lambda: tf.constant([0.5, 2.0])  # noqa: E731
    # Igamma: a kernel TensorFlow has and starwire does not.
    print(json.dumps(run_on_ps(target, lambda: tf.math.igamma(x(), x()))), flush=True)
    print(json.dumps(run_on_ps(target, lambda: x() * 3.0)), flush=True)


def seastar(args, target):
    """A variable on the ps, a matmul on the worker: the worker pulls the
    variable from the ps once a step, and the feed from this client."""
    import numpy as np
    with tf1.device("/job:ps/task:0"):
        v = tf1.get_variable("v", [256, 256], initializer=tf1.constant_initializer(0.5),
                             use_resource=True)
    with tf1.device("/job:worker/task:0"):
        x = tf1.placeholder(tf.float32, [None, 256])
        y = tf.reduce_sum(tf.matmul(x, v))
    with tf1.Session(target) as s:
        s.run(tf1.global_variables_initializer())
        for _ in range(args.steps):
            out = s.run(y, {x: np.ones([4, 256], np.float32)})
            print(json.dumps({"y": float(out)}), flush=True)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("scenario", choices=["unsupported", "seastar"])
    p.add_argument("--ps", required=True)
    p.add_argument("--worker", required=True)
    p.add_argument("--client", help="this process's address as the client job's task "
                   "(default: it is the worker)")
    p.add_argument("--steps", type=int, default=5)
    args = p.parse_args(argv)
    jobs = {"ps": [args.ps], "worker": [args.worker]}
    job = "worker"
    if args.client:
        jobs["client"], job = [args.client], "client"
    cluster = tf.train.ClusterSpec(jobs)
    server = tf.distribute.Server(cluster, job_name=job, task_index=0, protocol="grpc")
    {"unsupported": unsupported, "seastar": seastar}[args.scenario](args, server.target)


if __name__ == "__main__":
    main(sys.argv[1:])
