"""Sub-commands of the ``gold-panning`` CLI (one module each)."""
