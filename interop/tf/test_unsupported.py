"""What starwire does not support reaches the TensorFlow client at once,
as an error naming the op and the task, and the task keeps serving."""

import os

import harness


def test_op_without_kernel_fails_fast_and_ps_keeps_serving(cluster, procs):
    c = cluster(1, 1)
    ps = c.start_starwire_ps(0)
    client = procs.start("client", [harness.PY, os.path.join(harness.HERE, "client.py"),
                                    "unsupported", "--ps", c.spec["ps"][0],
                                    "--worker", c.spec["worker"][0]], env=harness.tf_env())
    assert client.wait(120) == 0, client.log()[-3000:]
    bad, good = client.json_lines()
    assert not bad["ok"]
    # TensorFlow's own answer to an op its binary lacks is NotFound, "Op
    # type not registered"; the client names the task that answered.
    assert bad["error"] in ("NotFoundError", "UnimplementedError", "InvalidArgumentError"), bad
    assert "Igamma" in bad["message"], bad
    assert "/job:ps/replica:0/task:0" in bad["message"], bad
    assert bad["secs"] < 10, bad
    assert good["ok"] and good["value"] == [1.5, 6.0], good
    assert ps.popen.poll() is None, "the ps exited:\n" + ps.log()
