"""The same TensorFlow job on TensorFlow's ps and on starwire's, side by side.

Two job.py workers (TensorFlow 1.x graph mode, MonitoredTrainingSession)
train an embedding of --vocab x --dim floats partitioned over one ps and
then two, batch --batch, Adagrad on the embedding (the dense layer of
--dim x 1 weights on Adam by default, see --optimizer). Each configuration runs
on TensorFlow's own ps (tf.distribute.Server) and on starwire's
(`starwire serve --job ps --protocol grpc`), alternating which goes first
from round to round, every task a process of its own (harness.py).

Each run is timed over a window that starts once the global step reaches
--warmup and lasts --window seconds; the ps figures come from /proc over
that window only:

  steps/s        global steps per second
  CPU s/step     utime+stime of the ps processes (/proc/PID/stat) per step
  peak RSS       VmHWM of the ps processes, summed (/proc/PID/status)
  rw B/step      rchar+wchar of the ps processes (/proc/PID/io) per step
  TCP B/step     bytes sent+received on the ps processes' TCP sockets
                 (tcp_info as `ss` reports it) per step

rchar/wchar count read/write/readv/writev but not sendmsg/recvmsg, so the
TCP column is the one that counts what crossed the sockets whatever system
calls a server uses.

  python bench_tf.py            # the benchmark BENCHMARKS.md keeps
  python bench_tf.py --quick    # a tiny embedding, a few steps, one round
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import harness

KINDS = ("tf", "starwire")
CLK_TCK = os.sysconf("SC_CLK_TCK")
COLUMNS = ("ps", "ps of", "runs", "steps/s", "steps/s min-max", "CPU s/step", "peak RSS MiB", "rw B/step",
           "TCP B/step")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="tiny embedding, few steps, one round: checks the script, measures nothing")
    p.add_argument("--rounds", type=int, default=2, help="runs of each configuration and ps kind")
    p.add_argument("--ps_counts", default="1,2", help="comma-separated numbers of ps tasks")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--vocab", type=int, default=1 << 20)
    p.add_argument("--dim", type=int, default=16)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--optimizer", default="adagrad+adam",
                   help="job.py's --optimizer: the embedding always takes Adagrad; "
                   "\"adagrad\" puts the dense layer on Adagrad too")
    p.add_argument("--warmup", type=int, default=100, help="global steps before the window")
    p.add_argument("--window", type=float, default=40.0, help="seconds timed")
    p.add_argument("--report_every", type=int, default=5, help="job.py's --report_every")
    p.add_argument("--start_timeout", type=float, default=300.0,
                   help="seconds for a run to reach --warmup")
    p.add_argument("--starwire", default=None, help="a built starwire binary (default: build one)")
    p.add_argument("--log_dir", default=None, help="keep the tasks' logs here")
    p.add_argument("--json", default=None, help="also write every run's figures here")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.vocab, args.dim = 1, 1000, 16
        args.warmup, args.window, args.report_every = 3, 2.0, 1
    return args


def proc_cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / CLK_TCK  # fields 14 and 15: utime, stime


def proc_fields(path, names):
    out = {}
    with open(path) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in names:
                out[k] = int(v.split()[0])
    return out


def socket_inodes(pid):
    inodes = set()
    fd_dir = "/proc/%d/fd" % pid
    for fd in os.listdir(fd_dir):
        try:
            m = re.match(r"socket:\[(\d+)\]", os.readlink(os.path.join(fd_dir, fd)))
        except OSError:
            continue  # closed meanwhile
        if m:
            inodes.add(m.group(1))
    return inodes


def tcp_bytes(pids):
    """Bytes sent and received on the TCP sockets the processes hold."""
    inodes = set()
    for pid in pids:
        inodes |= socket_inodes(pid)
    out = subprocess.run(["ss", "-tinHe"], capture_output=True, text=True, check=True).stdout
    total, ino = 0, None
    for line in out.splitlines():
        if not line.startswith(("\t", " ")):
            m = re.search(r"\bino:(\d+)", line)
            ino = m.group(1) if m else None
            continue
        if ino in inodes:
            for k in ("bytes_sent", "bytes_received"):
                m = re.search(r"\b%s:(\d+)" % k, line)
                if m:
                    total += int(m.group(1))
    return total


def sample(pids):
    """The ps processes' counters now."""
    s = {"t": time.monotonic(), "cpu": 0.0, "rw": 0, "hwm_kib": 0}
    for pid in pids:
        s["cpu"] += proc_cpu_seconds(pid)
        io = proc_fields("/proc/%d/io" % pid, ("rchar", "wchar"))
        s["rw"] += io["rchar"] + io["wchar"]
        s["hwm_kib"] += proc_fields("/proc/%d/status" % pid, ("VmHWM",))["VmHWM"]
    s["tcp"] = tcp_bytes(pids)
    return s


class StepLog:
    """The global steps a worker printed, read as its log grows."""

    def __init__(self, proc):
        self.proc, self.step, self._buf = proc, -1, b""
        self._f = open(proc.log_path, "rb")

    def poll(self):
        """Reads what is new; True when a new step line arrived."""
        self._buf += self._f.read()
        *lines, self._buf = self._buf.split(b"\n")
        seen = False
        for line in lines:
            if line.startswith(b'{"step"'):
                self.step = max(self.step, json.loads(line)["step"])
                seen = True
        if self.proc.popen.poll() is not None:
            raise RuntimeError("%s exited %s:\n%s" % (self.proc.name, self.proc.popen.returncode,
                                                       harness.tail(self.proc.log())))
        return seen

    def close(self):
        self._f.close()


