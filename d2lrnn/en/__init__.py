"""The book's English 1.0 edition (d2l.ai) with the framework in the import line, as its own package has it::

    from d2lrnn.en import torch as d2l      # instead of: from d2l import torch as d2l

The 1.0 edition trains with classes (``d2l.Module``, ``d2l.DataModule``, ``d2l.Trainer``, ``d2l.RNNScratch``,
``d2l.RNNLMScratch``, ``d2l.GRU``, ``d2l.Seq2Seq``, ...), where the Chinese 2.x edition that ``import d2lrnn``
and :mod:`d2lrnn.zh` follow calls functions (``train_ch8``). Each module here (``torch``, ``mxnet``,
``tensorflow``, ``jax``: the frameworks of the 1.0 edition) makes its backend the active one as
:mod:`d2lrnn.zh`'s do, and gives the 1.0 names (:mod:`d2lrnn.book.en`) over the 2.x face's.
"""
