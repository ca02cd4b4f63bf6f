#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs the worked example service (pulse.service; see README.md beside this file):

    python3 examples/service/service.py [--help]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pulse.service import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
