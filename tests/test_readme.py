"""The README's outcomes and commands are the schema's and the CLI's: a renamed, added or dropped one fails here
instead of leaving the README behind."""

import re
from typing import get_args

import click

from soak.cli import main
from soak.decisions.gate import GATES
from soak.record.schema import MODEL_OUTCOMES, OUTCOME_MEANINGS, Outcome
from tests.helpers import REPO

README = (REPO / "README.md").read_text()


def table(header: str) -> list[list[str]]:
    """The cells of the README table whose header row is `header`, row by row."""
    lines = README.splitlines()
    start = lines.index(header) + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


def test_every_outcome_has_one_meaning_in_the_schemas_order():
    assert list(OUTCOME_MEANINGS) == list(get_args(Outcome))


def test_the_readme_outcomes_are_the_schemas():
    rows = table("| outcome | against the model | meaning |")
    expected = [[f"`{name}`", "yes" if name in MODEL_OUTCOMES else "no", meaning]
                for name, meaning in OUTCOME_MEANINGS.items()]
    assert rows == expected


def command_names(group: click.Group, prefix: str = "") -> list[str]:
    names = []
    for name, command in group.commands.items():
        if command.hidden:
            continue
        if isinstance(command, click.Group):
            names += command_names(command, f"{prefix}{name} ")
        else:
            names.append(prefix + name)
    return names


def readme_commands() -> list[str]:
    """`soak run`, `soak agent setup|list`, ... in the first column -> run, agent setup, agent list, ... (once each:
    a row may show two forms of one command)."""
    names = []
    for row in table("| command | job |"):
        for span in re.findall(r"`soak ([^`]+)`", row[0]):
            words = span.replace("\\|", "|").split()
            if isinstance(main.commands.get(words[0]), click.Group):
                names += [f"{words[0]} {sub}" for sub in words[1].split("|")]
            else:
                names.append(words[0])
    return list(dict.fromkeys(names))


def test_the_readme_commands_are_the_clis():
    assert sorted(readme_commands()) == sorted(command_names(main))


def test_the_gate_choices_are_the_gates():
    (name,) = [param for param in main.commands["gate"].params if param.name == "name"]
    assert list(name.type.choices) == [*GATES, "all"]
