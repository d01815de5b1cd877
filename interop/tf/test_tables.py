"""TensorFlow's hash tables on a starwire ps: the same client, its tables,
their lookups and its Saver all on the ps, gives what it gives on
TensorFlow's own ps, step by step, and each ps's checkpoint holds the same
tensors."""

import os

import harness


def _run_client(cluster, procs, kind, tmp_path):
    c = cluster(1, 1)
    ckpt = str(tmp_path / kind)
    os.makedirs(ckpt)
    if kind == "starwire":
        ps = c.start_starwire_ps(0, checkpoint_dir=ckpt)
    else:
        ps = c.start_tf_ps(0)
    client = procs.start("tables-" + kind, [harness.PY, os.path.join(harness.HERE, "tables_client.py"),
                                            "--ps", c.spec["ps"][0], "--worker", c.spec["worker"][0],
                                            "--ckpt_dir", ckpt], env=harness.tf_env())
    assert client.wait(180) == 0, client.log()[-3000:]
    assert ps.popen.poll() is None, "the %s ps exited:\n%s" % (kind, ps.log())
    ps.kill()
    return client.json_lines()


def test_tables_on_starwire_ps_as_on_tensorflows(cluster, procs, tmp_path):
    theirs = _run_client(cluster, procs, "tf", tmp_path)
    ours = _run_client(cluster, procs, "starwire", tmp_path)
    assert [s["step"] for s in ours] == [s["step"] for s in theirs]
    for o, t in zip(ours, theirs):
        assert o == t, "step %r: starwire %r, TensorFlow %r" % (o["step"], o, t)
    steps = {s["step"]: s for s in ours}
    # The client saw errors where TensorFlow's ps refused, and data elsewhere.
    assert not steps["emb insert bad shape"]["ok"] and not steps["dense find deleted key"]["ok"]
    assert steps["sizes after restore"]["value"] == [8, 3, 8], steps["sizes after restore"]
    names = [n for n, _ in steps["load_checkpoint"]["value"]]
    assert names == ["cnt-keys", "cnt-values", "dense-keys", "dense-values", "emb-keys", "emb-values"], names
