"""``python -m trio_actors``: the same as the ``trio-actors`` command."""

import sys

from .sweeps._cli import main

sys.exit(main())
