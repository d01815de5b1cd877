"""SyncReplicasOptimizer on starwire ps: its gradient accumulators and
token queue live on the ps, and every global step takes one gradient
from each worker."""

from test_between_graph import mean_loss, run_job


def test_sync_replicas_on_starwire_ps(cluster, tmp_path):
    _, runs = run_job(cluster, "starwire", 2, 60, str(tmp_path / "ckpt"), "--sync")
    for i, recs in enumerate(runs):
        assert len(recs) >= 20, "worker %d ran %d steps" % (i, len(recs))
    # Each global step aggregates both workers' gradients: the two run
    # the same global steps, one step each per update.
    steps = [sorted(r["step"] for r in recs) for recs in runs]
    assert max(max(s) for s in steps) >= 59
    both = set(steps[0]) & set(steps[1])
    assert len(both) >= 0.8 * min(len(s) for s in steps), steps
    assert mean_loss(runs[0][-10:]) < mean_loss(runs[0][:10])
