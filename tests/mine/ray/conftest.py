"""The Ray tests' cluster: `cluster`, a local Ray of 2 CPUs started once per session (without its dashboard)
for the test modules that ask for it (`pytestmark = pytest.mark.usefixtures("cluster")`); skipped where the
ray extra is not installed."""

import pytest


@pytest.fixture(scope="session")
def cluster():
    ray = pytest.importorskip("ray", reason="the Ray engine needs the ray extra: pip install -e '.[ray]'")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    if started:
        ray.shutdown()
