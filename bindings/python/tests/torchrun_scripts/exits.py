# SPDX-License-Identifier: MIT
"""exits.py CODE0 CODE1 ...: rank R calls sys.exit with argument R+1 (a number or a message)."""
import os
import sys

code = sys.argv[1 + int(os.environ["RANK"])]
sys.exit(int(code) if code.lstrip("-").isdigit() else code)
