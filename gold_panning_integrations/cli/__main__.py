"""``python -m gold_panning_integrations.cli``: the ``gold-panning`` command."""

import sys

from . import main

sys.exit(main())
