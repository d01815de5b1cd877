"""grpc+seastar as designed: a TensorFlow master drives starwire workers
and ps over gRPC, and the tasks move tensors among themselves over
starwire's transport."""

import os
import re
import urllib.request

import harness


def metric(url, name, labels):
    """The value of one sample of a Prometheus text page, 0 when absent."""
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    want = ",".join('%s="%s"' % kv for kv in sorted(labels.items()))
    for line in text.splitlines():
        m = re.match(r"^%s\{(.*)\} (\S+)$" % re.escape(name), line)
        if m and ",".join(sorted(m.group(1).split(","))) == want:
            return float(m.group(2))
    return 0.0


def test_tensorflow_master_drives_starwire_tasks(cluster, procs, tmp_path, starwire):
    c = cluster(1, 1, extra_jobs={"client": 1})
    star = iter(harness.free_ports(4))
    emap = tmp_path / "endpoint_map"
    # The client job is TensorFlow's: it has no starwire address, and the
    # tasks reach it over gRPC.
    emap.write_text("".join("%s=127.0.0.1:%d\n" % (a, next(star))
                            for a in c.spec["ps"] + c.spec["worker"]))
    metrics = {}
    for job in ("ps", "worker"):
        metrics[job] = "127.0.0.1:%d" % next(star)
        p = procs.start("starwire-" + job, [
            starwire, "serve", "--job", job, "--task", "0", "--protocol", "grpc+seastar",
            "--cluster", harness.cluster_flag(c.spec), "--endpoint_map", str(emap),
            "--metrics_addr", metrics[job], "--record_dir", str(tmp_path / ("rec-" + job)),
            "--report", "0"])
        p.wait_for(r"serving:", 30)
    client = procs.start("tf-master", [harness.PY, os.path.join(harness.HERE, "client.py"),
                                       "seastar", "--ps", c.spec["ps"][0],
                                       "--worker", c.spec["worker"][0],
                                       "--client", c.spec["client"][0], "--steps", "5"],
                         env=harness.tf_env())
    assert client.wait(120) == 0, client.log()[-3000:]
    ys = [r["y"] for r in client.json_lines()]
    assert ys == [4 * 256 * 256 * 0.5] * 5, ys
    # The worker pulled the variable from the ps once a step, over
    # starwire: the ps served those RecvTensors on its starwire port...
    ok = {"method": "RecvTensor", "code": "OK", "path": "tcp"}
    served = metric("http://%s/metrics" % metrics["ps"], "starwire_server_calls_total", ok)
    pulled = metric("http://%s/metrics" % metrics["worker"], "starwire_client_calls_total", ok)
    assert served >= 5 and pulled >= 5, (served, pulled)
    # ...and none over gRPC, where the master's calls came.
    grpc_calls = sorted(os.listdir(tmp_path / "rec-ps"))
    assert any(f.endswith("-RunGraph.pb") for f in grpc_calls), grpc_calls
    assert not any(f.endswith("-RecvTensor.pb") for f in grpc_calls), grpc_calls