def wait_step(logs, until, deadline):
    """Polls the workers' logs until the global step reaches until (and a
    line has just arrived, so that the step is current); returns it."""
    while time.monotonic() < deadline:
        fresh = [log.poll() for log in logs]
        step = max(log.step for log in logs)
        if any(fresh) and step >= until:
            return step
        time.sleep(0.005)
    raise RuntimeError("global step %d short of %d at the deadline" % (
        max(log.step for log in logs), until))


def run_once(args, starwire, kind, num_ps, log_dir):
    os.makedirs(log_dir)
    procs = harness.Procs(log_dir)
    logs = []
    try:
        c = harness.Cluster(procs, starwire, num_ps, args.workers)
        c.start_ps(kind)
        pids = [p.pid for p in c.ps.values()]
        job = ["--steps", str(10 ** 9), "--vocab", str(args.vocab), "--dim", str(args.dim),
               "--batch", str(args.batch), "--optimizer", args.optimizer,
               "--report_every", str(args.report_every)]
        logs = [StepLog(c.start_worker(i, *job)) for i in range(args.workers)]
        g0 = wait_step(logs, args.warmup, time.monotonic() + args.start_timeout)
        s0 = sample(pids)
        end = s0["t"] + args.window
        while time.monotonic() < end:
            for log in logs:
                log.poll()
            time.sleep(0.005)
        g1 = wait_step(logs, max(log.step for log in logs) + 1, end + 60)
        s1 = sample(pids)
    except Exception:
        print(procs.logs(), file=sys.stderr)
        raise
    finally:
        for log in logs:
            log.close()
        procs.close()
    steps = g1 - g0
    if steps <= 0:
        raise RuntimeError("%s, %d ps: no global step in the window" % (kind, num_ps))
    return {"kind": kind, "ps": num_ps, "steps": steps, "seconds": s1["t"] - s0["t"],
            "steps_per_s": steps / (s1["t"] - s0["t"]),
            "cpu_per_step": (s1["cpu"] - s0["cpu"]) / steps,
            "peak_rss_mib": s1["hwm_kib"] / 1024.0,
            "rw_per_step": (s1["rw"] - s0["rw"]) / steps,
            "tcp_per_step": (s1["tcp"] - s0["tcp"]) / steps}


def summarize(runs, ps_counts):
    """One row per (ps count, kind): means over the rounds, the range of
    steps/s, peak RSS the most."""
    rows = []
    for n in ps_counts:
        for kind in KINDS:
            rs = [r for r in runs if r["ps"] == n and r["kind"] == kind]
            rate = [r["steps_per_s"] for r in rs]
            rows.append((str(n), kind, str(len(rs)), "%.2f" % statistics.mean(rate),
                         "%.1f-%.1f" % (min(rate), max(rate)),
                         "%.4f" % statistics.mean(r["cpu_per_step"] for r in rs),
                         "%.0f" % max(r["peak_rss_mib"] for r in rs),
                         "%.0f" % statistics.mean(r["rw_per_step"] for r in rs),
                         "%.0f" % statistics.mean(r["tcp_per_step"] for r in rs)))
    return rows


def markdown(rows):
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def main(argv):
    args = parse_args(argv)
    ps_counts = [int(n) for n in args.ps_counts.split(",")]
    tmp = tempfile.mkdtemp(prefix="bench-tf-")
    log_dir = args.log_dir or tmp
    os.makedirs(log_dir, exist_ok=True)
    try:
        starwire = args.starwire or harness.build_starwire(tmp)
        print("%d workers, embedding %d x %d floats, batch %d, --optimizer %s; warm-up %d "
              "steps, window %.0f s; load average at start: %.2f %.2f %.2f"
              % ((args.workers, args.vocab, args.dim, args.batch, args.optimizer, args.warmup,
                  args.window) + os.getloadavg()), flush=True)
        runs = []
        for rnd in range(args.rounds):
            order = KINDS if rnd % 2 == 0 else KINDS[::-1]
            for n in ps_counts:
                for kind in order:
                    r = run_once(args, starwire, kind, n,
                                 os.path.join(log_dir, "round%d-%dps-%s" % (rnd, n, kind)))
                    r["round"] = rnd
                    runs.append(r)
                    print("round %d, %d ps on %-8s: %d steps in %.1f s, %.2f steps/s, "
                          "%.4f CPU s/step, %.0f MiB, %.0f rw B/step, %.0f TCP B/step, load %.1f"
                          % (rnd, n, kind, r["steps"], r["seconds"], r["steps_per_s"],
                             r["cpu_per_step"], r["peak_rss_mib"], r["rw_per_step"],
                             r["tcp_per_step"], os.getloadavg()[0]), flush=True)
        print("load average at end: %.2f %.2f %.2f" % os.getloadavg())
        print()
        print(markdown(summarize(runs, ps_counts)))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(runs, f, indent=1)
    finally:
        if not args.log_dir:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
