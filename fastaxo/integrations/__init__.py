"""Integrations with training frameworks. Each module imports its framework lazily, on use:
``import fastaxo`` never imports axolotl, torch or transformers."""
