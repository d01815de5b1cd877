"""A ps killed with SIGKILL in the middle of MonitoredTrainingSession and
started again: TensorFlow's session recovers (it recreates the session on
UnavailableError/AbortedError and restores the newest checkpoint) and the
job finishes, on starwire's ps as on TensorFlow's own, side by side."""

import glob
import json
import os
import time

import pytest

STEPS = 400


def lose_ps(cluster, kind, ckpt):
    c = cluster(2, 1)
    c.start_ps(kind, checkpoint_dir=ckpt)
    w = c.start_worker(0, "--steps", str(STEPS), "--checkpoint_dir", ckpt, "--save_steps", "20")
    w.wait_for(r'"step": 6\d,', 180)
    deadline = time.monotonic() + 60
    while not glob.glob(os.path.join(ckpt, "model.ckpt-*.index")):
        assert time.monotonic() < deadline, "no checkpoint saved"
        time.sleep(0.1)
    c.ps[1].kill()
    killed = time.time()
    if kind == "starwire":
        c.start_starwire_ps(1, ckpt)
    else:
        c.start_tf_ps(1)
    ready = time.time()
    assert w.wait(300) == 0, w.log()[-4000:]
    recs = [r for r in w.json_lines() if "step" in r]
    # The first step of the recreated session: where the global step went
    # back to a checkpoint's. Steps the worker printed just after kill()
    # returned may have run before the ps died, so the printing time alone
    # does not tell.
    back = [i for i in range(1, len(recs))
            if recs[i]["step"] <= recs[i - 1]["step"] and recs[i]["t"] > killed]
    assert back, "the global step never went back to a checkpoint's"
    before, resumed = recs[back[0] - 1], recs[back[0]]
    return {"kind": kind, "recovery_secs": resumed["t"] - killed,
            "ps_start_secs": ready - killed, "after_ps_ready_secs": resumed["t"] - ready,
            "killed_after": before["step"], "resumed_at": resumed["step"],
            "last_step": recs[-1]["step"],
            "log": w.log()}


@pytest.mark.parametrize("kind", ["starwire", "tf"])
def test_job_survives_a_killed_ps(cluster, tmp_path, kind):
    r = lose_ps(cluster, kind, str(tmp_path / "ckpt"))
    print(json.dumps({k: v for k, v in r.items() if k != "log"}))
    assert r["last_step"] >= STEPS - 1
    # The session was recreated from a checkpoint: the global step went back.
    assert r["resumed_at"] <= r["killed_after"], r
    assert "/job:ps/replica:0/task:1" in r["log"], "the worker's log does not name the lost ps"
