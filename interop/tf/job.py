"""A TensorFlow 1.x between-graph training job, one process per worker.

The model is what a sparse-model user writes: an embedding partitioned over
the ps tasks, looked up with embedding_lookup_sparse, a dense layer, Adagrad
for the embedding and Adam for the dense part, global_step, placed by
replica_device_setter and driven by MonitoredTrainingSession. Each step's
loss is printed as one JSON line so the suite can compare jobs.
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1
tf1.disable_eager_execution()


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--ps", required=True, help="comma-separated ps host:port")
    p.add_argument("--workers", required=True, help="comma-separated worker host:port")
    p.add_argument("--task", type=int, default=0, help="this worker's index")
    p.add_argument("--steps", type=int, default=200, help="global step to stop at")
    p.add_argument("--checkpoint_dir", default=None)
    p.add_argument("--save_steps", type=int, default=50)
    p.add_argument("--vocab", type=int, default=1000)
    p.add_argument("--dim", type=int, default=8)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--ids_per_example", type=int, default=4)
    p.add_argument("--sync", action="store_true", help="SyncReplicasOptimizer")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--adagrad_lr", type=float, default=1.0)
    p.add_argument("--adam_lr", type=float, default=0.05)
    p.add_argument("--optimizer", choices=("adagrad+adam", "adagrad"), default="adagrad+adam",
                   help="Adagrad for the embedding and Adam for the dense part, "
                   "or Adagrad for every variable")
    p.add_argument("--report_every", type=int, default=1,
                   help="print every Nth step's JSON line (and the last)")
    p.add_argument("--dump_values", default=None,
                   help="write the global variables' values after the last step here (npz)")
    p.add_argument("--dump_restored", default=None,
                   help="write the global variables' values as the session starts here (npz)")
    return p.parse_args(argv)


def batches(args):
    """Yields the same batches for the same seed and task."""
    rng = np.random.RandomState(args.seed * 1000 + args.task)
    truth = np.random.RandomState(7).normal(size=args.vocab).astype(np.float32)
    while True:
        ids = rng.randint(0, args.vocab, size=(args.batch, args.ids_per_example)).astype(np.int64)
        label = (truth[ids].sum(axis=1) > 0).astype(np.float32).reshape(-1, 1)
        yield ids, label


class TwoOptimizers(tf1.train.Optimizer):
    """Adagrad for the embedding's variables, Adam for the others.

    One optimizer object, so that SyncReplicasOptimizer can wrap the pair
    and global_step advances once per step.
    """

    def __init__(self, sparse, dense, sparse_vars):
        super().__init__(use_locking=False, name="TwoOptimizers")
        self._sparse, self._dense = sparse, dense
        self._sparse_vars = set(v.op.name for v in sparse_vars)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        grads_and_vars = list(grads_and_vars)  # SyncReplicasOptimizer passes a zip
        sparse = [(g, v) for g, v in grads_and_vars if v.op.name in self._sparse_vars]
        dense = [(g, v) for g, v in grads_and_vars if v.op.name not in self._sparse_vars]
        return tf.group(self._sparse.apply_gradients(sparse),
                        self._dense.apply_gradients(dense, global_step=global_step),
                        name=name)

    def get_slot(self, var, name):
        opt = self._sparse if var.op.name in self._sparse_vars else self._dense
        return opt.get_slot(var, name)

    def get_slot_names(self):
        return self._sparse.get_slot_names() + self._dense.get_slot_names()


def build(args, cluster, num_workers):
    tf1.set_random_seed(args.seed)
    num_ps = len(cluster.job_tasks("ps"))
    device = tf1.train.replica_device_setter(
        cluster=cluster, worker_device="/job:worker/task:%d" % args.task)
    with tf1.device(device):
        global_step = tf1.train.get_or_create_global_step()
        ids = tf1.placeholder(tf.int64, [None, args.ids_per_example], name="ids")
        label = tf1.placeholder(tf.float32, [None, 1], name="label")
        emb = tf1.get_variable(
            "embedding", [args.vocab, args.dim],
            initializer=tf1.truncated_normal_initializer(stddev=1.0 / np.sqrt(args.dim)),
            partitioner=tf1.fixed_size_partitioner(num_ps))
        sp = tf1.sparse.from_dense(ids + 1)  # from_dense drops zeros: shift ids by one
        sp = tf1.SparseTensor(sp.indices, sp.values - 1, sp.dense_shape)
        vec = tf1.nn.embedding_lookup_sparse(emb, sp, None, combiner="mean",
                                             partition_strategy="mod")
        w = tf1.get_variable("dense/kernel", [args.dim, 1],
                             initializer=tf1.glorot_uniform_initializer())
        b = tf1.get_variable("dense/bias", [1], initializer=tf1.zeros_initializer())
        logits = tf.matmul(vec, w) + b
        loss = tf.reduce_mean(
            tf.nn.sigmoid_cross_entropy_with_logits(labels=label, logits=logits))
        emb_vars = [v for v in tf1.trainable_variables() if v.name.startswith("embedding")]
        if args.optimizer == "adagrad":
            opt = tf1.train.AdagradOptimizer(args.adagrad_lr)
        else:
            opt = TwoOptimizers(tf1.train.AdagradOptimizer(args.adagrad_lr),
                                tf1.train.AdamOptimizer(args.adam_lr),
                                emb_vars)
        hooks = []
        if args.sync:
            opt = tf1.train.SyncReplicasOptimizer(
                opt, replicas_to_aggregate=num_workers, total_num_replicas=num_workers)
            hooks.append(opt.make_session_run_hook(args.task == 0))
        train = opt.minimize(loss, global_step=global_step)
    if num_workers > 1:
        # Made last, so that a one-worker graph (the one compared with
        # TensorFlow's ps step by step) is the same with or without it.
        with tf1.device(device):
            hooks.append(WorkersBarrierHook(num_workers))
    return dict(ids=ids, label=label, loss=loss, train=train, global_step=global_step,
                hooks=hooks, logits=logits, emb=emb, emb_vars=emb_vars)


class WorkersBarrierHook(tf1.train.SessionRunHook):
    """Holds every worker's first step until all of them have a session.

    Without it the chief trains alone while the other workers still import
    TensorFlow, and a short job ends before they join. A counter on the ps
    counts the workers that arrived; it is left out of checkpoints, and a
    session made again after a lost ps does not wait again.
    """

    def __init__(self, num_workers, timeout_secs=180):
        self._n, self._timeout = num_workers, timeout_secs
        self.counter = tf1.get_variable("workers_ready", [], tf.int64,
                                        initializer=tf1.zeros_initializer(), trainable=False)
        self._arrive = tf1.assign_add(self.counter, 1)
        self._done = False

    def after_create_session(self, session, coord):
        if self._done:
            return
        self._done = True
        session.run(self._arrive)
        deadline = time.monotonic() + self._timeout
        while session.run(self.counter) < self._n:
            if time.monotonic() > deadline:
                raise RuntimeError("%d workers did not arrive within %ss"
                                   % (self._n, self._timeout))
            time.sleep(0.05)


def poll_readiness_every_second():
    """A non-chief waits for the chief's initialization in steps of
    SessionManager's recovery_wait_secs, 30 s by default: longer than the
    suite's jobs. TensorFlow's own ps and starwire's get the same."""
    from tensorflow.python.training import session_manager
    init = session_manager.SessionManager.__init__

    def patched(self, *a, **kw):
        kw["recovery_wait_secs"] = 1
        init(self, *a, **kw)
    session_manager.SessionManager.__init__ = patched


