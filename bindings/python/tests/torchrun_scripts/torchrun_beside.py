# SPDX-License-Identifier: MIT
"""A module beside show_rank.py: importable when the script's folder is on sys.path."""
