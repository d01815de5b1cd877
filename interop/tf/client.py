"""Small TensorFlow 1.x clients the suite runs as processes of their own.

`python client.py unsupported --ps ADDR --worker ADDR`: a graph with an op
starwire has no kernel for, placed on the ps, then one it has; prints each
outcome as a JSON line.
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


def main(argv):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("scenario", choices=["unsupported"])
    p.add_argument("--ps", required=True)
    p.add_argument("--worker", required=True)
    args = p.parse_args(argv)
    cluster = tf.train.ClusterSpec({"ps": [args.ps], "worker": [args.worker]})
    server = tf.distribute.Server(cluster, job_name="worker", task_index=0, protocol="grpc")
    {"unsupported": unsupported}[args.scenario](args, server.target)


if __name__ == "__main__":
    main(sys.argv[1:])
