"""What the benchmark scripts share: where each backend's Python is, and which CPU they ran on."""

import pathlib
import platform

ROOT = pathlib.Path(__file__).resolve().parents[1]


def tox_python(backend, tox_dir=None):
    """The Python of the tox env ``backend`` (in ``tox_dir``, default the repository's ``.tox``), whether
    or not it has been created."""
    return pathlib.Path(tox_dir or ROOT / ".tox") / backend / "bin" / "python"


def installed_python(backend, tox_dir=None):
    """The Python of the tox env ``backend`` as a string, or None where the env has not been created."""
    python = tox_python(backend, tox_dir)
    return str(python) if python.exists() else None


def cpu_name():
    """The CPU's model name (Linux's /proc/cpuinfo), else what the platform module says."""
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def scratch_gradient(backend):
    """How the from-scratch models' gradient is computed on ``backend``: the hand-written BPTT of
    ``d2lrnn/models/bptt.py``, or, on MXNet, its own autograd over the scans (``ops.custom_vjp``'s
    ``differentiable``)."""
    return "MXNet's autograd over the scans" if backend == "mxnet" else "hand-written BPTT"
