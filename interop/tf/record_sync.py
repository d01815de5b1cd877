"""Records what TensorFlow's masters send a starwire ps under
SyncReplicasOptimizer: two job.py workers (--sync) train a few steps on two
starwire ps tasks started with --record_dir, and the first requests ps 0
received are copied to handlers/testdata/tf1-sync-ps0, which
handlers/tfreplay_test.go replays without TensorFlow.

    cd interop/tf && ../../.venv-tf/bin/python record_sync.py
"""

import os
import shutil
import sys
import tempfile

import harness

OUT = os.path.join(harness.REPO, "handlers", "testdata", "tf1-sync-ps0")
# The sessions, the init steps and the graph partitions come first; the
# recording stops at the second training partition (one per worker: it
# applies the worker's gradients and dequeues its token), as the steps
# after it repeat the same calls.
TRAIN_OP = b"QueueDequeueV2"


def main():
    tmp = tempfile.mkdtemp(prefix="record-sync-")
    procs = harness.Procs(tmp)
    try:
        binary = harness.build_starwire(tmp)
        c = harness.Cluster(procs, binary, 2, 2)
        rec = os.path.join(tmp, "rec")
        for i in range(2):
            extra = ["--record_dir", rec] if i == 0 else []
            c.start_starwire_ps(i, extra=extra)
        ws = [c.start_worker(i, "--steps", "3", "--sync") for i in range(2)]
        for w in ws:
            if w.wait(300) != 0:
                sys.exit(w.log()[-3000:])
        shutil.rmtree(OUT, ignore_errors=True)
        os.makedirs(OUT)
        seen = 0
        for name in sorted(os.listdir(rec)):
            shutil.copy(os.path.join(rec, name), OUT)
            if name.endswith("-RegisterGraph.pb"):
                with open(os.path.join(rec, name), "rb") as f:
                    seen += TRAIN_OP in f.read()
            if seen == 2:
                break
        else:
            sys.exit("no two training partitions in the recording")
    finally:
        procs.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
