"""A short run of every libFuzzer target (tests/fuzz/, docs/fuzzing.md): each replays its
committed corpus, kept crash inputs included, then fuzzes for two seconds. Every target
is one test case; `make fuzz` runs them long."""

import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMOKE_SECONDS = "2"


def suite_fuzz(ext):
    # The script sets its own sanitizer options: reports belong in its output, where the
    # failing case shows them, not in the run's sanitizer log.
    ext.tap([os.path.join(REPO, "scripts", "fuzz.sh"), "--smoke", SMOKE_SECONDS], cwd=REPO,
            timeout=600)
