"""bench_tf.py --quick runs both kinds of ps and prints the table whole.

A smoke test, not a timed one: it keeps the benchmark script from rotting
and checks only that every figure was measured.
"""

import os
import subprocess

import pytest

import bench_tf
import harness


def table(stdout):
    """The rows of the markdown table that ends the output, header first."""
    lines = [line for line in stdout.splitlines() if line.startswith("|")]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    return rows[0], rows[2:]


# Two runs of three TensorFlow processes each: 2 minutes on a quiet
# machine, nearly 4 under a load average of 25 on 2 vCPUs.
@pytest.mark.timeout(600)
def test_quick_bench_prints_the_table(starwire, tmp_path):
    out = subprocess.run(
        [harness.PY, os.path.join(harness.HERE, "bench_tf.py"), "--quick", "--ps_counts", "2",
         "--starwire", starwire, "--log_dir", str(tmp_path)],
        capture_output=True, text=True, timeout=560, env=harness.tf_env())
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    header, rows = table(out.stdout)
    assert tuple(header) == bench_tf.COLUMNS
    assert [(r[0], r[1], r[2]) for r in rows] == [("2", "tf", "1"), ("2", "starwire", "1")]
    for r in rows:
        figures = dict(zip(header, r))
        for col in ("steps/s", "CPU s/step", "peak RSS MiB", "TCP B/step"):
            assert float(figures[col]) > 0, (col, r, out.stdout)
        assert float(figures["rw B/step"]) >= 0, (r, out.stdout)
    # starwire reads and writes its sockets with read/write/writev, so
    # /proc's rchar+wchar sees its traffic.
    assert float(dict(zip(header, rows[1]))["rw B/step"]) > 0, out.stdout


@pytest.mark.timeout(900)
def test_quick_ps_strategy_bench_prints_the_table(starwire, tmp_path):
    import bench_ps_strategy
    out = subprocess.run(
        [harness.PY, os.path.join(harness.HERE, "bench_ps_strategy.py"), "--quick",
         "--starwire", starwire],
        capture_output=True, text=True, timeout=860, env=harness.tf_env())
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    header, rows = table(out.stdout)
    assert tuple(header) == bench_ps_strategy.COLUMNS
    assert [r[0] for r in rows] == ["tf", "starwire"]
    for r in rows:
        figures = dict(zip(header, r))
        assert float(figures["steps/s"]) > 0 and float(figures["CPU s/step"]) > 0, (r, out.stdout)
