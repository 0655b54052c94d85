"""``prepare``: files -> [tokenize] -> checks -> dedupe -> windows -> pack -> Parquet."""

from fastaxo.pipeline.prepare import PrepareReport, prepare

__all__ = ["PrepareReport", "prepare"]
