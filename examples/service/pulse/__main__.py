# SPDX-License-Identifier: Apache-2.0
"""python3 -m pulse (from examples/service): the service."""
import sys

from .service import main

sys.exit(main())
