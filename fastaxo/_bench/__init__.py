"""Benchmark and demo tooling: the benchmark matrix (``fastaxo bench``), its charts, the
baselines it measures against, the built-in demo dataset and the plain-Python pipeline that
``fastaxo demo`` compares with. Never imported by ``import fastaxo``; the CLI imports it on
demand and the scripts in bench/ import it instead of keeping copies."""
