"""``python -m benchmarks NAME [options]`` from a clone's root (see :mod:`benchmarks._cli`)."""

import sys

from benchmarks._cli import main

sys.exit(main())
