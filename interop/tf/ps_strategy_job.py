"""A TensorFlow 2 ParameterServerStrategy job: this process is the chief,
whose ClusterCoordinator schedules the training steps on the workers.

The model: an embedding table (ids -> 8 floats) and two dense layers,
trained on a fixed synthetic regression task. With --partition the
variables are spread over every ps by a FixedShardsPartitioner. Modes:

- custom: a custom loop, coordinator.schedule of a tf.function over a
  per-worker dataset, one step at a time (join after each), so that with
  one worker every step's loss is deterministic;
- fit: tf_keras Model.fit under the strategy, --epochs of --steps.

It prints one JSON object per line: {"step": i, "loss": x} per step of the
custom loop, {"epoch": i, "loss": x} per epoch of fit, then
{"done": true, "checksum": ...} with the sum of every variable's values.
With --checkpoint_dir it saves a tf.train.Checkpoint there at the end, and
with --restore restores the newest one there first. An error the
coordinator raises is printed as {"error": class, "message": ...}, and the
process exits 3.
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
# Model.fit under ParameterServerStrategy needs tf_keras (Keras 2).
os.environ["TF_USE_LEGACY_KERAS"] = "1"

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402

VOCAB, DIM, BATCH = 1000, 8, 32


def make_data(n, seed):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, VOCAB, size=(n, 2)).astype(np.int64)
    dense = rng.normal(size=(n, 4)).astype(np.float32)
    w = np.sin(np.arange(VOCAB, dtype=np.float32))
    y = (w[ids[:, 0]] - 0.5 * w[ids[:, 1]] + dense @ np.array([0.3, -0.2, 0.1, 0.5], np.float32))
    return ids, dense, y.reshape(-1, 1).astype(np.float32)


def dataset(steps, seed):
    ids, dense, y = make_data(steps * BATCH, seed)
    return tf.data.Dataset.from_tensor_slices(((ids, dense), y)).batch(BATCH).repeat()


def build_model():
    # Initial values come from numpy, so that both runs of a comparison
    # start alike whatever ops the ps has for TensorFlow's random
    # initializers.
    rng = np.random.default_rng(11)

    def const(*shape):
        return keras.initializers.Constant(rng.uniform(-0.3, 0.3, size=shape).astype(np.float32))

    ids = keras.Input(shape=(2,), dtype=tf.int64)
    dense = keras.Input(shape=(4,))
    e = keras.layers.Flatten()(keras.layers.Embedding(VOCAB, DIM, embeddings_initializer=const(VOCAB, DIM), name="embedding")(ids))
    h = keras.layers.Concatenate()([e, dense])
    h = keras.layers.Dense(16, activation="relu", kernel_initializer=const(2 * DIM + 4, 16), name="hidden")(h)
    out = keras.layers.Dense(1, kernel_initializer=const(16, 1), name="out")(h)
    return keras.Model([ids, dense], out)


def optimizer(name):
    if name == "sgd":
        return keras.optimizers.SGD(0.05)
    if name == "adagrad":
        return keras.optimizers.Adagrad(0.1)
    return keras.optimizers.Adam(0.01)


def emit(**kw):
    print(json.dumps(kw), flush=True)


def checksum(model):
    return float(sum(np.sum(v.numpy(), dtype=np.float64) for v in model.variables))


def run_custom(strategy, model, opt, args):
    coord = tf.distribute.coordinator.ClusterCoordinator(strategy)
    per_worker = coord.create_per_worker_dataset(lambda: dataset(args.steps, args.seed))
    it = iter(per_worker)
    loss_fn = keras.losses.MeanSquaredError(reduction=keras.losses.Reduction.NONE)

    @tf.function
    def step(iterator):
        def replica_step(batch):
            (ids, dense), y = batch
            with tf.GradientTape() as tape:
                pred = model([ids, dense], training=True)
                loss = tf.nn.compute_average_loss(loss_fn(y, pred), global_batch_size=BATCH)
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        losses = strategy.run(replica_step, args=(next(iterator),))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    for i in range(args.steps):
        r = coord.schedule(step, args=(it,))
        if args.join_every or args.workers == 1:
            coord.join()
            emit(step=i, loss=float(r.fetch()))
    coord.join()
    return coord


def run_fit(strategy, model, opt, args):
    with strategy.scope():
        model.compile(optimizer=opt, loss="mse", steps_per_execution=1)

    # ParameterServerStrategy allows epoch-level callbacks only.
    class PerEpoch(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            emit(epoch=epoch, loss=float(logs["loss"]))

    def dataset_fn(_ctx):
        return dataset(args.steps, args.seed)

    model.fit(tf.keras.utils.experimental.DatasetCreator(dataset_fn), epochs=args.epochs,
              steps_per_epoch=args.steps, verbose=0, callbacks=[PerEpoch()])


def main(argv):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--cluster", required=True, help="the ClusterSpec as JSON, with a chief job")
    p.add_argument("--mode", choices=["custom", "fit"], default="custom")
    p.add_argument("--steps", type=int, default=20, help="steps (per epoch with fit)")
    p.add_argument("--epochs", type=int, default=3, help="epochs of fit")
    p.add_argument("--optimizer", choices=["sgd", "adagrad", "adam"], default="sgd")
    p.add_argument("--partition", action="store_true", help="shard the variables over every ps")
    p.add_argument("--join_every", action="store_true", help="join after every step with several workers")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--checkpoint_dir", default="")
    p.add_argument("--restore", action="store_true")
    args = p.parse_args(argv)
    spec = json.loads(args.cluster)
    args.workers = len(spec["worker"])
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(spec), rpc_layer="grpc", task_type="chief", task_id=0)
    part = None
    if args.partition:
        part = tf.distribute.experimental.partitioners.FixedShardsPartitioner(len(spec["ps"]))
    strategy = tf.distribute.ParameterServerStrategy(resolver, variable_partitioner=part)
    tf.random.set_seed(args.seed)
    with strategy.scope():
        model = build_model()
        opt = optimizer(args.optimizer)
    ckpt = tf.train.Checkpoint(model=model, optimizer=opt)
    if args.restore:
        path = tf.train.latest_checkpoint(args.checkpoint_dir)
        ckpt.restore(path)
        emit(restored=path, checksum=checksum(model))
    emit(ready=True, variables=[v.name for v in model.variables],
         devices=sorted({d for v in model.variables for d in
                         ([s.device for s in v.variables] if hasattr(v, "variables") else [v.device])}))
    start = time.monotonic()
    try:
        if args.mode == "custom":
            run_custom(strategy, model, opt, args)
        else:
            run_fit(strategy, model, opt, args)
    except tf.errors.OpError as e:
        # What the coordinator raised, for a test of a lost task.
        emit(error=type(e).__name__, message=str(e)[:2000], at=time.monotonic())
        sys.stdout.flush()
        os._exit(3)
    elapsed = time.monotonic() - start
    if args.checkpoint_dir:
        ckpt.save(os.path.join(args.checkpoint_dir, "ckpt"))
    emit(done=True, checksum=checksum(model), seconds=elapsed, steps_per_s=args.steps / elapsed)


if __name__ == "__main__":
    main(sys.argv[1:])
