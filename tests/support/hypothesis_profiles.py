"""The Hypothesis profiles every property test runs under, registered once (tests/conftest.py loads this).

`quick` (the default) runs each property on a few dozen examples: enough to catch a broken property on every
local run, in seconds rather than the minute a hundred examples each took. `thorough` runs each on 300, at
least as many as any test ever asked for; CI runs it on one of its two lines (`.ci/run`), and anyone can ask
for it with `HYPOTHESIS_PROFILE=thorough`. Neither has a deadline: on a shared machine a slow example is noise,
not a bug. Tests set no example counts of their own, so the profile alone decides how hard they look.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

PROFILE_VAR = "HYPOTHESIS_PROFILE"
QUICK, THOROUGH = "quick", "thorough"

settings.register_profile(QUICK, max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    THOROUGH, max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
# An unknown name fails the run at once (Hypothesis raises InvalidArgument): a typo never runs the quick profile.
settings.load_profile(os.environ.get(PROFILE_VAR) or QUICK)
