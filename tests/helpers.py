"""What many tests share: where the fixtures are, and one way to wait for something to happen."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
EXERCISM_SUITE = f"exercism:{FIXTURES / 'exercism'}"
"""The small Exercism fixture suite the simulated coder knows (tests do not depend on the bank)."""
