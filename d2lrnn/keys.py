"""Keys of compiled functions (``ops.compile(fn, key=...)``): what a function computes besides its
arguments, as a hashable value, so that functions of equal keys share their traced programs.

Only d2lrnn's own code gets a key: its models, cells, optimizers and losses compute what their settings
say. A reader's subclass, function or layer may read anything at all, so it gets none (None: compiled
on its own, as without keys).
"""

#: Attribute values a settings object's key holds as they are.
PLAIN = (bool, int, float, str, type(None))


def from_d2lrnn(obj):
    """Whether ``obj``, a function or an object of a class, is d2lrnn's own code."""
    module = obj.__module__ if callable(obj) and hasattr(obj, "__code__") else type(obj).__module__
    return isinstance(module, str) and module.startswith("d2lrnn.")


def own(obj, methods=("forward",)):
    """Whether ``obj`` is an object of one of d2lrnn's classes whose ``methods`` no instance attribute
    replaces: only then do its settings say what it computes."""
    return from_d2lrnn(obj) and not vars(obj).keys() & set(methods)


def key_of(obj):
    """``obj.compile_key()`` where it has one (d2lrnn's models), else None."""
    method = getattr(obj, "compile_key", None)
    return method() if callable(method) else None


def tagged(tag, key):
    """``(tag, key)``, a key for another function of the same object; None where ``key`` is None."""
    return None if key is None else (tag, key)


def device_key(device):
    """A device (None, a framework's device object or name) as part of a key."""
    return None if device is None else (type(device).__name__, str(device))


def settings_key(obj):
    """``(class, attributes)`` of one of d2lrnn's settings objects (an optimizer, a truncation) whose
    attributes are all plain values; None for any other."""
    if not from_d2lrnn(obj):
        return None
    items = tuple(sorted(vars(obj).items()))
    if not all(isinstance(value, PLAIN) for _, value in items):
        return None
    return (type(obj), items)
