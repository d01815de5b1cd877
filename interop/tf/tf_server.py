"""Runs one TensorFlow task, tf.distribute.Server, until it is killed.

Used for TensorFlow's own ps beside starwire's, and for a TensorFlow
master process: `python tf_server.py --cluster JSON --job ps --task 0`.
It prints "ready" once the server serves.
"""

import argparse
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

import tensorflow as tf  # noqa: E402


def main(argv):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--cluster", required=True, help="the ClusterSpec as JSON")
    p.add_argument("--job", required=True)
    p.add_argument("--task", type=int, default=0)
    args = p.parse_args(argv)
    cluster = tf.train.ClusterSpec(json.loads(args.cluster))
    server = tf.distribute.Server(cluster, job_name=args.job, task_index=args.task,
                                  protocol="grpc", start=True)
    print("ready", server.target, flush=True)
    server.join()


if __name__ == "__main__":
    main(sys.argv[1:])
