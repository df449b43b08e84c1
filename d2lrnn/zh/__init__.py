"""The book's Chinese 2.x edition with the framework in the import line, as the book's own package has it::

    from d2lrnn.zh import torch as d2l      # instead of: from d2l import torch as d2l

Each module here (``numpy``, ``torch``, ``tensorflow``, ``mxnet``, ``jax``, ``paddle``) is the package face,
``import d2lrnn as d2l``, with its backend chosen by the import rather than by ``D2LRNN_BACKEND``: importing
it makes that backend the active one (importing its framework now), and says so once where the variable
names another. One process runs one framework: a second module of another framework is refused in one line.
"""
