"""Fixtures of the interoperability suite with real TensorFlow.

TensorFlow must be importable: under CI (CI=true) or with
STARWIRE_REQUIRE_TF=1 a missing TensorFlow fails every test; elsewhere the
suite is skipped with the reason, never silently.
"""

import os

import pytest

import harness


def _tensorflow_missing():
    try:
        import tensorflow  # noqa: F401
    except ImportError as e:
        return str(e)
    return None


def _required():
    return os.environ.get("STARWIRE_REQUIRE_TF") == "1" or os.environ.get("CI") == "true"


def pytest_collection_modifyitems(config, items):
    missing = _tensorflow_missing()
    if missing is None:
        return
    if _required():
        marker = pytest.mark.usefixtures("_fail_without_tensorflow")
    else:
        marker = pytest.mark.skip(reason="TensorFlow is not installed (%s): "
                                  "pip install -r interop/tf/requirements.txt" % missing)
    for item in items:
        item.add_marker(marker)


@pytest.fixture
def _fail_without_tensorflow():
    pytest.fail("TensorFlow is required (CI or STARWIRE_REQUIRE_TF=1) but does not import: %s"
                % _tensorflow_missing())


@pytest.fixture(scope="session")
def starwire(tmp_path_factory):
    """The starwire binary, built once for the session."""
    return harness.build_starwire(str(tmp_path_factory.mktemp("bin")))


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


@pytest.fixture
def procs(request, tmp_path):
    """Starts the test's processes; kills them all when it ends, and shows
    their logs when it failed."""
    p = harness.Procs(str(tmp_path))
    yield p
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        print(p.logs())
    p.close()


@pytest.fixture
def cluster(procs, starwire):
    """Makes a harness.Cluster: cluster(num_ps, num_workers)."""
    def make(num_ps, num_workers, **kw):
        return harness.Cluster(procs, starwire, num_ps, num_workers, **kw)
    return make
