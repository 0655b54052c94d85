"""``prepare``: files -> [tokenize] -> checks -> dedupe -> windows -> pack -> Parquet.

:mod:`.prepare` runs the pass; its stages are functions of their own (:mod:`.stages`,
:mod:`.columns`, :mod:`.writer`, :mod:`.report`) that the Ray integration shares.
"""

from fastaxo.pipeline.prepare import prepare
from fastaxo.pipeline.report import PrepareReport

__all__ = ["PrepareReport", "prepare"]
