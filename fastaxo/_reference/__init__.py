"""Plain NumPy/hashlib implementations of every kernel: the oracle the tests compare the
compiled kernels with, and the fallback when the extension is missing (FASTAXO_PURE_PYTHON=1
forces it). :mod:`.hashing` mirrors fastaxo.hashing, :mod:`.packing` fastaxo.packing and
fastaxo.padding. They import only the standard library, numpy and pyarrow."""
