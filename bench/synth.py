"""Moved to tests/synth.py (the tests import it; the benchmarks too): this name stays
for scripts and branches that still say `from bench import synth`."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.synth import *  # noqa: F403
from tests.synth import DATA, main  # noqa: F401

if __name__ == "__main__":
    raise SystemExit(main())