def variable_values(session, variables):
    """The values of variables fetched through session, by the names a
    Saver gives them: a partitioned variable's parts join into the whole,
    as the checkpoint holds it."""
    out = {}
    for v, x in zip(variables, session.run(variables)):
        info = v._get_save_slice_info()
        if info is None:
            out[v.op.name] = x
            continue
        whole = out.setdefault(info.full_name, np.zeros(info.full_shape, x.dtype))
        whole[tuple(slice(o, o + n) for o, n in zip(info.var_offset, info.var_shape))] = x
    return out


class DumpRestoredHook(tf1.train.SessionRunHook):
    """Writes the global variables' values once the session is made:
    initialized, or restored from the newest checkpoint."""

    def __init__(self, path):
        self._path = path

    def begin(self):
        self._vars = tf1.global_variables()

    def after_create_session(self, session, coord):
        np.savez(self._path, **variable_values(session, self._vars))


def main(argv):
    args = parse_args(argv)
    # MonitoredTrainingSession says at INFO which task failed a step and
    # that it recreates the session.
    tf.get_logger().setLevel("INFO")
    poll_readiness_every_second()
    ps = args.ps.split(",")
    workers = args.workers.split(",")
    cluster = tf.train.ClusterSpec({"ps": ps, "worker": workers})
    server = tf.distribute.Server(cluster, job_name="worker", task_index=args.task,
                                  protocol="grpc")
    m = build(args, cluster, len(workers))
    hooks = list(m["hooks"]) + [tf1.train.StopAtStepHook(last_step=args.steps)]
    if args.dump_restored:
        hooks.append(DumpRestoredHook(args.dump_restored))
    scaffold = None
    if args.checkpoint_dir:
        barrier = [h.counter for h in hooks if isinstance(h, WorkersBarrierHook)]
        saved = [v for v in tf1.global_variables() if all(v is not b for b in barrier)]
        scaffold = tf1.train.Scaffold(saver=tf1.train.Saver(saved, sharded=True,
                                                            max_to_keep=3))
    data = batches(args)
    n = 0
    # Between-graph replication: this worker's master talks to the ps and
    # to itself only, as TensorFlow's guides set it.
    config = tf1.ConfigProto(device_filters=["/job:ps", "/job:worker/task:%d" % args.task])
    with tf1.train.MonitoredTrainingSession(
            master=server.target, is_chief=(args.task == 0), config=config,
            checkpoint_dir=args.checkpoint_dir, scaffold=scaffold,
            save_checkpoint_steps=args.save_steps if args.checkpoint_dir else None,
            save_checkpoint_secs=None, save_summaries_steps=None, save_summaries_secs=None,
            log_step_count_steps=None, hooks=hooks) as sess:
        while not sess.should_stop():
            ids, label = next(data)
            step, loss, _ = sess.run([m["global_step"], m["loss"], m["train"]],
                                     {m["ids"]: ids, m["label"]: label})
            n += 1
            if n % args.report_every == 0 or sess.should_stop():
                print(json.dumps({"step": int(step), "loss": float(loss), "t": time.time()}),
                      flush=True)
        if args.dump_values:
            # Through the session, past the hooks: what the last step left.
            np.savez(args.dump_values, **sess.run_step_fn(
                lambda step_context: variable_values(step_context.session,
                                                 tf1.global_variables())))
    print(json.dumps({"done": True}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
