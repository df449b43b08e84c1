"""``python -m d2lrnn``: the same as the ``d2lrnn`` command."""

import sys

from .cli import main

sys.exit(main())
