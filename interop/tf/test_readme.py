"""The README's "With TensorFlow" lines, run as written: its shell block
starts the ps tasks and runs train.py, the section's Python block."""

import os
import re
import shutil
import subprocess

import harness

SECTION = "## With TensorFlow"


def section():
    with open(os.path.join(harness.REPO, "README.md")) as f:
        text = f.read()
    start = text.index(SECTION + "\n")
    end = text.index("\n## ", start + len(SECTION))
    return text[start:end]


def blocks(sec):
    """The indented shell block and the fenced python block."""
    python = re.search(r"```python\n(.*?)```", sec, re.S).group(1)
    shell, cur = [], []
    for line in sec.splitlines():
        if line.startswith("    "):
            cur.append(line[4:])
        elif cur:
            shell.append("\n".join(cur))
            cur = []
    return shell[0], python


def test_readme_with_tensorflow(starwire, tmp_path):
    shell, python = blocks(section())
    assert "python train.py" in shell and "starwire serve" in shell
    (tmp_path / "train.py").write_text(python)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(starwire, bindir / "starwire")
    # pip install is what .ci/run did from the pinned requirements; the
    # rest runs as written, its background tasks killed when it ends.
    script = shell.replace("pip install tensorflow-cpu==2.21.0",
                           "python -c 'import tensorflow'")
    shutil.rmtree("/tmp/tf-ckpt", ignore_errors=True)
    env = harness.tf_env()
    # python is the suite's own (its virtual environment's bin directory).
    env["PATH"] = os.pathsep.join([str(bindir), os.path.dirname(harness.PY), env["PATH"]])
    # No wait for the ps tasks to listen: TensorFlow's master waits for
    # the tasks of its cluster itself.
    wrapped = "set -e\ntrap 'kill $(jobs -p) 2>/dev/null' EXIT\n" + script
    try:
        out = subprocess.run(["bash", "-c", wrapped], cwd=tmp_path, env=env, timeout=300,
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        m = re.search(r"global step (\d+) loss (\S+)", out.stdout)
        assert m and int(m.group(1)) >= 199, out.stdout[-2000:]
        assert float(m.group(2)) < 0.69, out.stdout[-2000:]
        import tensorflow as tf
        assert tf.train.load_checkpoint("/tmp/tf-ckpt").get_tensor("global_step") >= 200
    finally:
        shutil.rmtree("/tmp/tf-ckpt", ignore_errors=True)
