"""Test-wide settings: headless matplotlib."""

from __future__ import annotations

import os

os.environ.setdefault("MPLBACKEND", "Agg")
