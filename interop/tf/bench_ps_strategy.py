"""TensorFlow 2's ParameterServerStrategy on TensorFlow's ps and on
starwire's, side by side.

The custom loop of ps_strategy_job.py (an embedding and two dense layers,
sharded over two ps by a FixedShardsPartitioner, Adagrad) runs with two
TensorFlow workers once on TensorFlow's own ps and once on starwire's
(`starwire serve --job ps --protocol grpc`, serving the eager service),
alternating which goes first from round to round, every task a process of
its own. The coordinator schedules --steps steps and joins once at the end.
The ps figures come from /proc between the chief's "ready" line (the
variables placed) and its end, as bench_tf.py takes them:

  steps/s      scheduled steps per second of the chief's loop
  CPU s/step   utime+stime of the ps processes per step

  python bench_ps_strategy.py            # the figures BENCHMARKS.md keeps
  python bench_ps_strategy.py --quick    # a few steps, one round
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import bench_tf
import harness

JOB = os.path.join(harness.HERE, "ps_strategy_job.py")
COLUMNS = ("ps of", "runs", "steps/s", "steps/s min-max", "CPU s/step")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a few steps, one round")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--starwire", default=None, help="a built starwire binary (default: build one)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds for one run")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.steps = 1, 20
    return args


def run_once(args, starwire, kind, log_dir):
    log_dir = tempfile.mkdtemp(prefix=kind + "-", dir=log_dir)  # a run's logs of its own
    procs = harness.Procs(log_dir)
    try:
        c = harness.Cluster(procs, starwire, 2, 2, extra_jobs={"chief": 1})
        c.start_ps(kind)
        for i in range(2):
            c.start_tf_task("worker", i)
        chief = procs.start("chief", [harness.PY, JOB, "--cluster", json.dumps(c.spec),
                                      "--mode", "custom", "--steps", str(args.steps),
                                      "--optimizer", "adagrad", "--partition"],
                            env=harness.tf_env())
        pids = [p.pid for p in c.ps.values()]
        chief.wait_for(r'"ready": true', args.timeout)
        before = bench_tf.sample(pids)
        assert chief.wait(args.timeout) == 0, harness.tail(chief.log())
        after = bench_tf.sample(pids)
        (done,) = [r for r in chief.json_lines() if r.get("done")]
        return {"kind": kind, "steps_per_s": done["steps_per_s"],
                "cpu_per_step": (after["cpu"] - before["cpu"]) / args.steps}
    finally:
        procs.close()


def main(argv):
    args = parse_args(argv)
    log_dir = tempfile.mkdtemp(prefix="bench-ps-strategy-")
    starwire = args.starwire or harness.build_starwire(log_dir)
    runs = []
    for r in range(args.rounds):
        order = bench_tf.KINDS if r % 2 == 0 else tuple(reversed(bench_tf.KINDS))
        for kind in order:
            run = run_once(args, starwire, kind, log_dir)
            print(json.dumps(dict(run, round=r)), flush=True)
            runs.append(run)
    print("load average at the end: %.1f" % os.getloadavg()[0])
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for kind in bench_tf.KINDS:
        mine = [x for x in runs if x["kind"] == kind]
        sps = [x["steps_per_s"] for x in mine]
        print("| %s | %d | %.2f | %.1f-%.1f | %.4f |" % (
            kind, len(mine), statistics.mean(sps), min(sps), max(sps),
            statistics.mean(x["cpu_per_step"] for x in mine)))


if __name__ == "__main__":
    main(sys.argv[1:])
