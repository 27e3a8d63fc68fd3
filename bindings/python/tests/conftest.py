# SPDX-License-Identifier: MIT
"""Test the package in this source tree (bindings/python/kbthreads) against the
library named by $KBTHREADS_LIBRARY (ctest sets it to the library just built);
without it the package loads the installed libkbthreads.so.0."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # bindings/python: the kbthreads package
sys.path.insert(0, HERE)  # kbfake, scenarios, expected_traces
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tools"))  # kbthreads_tools (kbthreads.dump uses it)


def pytest_configure(config):
    config.addinivalue_line("markers", "child_env(**env): environment of the program a test_debugging fixture runs")
