# SPDX-License-Identifier: MIT
"""The installed package's metadata (pyproject.toml). Runs where
the package was installed by pip (ctest's python_package: a wheel in a
fresh venv); in a source tree there is no metadata to read."""
import importlib.metadata
import os

import pytest

import kbthreads


def _distribution():
    """The kbthreads distribution an installer put where this kbthreads was
    imported from, or None. A kbthreads.egg-info that a build left beside
    the package in a source tree is no installation: only an installer
    writes INSTALLER into the metadata (pip, into the wheel's dist-info)."""
    try:
        dist = importlib.metadata.distribution("kbthreads")
    except importlib.metadata.PackageNotFoundError:
        return None
    mine = os.path.realpath(str(dist.locate_file("kbthreads/__init__.py")))
    if mine != os.path.realpath(kbthreads.__file__) or dist.read_text("INSTALLER") is None:
        return None
    return dist


dist = _distribution()
installed = pytest.mark.skipif(dist is None, reason="this kbthreads was not installed by pip (a source tree)")


@installed
def test_the_package_version_is_the_library_version():
    assert dist.version == kbthreads.version() == kbthreads.__version__


@installed
def test_the_metadata_says_what_users_look_for():
    meta = dist.metadata
    assert meta["Requires-Python"] == ">=3.10"
    assert "Typing :: Typed" in meta.get_all("Classifier")
    assert meta["Description-Content-Type"] == "text/markdown"
    assert "pip install" in meta["Description"]  # the README is the long description


@installed
def test_the_console_scripts_are_kbthreads_dump_explore_and_torchrun():
    scripts = {e.name: e.value for e in dist.entry_points if e.group == "console_scripts"}
    assert scripts == {"kbthreads-dump": "kbthreads_tools.dump:main",
                       "kbthreads-explore": "kbthreads_tools.explore.cli:main",
                       "kbthreads-torchrun": "kbthreads.torch.run:main"}
    assert "kbthreads/torch/run.py" in {str(f) for f in dist.files}


@installed
def test_the_package_is_typed_and_carries_its_compiled_part():
    files = {str(f) for f in dist.files}
    assert "kbthreads/py.typed" in files
    assert any(f.startswith("kbthreads/_accel.") and f.endswith(".so") for f in files)
    assert {"kbthreads_tools/dump.py", "kbthreads_tools/explore/cli.py", "kbthreads_tools/kbthreads_gdb.py"} <= files


@installed
def test_the_metadata_names_the_tested_versions_from_3_10_to_3_13():
    versions = [c.rsplit(" :: ", 1)[1] for c in dist.metadata.get_all("Classifier")
                if c.startswith("Programming Language :: Python :: 3.")]
    assert versions == ["3.10", "3.11", "3.12", "3.13"]


@installed
def test_the_license_is_mit():
    assert dist.metadata["License"] == "MIT"
    assert "License :: OSI Approved :: MIT License" in dist.metadata.get_all("Classifier")


@installed
def test_the_package_carries_its_license_and_concurrency_kits_notice():
    """libck.a is linked into kbthreads._accel: its BSD-2-Clause notice travels with it."""
    meta = {str(f).rsplit("/", 1)[-1]: f for f in dist.files if ".dist-info/" in str(f)}
    assert meta["LICENSE"].read_text().startswith("MIT License")
    assert "Concurrency Kit" in meta["ConcurrencyKit-BSD-2-Clause.txt"].read_text()
