"""Processes of the interoperability suite: starwire and TensorFlow tasks.

Every task runs as a process of its own, on loopback ports picked here,
its output in a log file; Procs ends them all (SIGKILL to each process
group) whatever happened. The benchmark script uses the same pieces.
"""

import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PY = sys.executable


_HANDED_OUT = set()


def _ephemeral_range():
    """The kernel's range for the local ports of outgoing connections."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def _bindable(port):
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        s = socket.socket(socket.AF_INET, kind)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        finally:
            s.close()
    return True


def free_ports(n):
    """Returns n distinct loopback ports, free for TCP and UDP now.

    They come from below the kernel's ephemeral range: a port bind(0)
    picked is one an outgoing connection of some other task (TensorFlow
    opens many) may take as its local port before the task that was given
    it binds it. No port is handed out twice in one run.
    """
    lo, _ = _ephemeral_range()
    first = max(1024, lo - 20000)
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    ports = []
    for _ in range(100 * n + 1000):
        if len(ports) == n:
            return ports
        port = rng.randrange(first, lo)
        if port in _HANDED_OUT or not _bindable(port):
            continue
        _HANDED_OUT.add(port)
        ports.append(port)
    raise RuntimeError("no %d free ports in [%d, %d)" % (n, first, lo))


def build_starwire(out_dir):
    """Builds cmd/starwire once into out_dir and returns its path."""
    path = os.path.join(out_dir, "starwire")
    subprocess.run(["go", "build", "-o", path, "./cmd/starwire"], cwd=REPO, check=True)
    return path


class Proc:
    """One process of a test, its output in a log file."""

    def __init__(self, name, argv, log_path, env=None, cwd=None):
        self.name, self.argv, self.log_path = name, argv, log_path
        self._log = open(log_path, "ab")
        self.popen = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT,
                                      env=env, cwd=cwd, start_new_session=True)
        self.started = time.monotonic()

    @property
    def pid(self):
        return self.popen.pid

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def wait_for(self, pattern, timeout):
        """Waits until the log matches pattern; fails if the process ends first."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = rx.search(self.log())
            if m:
                return m
            if self.popen.poll() is not None:
                raise AssertionError("%s exited %s before %r:\n%s" % (
                    self.name, self.popen.returncode, pattern, tail(self.log())))
            time.sleep(0.05)
        raise AssertionError("%s: no %r within %ss:\n%s" % (self.name, pattern, timeout,
                                                            tail(self.log())))

    def wait(self, timeout):
        """Waits for the process to end and returns its exit code."""
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("%s still running after %ss:\n%s" % (
                self.name, timeout, tail(self.log())))

    def kill(self):
        """SIGKILL to the process group, then reaps it."""
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.popen.wait(10)
        except subprocess.TimeoutExpired:
            pass
        self._log.close()

    def json_lines(self):
        """The JSON objects the process printed, one per line."""
        out = []
        for line in self.log().splitlines():
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
        return out


def tail(text, n=40):
    return "\n".join(text.splitlines()[-n:])


class Procs:
    """Starts processes into log_dir and kills them all at close."""

    def __init__(self, log_dir):
        self.log_dir = log_dir
        self.procs = []
        self._n = 0

    def start(self, name, argv, env=None, cwd=None):
        self._n += 1
        log = os.path.join(self.log_dir, "%02d-%s.log" % (self._n, name.replace("/", "_")))
        p = Proc(name, argv, log, env=env, cwd=cwd)
        self.procs.append(p)
        return p

    def close(self):
        for p in self.procs:
            p.kill()

    def logs(self):
        return "\n".join("---- %s (%s)\n%s" % (p.name, p.log_path, tail(p.log()))
                         for p in self.procs)


def tf_env():
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    env["PYTHONPATH"] = HERE + os.pathsep + env.get("PYTHONPATH", "")
    # The suite's loopback tasks must not be reached through a proxy.
    for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "grpc_proxy"):
        env.pop(k, None)
    return env


def cluster_flag(cluster):
    """starwire's --cluster value for a {"ps": [...], "worker": [...]} dict."""
    return ";".join("%s=%s" % (job, ",".join(addrs)) for job, addrs in cluster.items())


class Cluster:
    """The addresses of a job's tasks and how to start each."""

    def __init__(self, procs, starwire, num_ps, num_workers, extra_jobs=None):
        self.procs, self.starwire = procs, starwire
        jobs = {"ps": num_ps, "worker": num_workers}
        jobs.update(extra_jobs or {})
        ports = iter(free_ports(sum(jobs.values())))
        self.spec = {job: ["127.0.0.1:%d" % next(ports) for _ in range(n)]
                     for job, n in jobs.items()}
        self.ps = {}

    def start_starwire_ps(self, i, checkpoint_dir=None, extra=()):
        argv = [self.starwire, "serve", "--job", "ps", "--task", str(i), "--protocol", "grpc",
                "--cluster", cluster_flag(self.spec), "--report", "0"]
        if checkpoint_dir:
            argv += ["--checkpoint_dir", checkpoint_dir]
        p = self.procs.start("starwire-ps%d" % i, argv + list(extra))
        p.wait_for(r"serving:", 30)
        self.ps[i] = p
        return p

    def start_tf_task(self, job, i):
        argv = [PY, os.path.join(HERE, "tf_server.py"), "--cluster", json.dumps(self.spec),
                "--job", job, "--task", str(i)]
        p = self.procs.start("tf-%s%d" % (job, i), argv, env=tf_env())
        p.wait_for(r"(?m)^ready", 90)
        return p

    def start_tf_ps(self, i):
        p = self.start_tf_task("ps", i)
        self.ps[i] = p
        return p

    def start_tf_ps_at_once(self):
        """Starts every ps as TensorFlow's, all before waiting for any:
        TensorFlow takes its time to start."""
        argv = [PY, os.path.join(HERE, "tf_server.py"), "--cluster", json.dumps(self.spec),
                "--job", "ps", "--task"]
        for i in range(len(self.spec["ps"])):
            self.ps[i] = self.procs.start("tf-ps%d" % i, argv + [str(i)], env=tf_env())
        for p in self.ps.values():
            p.wait_for(r"(?m)^ready", 90)

    def start_ps(self, kind, checkpoint_dir=None):
        """Starts every ps, kind "starwire" or "tf"."""
        for i in range(len(self.spec["ps"])):
            if kind == "starwire":
                self.start_starwire_ps(i, checkpoint_dir)
            else:
                self.start_tf_ps(i)

    def start_worker(self, i, *args):
        """Starts job.py as worker i, with job.py's flags in args."""
        argv = [PY, os.path.join(HERE, "job.py"), "--ps", ",".join(self.spec["ps"]),
                "--workers", ",".join(self.spec["worker"]), "--task", str(i)] + list(args)
        return self.procs.start("worker%d" % i, argv, env=tf_env())


def copy_checkpoints(src, dst):
    """Copies the checkpoint directory src to dst, its state file naming
    the copies: a Saver records absolute paths, which would send a restore
    from dst back to src's files."""
    shutil.copytree(src, dst)
    state = os.path.join(dst, "checkpoint")
    with open(state) as f:
        text = f.read()
    def moved(m):
        return '%s"%s"' % (m.group(1), os.path.join(dst, os.path.basename(m.group(2))))
    text = re.sub(r'(_paths?: )"([^"]*)"', moved, text)
    with open(state, "w") as f:
        f.write(text)
