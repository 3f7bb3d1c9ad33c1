"""The README is the landing page: short, with the two set-up commands as they are, its links into the docs site
alive and its `soak` commands the CLI's. What it used to hold (outcomes, commands, ...) lives in the docs now, held to
the code by tests/test_docs.py."""

import re

from tests.helpers import REPO
from tests.test_docs import blocks, commands, parse_error

README = REPO / "README.md"
SET_UP = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[local]' && soak run --minutes 10",
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[local,dev]' && pytest",
)


def test_the_readme_is_a_landing_page():
    assert len(README.read_text().splitlines()) <= 150


def test_the_two_set_up_commands_are_there_as_they_are():
    shell = [block.text for block in blocks([README]) if block.info == "sh"]
    assert all(command in shell for command in SET_UP), shell


def test_every_link_of_the_readme_leads_somewhere():
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text())
    local = [target for target in targets if "://" not in target]
    assert len(local) >= 20  # the links into the docs site
    assert [target for target in local if not (REPO / target).is_file()] == []


def test_every_soak_command_of_the_readme_parses():
    found = [args for block in blocks([README]) if block.info == "sh" for args in commands(block)]
    assert len(found) >= 6
    assert [args for args in found if parse_error(args) is not None] == []
