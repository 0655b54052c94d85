"""Sphinx configuration of fastaxo's API reference (built from the docstrings).

    python -m sphinx -W -b html docs/api build/docs      # (scripts/test.sh runs it; -W: a
                                                          # warning fails the build)
"""

project = "fastaxo"
author = "fastaxo developers"
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon"]
napoleon_google_docstring = False
napoleon_numpy_docstring = True
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}
# the compiled kernels' stubs describe them; the docs document the Python API above them
autodoc_mock_imports: list[str] = []
nitpicky = False
html_theme = "alabaster"
exclude_patterns = ["_build"]
