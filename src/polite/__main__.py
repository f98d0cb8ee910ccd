"""``python -m polite`` runs the command line."""

from __future__ import annotations

import sys

from polite.cli import main

sys.exit(main())
