"""``python -m d2lrnn.cli``: the same as the ``d2lrnn`` command."""

import sys

from . import main

sys.exit(main())
