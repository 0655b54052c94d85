# The contributor's loop (CONTRIBUTING.md). `make help` lists the targets.
#
#   make dev                      once: a small venv (no torch, no Axolotl) + in-place build
#   make build                    after editing .pyx/.pxi/.pxd or csrc/: rebuild what changed
#   make test T=tests/test_pack.py   one file (or node, or -k ...) against the in-place build
#   make quick                    the suite without Axolotl and Ray (those tests skip here)
#   make lint types               ruff + layout rules; mypy + stubtest
#   make full                     what CI runs: bash .ci/run (fresh venv, wheel, every test)
PYTHON ?= python3
DEV ?= .venv-dev
VPY := $(abspath $(DEV))/bin/python
T ?= tests
# The quick loop imports the source tree (an editable install); this test exists to make sure
# CI tests the installed wheel instead, so it cannot pass here.
SOURCE_TREE_ONLY := --deselect tests/test_install.py::test_imported_from_installed_package_not_source_tree
PYTEST := PYTHONPATH=$(CURDIR) $(VPY) -m pytest -p no:cacheprovider -q $(SOURCE_TREE_ONLY)

.PHONY: help dev build test quick lint types stubs full clean

help:
	@sed -n '2,9p' Makefile | sed 's/^# \{0,1\}//'

$(VPY):
	$(PYTHON) -m venv $(DEV)
	$(VPY) -m pip install -q -U pip

dev: $(VPY)
	$(VPY) -m pip install -q -c constraints.txt "Cython>=3.1" "setuptools>=77" "numpy>=2"
	$(VPY) -m pip install -q -c constraints.txt --no-build-isolation -e ".[dev]"
	$(MAKE) build

build: $(VPY)
	$(VPY) setup.py -q build_ext --inplace -j 2

test: $(VPY)
	$(PYTEST) $(T)

quick: $(VPY)
	$(PYTEST) tests

lint: $(VPY)
	$(VPY) -m ruff check fastaxo tests bench scripts setup.py
	$(VPY) scripts/check_layout.py

types: $(VPY)
	$(VPY) -m mypy
	$(MAKE) stubs

stubs: $(VPY)
	cd / && PYTHONPATH=$(CURDIR) $(VPY) -m mypy.stubtest --allowlist $(CURDIR)/stubtest-allowlist.txt fastaxo._hash fastaxo._pack fastaxo._tok

full:
	CI=true bash .ci/run

clean:
	rm -rf build fastaxo/*.so fastaxo/*.pyd fastaxo/_hash.c fastaxo/_pack.c fastaxo/_tok.c fastaxo/_build_info.py
