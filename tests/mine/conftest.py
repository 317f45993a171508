"""The miner's tests (tests/mine/join, ray, run, mirroring vhmine/mine): this file puts tests/mine on the path,
so their shared row sets and runs are imported by name (`from mine_sets import ...`, `from mine_runs import
...`); the Ray tests share the session's cluster (tests/conftest.py's ray_cluster)."""

import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
