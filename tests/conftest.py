"""Shared pytest set-up: hypothesis profiles and common fixtures."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# `ci` (default): bounded examples, no deadline (2 shared cores make timings noisy).
settings.register_profile("ci", max_examples=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("full", max_examples=300, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
