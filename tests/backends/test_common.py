"""Process-wide settings every backend shares (d2lrnn/backends/_common.py)."""

import os
import subprocess
import sys
import textwrap

import pytest

FAULTS = textwrap.dedent("""
    import resource
    import numpy as np
    import d2lrnn as d2l
    d2l.ops.zeros(1)  # loads the active backend
    def churn():  # as a training step does: several arrays of a few MB, all freed at its end
        for _ in range(10):
            arrays = [np.ones(1 << 20, np.float32) for _ in range(8)]  # 8 x 4 MB
            del arrays
    churn()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    churn()
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
""")


def _page_faults(env):
    out = subprocess.run([sys.executable, "-c", FAULTS], capture_output=True, text=True, check=True,
                         env=env)
    return int(out.stdout.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallopt is glibc's (Linux)")
def test_freed_memory_is_reused_without_page_faults():
    base = dict(os.environ)
    base.pop("D2LRNN_MALLOC", None)
    default = _page_faults(dict(base, D2LRNN_MALLOC="default"))
    tuned = _page_faults(base)
    # 80 arrays of 1,024 pages each: with malloc's defaults the freed heap top is returned to the
    # OS after each step, and the next step faults every page in again.
    assert default > 10 * 1000
    assert tuned < 100
