"""The call forms of the shim's tensor makers in the book's Paddle cells (d2l-zh, ``#@tab paddle``).

The Paddle cells call ``d2l.zeros(shape=[n])``, ``d2l.zeros((4, 7), dtype=paddle.int64)``,
``d2l.ones((3, 4), dtype=paddle.int64)``, ``d2l.normal(0, 1, (3, 1))`` and ``d2l.tensor(outputs[-1],
place=device)``: Paddle's dtypes are read by the Paddle backend itself (every tensor maker takes them
there), so what the face adds is Paddle's name for the device, ``place=``, taken for ``device=``.
"""

from ..errors import ArgumentError

#: The keyword the book's Paddle cells give a tensor maker the device by (Paddle's own: ``paddle.to_tensor``).
DEVICE_KEYWORD = "place"


def place_as_device(name, kwargs):
    """``kwargs`` of ``d2l.<name>`` with ``place=`` passed on as ``device=`` (one of the two at most)."""
    if DEVICE_KEYWORD in kwargs:
        if "device" in kwargs:
            raise ArgumentError(f"d2l.{name}: give the device once, as device= or {DEVICE_KEYWORD}=")
        kwargs["device"] = kwargs.pop(DEVICE_KEYWORD)
    return kwargs
