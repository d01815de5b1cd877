"""Exports the model job.py trains as a SavedModel for serving.

What a user does once training ended: in a process of its own, with no
ps, build the inference part of job.py's graph (the same variables, the
embedding partitioned as in training, looked up with the same "mod"
strategy), restore it from the newest checkpoint of --checkpoint_dir and
export it with a "serving_default" signature: ids -> logits, prob.
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1
tf1.disable_eager_execution()


def main(argv):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--checkpoint_dir", required=True)
    p.add_argument("--export_dir", required=True)
    p.add_argument("--num_ps", type=int, default=2, help="the embedding's partitions in training")
    p.add_argument("--vocab", type=int, default=1000)
    p.add_argument("--dim", type=int, default=8)
    p.add_argument("--ids_per_example", type=int, default=4)
    args = p.parse_args(argv)
    ckpt = tf1.train.latest_checkpoint(args.checkpoint_dir)
    if ckpt is None:
        sys.exit("no checkpoint in %s" % args.checkpoint_dir)
    with tf1.Graph().as_default():
        ids = tf1.placeholder(tf.int64, [None, args.ids_per_example], name="ids")
        emb = tf1.get_variable("embedding", [args.vocab, args.dim],
                               partitioner=tf1.fixed_size_partitioner(args.num_ps))
        w = tf1.get_variable("dense/kernel", [args.dim, 1])
        b = tf1.get_variable("dense/bias", [1])
        vec = tf.reduce_mean(tf1.nn.embedding_lookup(emb, ids, partition_strategy="mod"), axis=1)
        logits = tf.matmul(vec, w) + b
        prob = tf.sigmoid(logits)
        saver = tf1.train.Saver(tf1.global_variables())
        with tf1.Session() as sess:
            saver.restore(sess, ckpt)
            builder = tf1.saved_model.Builder(args.export_dir)
            sig = tf1.saved_model.predict_signature_def(
                inputs={"ids": ids}, outputs={"logits": logits, "prob": prob})
            builder.add_meta_graph_and_variables(
                sess, [tf1.saved_model.SERVING], signature_def_map={"serving_default": sig})
            builder.save()
    print("exported", ckpt, "to", args.export_dir, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
