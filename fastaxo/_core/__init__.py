"""The layer under the public modules: argument checks, kernel status -> exception, /proc
statistics, Arrow views, ragged columns, the extension loader, thread counts and the config
report. Modules here import the standard library, numpy, pyarrow, :mod:`fastaxo.errors` and each
other, never anything above this package."""
