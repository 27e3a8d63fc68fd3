# SPDX-License-Identifier: MIT
"""A package run with -m: its __main__ runs in every rank."""
