"""The docs site (docs/, mkdocs.yml) says what the code does: it builds with `mkdocs build --strict`, its generated
reference holds every command, flag, soak.toml key, run folder column and sim scenario, every `soak` command in its
shell blocks parses, the blocks marked `<!-- test: run -->` run, every TOML example validates against the model it is
titled with, and its hand-written tables (outcomes, commands) are the schema's and the CLI's."""

import importlib.util
import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import NamedTuple, get_args

import click
import pytest
from click.testing import CliRunner
from pydantic import BaseModel

from soak.cli import main
from soak.config import SoakConfig
from soak.decisions.routing import Routing
from soak.night.sweep import SweepFile, merged
from soak.probes.gate import GATES
from soak.record.schema import MODEL_OUTCOMES, OUTCOME_MEANINGS, AttemptRow, Outcome, Row
from soak.sim.scenario import builtin_scenarios
from tests.helpers import REPO

DOCS = REPO / "docs"
PAGES = sorted(DOCS.rglob("*.md"))


class Block(NamedTuple):
    page: Path
    line: int
    info: str
    """What follows the opening backticks: the language and its attributes (`toml title="soak.toml"`)."""
    marker: str
    """The `<!-- test: WHAT -->` on the line before the block, "" when none."""
    text: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def blocks(pages: list[Path] = PAGES) -> Iterator[Block]:
    for page in pages:
        lines = page.read_text().splitlines()
        start = None
        for number, line in enumerate(lines):
            if line.startswith("```") and start is None:
                start = number
            elif line.startswith("```"):
                previous = lines[start - 1].strip() if start else ""
                marker = re.fullmatch(r"<!-- test: (\w+) -->", previous)
                yield Block(page, start + 1, lines[start][3:].strip(), marker[1] if marker else "",
                            "\n".join(lines[start + 1 : number]))
                start = None


def commands(block: Block) -> Iterator[list[str]]:
    """Each `soak ...` command of a shell block (or a `$ soak ...` line of an output block): its words up to the first
    pipe, redirection or `&&`, comments dropped; continued lines joined."""
    for line in block.text.replace("\\\n", " ").splitlines():
        line = line.removeprefix("$ ") if block.info == "" else line
        if not line.startswith("soak "):
            continue
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split, lexer.commenters = True, "#"
        words = []
        for word in lexer:
            if set(word) <= set("|&;<>"):
                break
            words.append(word)
        yield words[1:]


def parse_error(args: list[str]) -> str | None:
    """Why click refuses `soak ARGS` (an unknown command or flag), None when it takes them: `--help` is added, so the
    command is parsed and its options checked, but nothing runs."""
    result = CliRunner().invoke(main, [*args, "--help"])
    return None if result.exit_code == 0 else result.output.strip().splitlines()[-1]


SHELL = ("sh", "bash", "")


def test_every_soak_command_in_the_docs_parses():
    checked, refused = 0, []
    for block in blocks():
        if block.info.split(" ")[0] not in SHELL:
            continue
        for args in commands(block):
            checked += 1
            if (error := parse_error(args)) is not None:
                refused.append(f"{block.where}: soak {shlex.join(args)}: {error}")
    assert not refused, "\n".join(refused)
    assert checked >= 25, checked  # the collector found the guides' commands


def test_the_check_catches_an_unknown_flag_and_command():
    assert parse_error(["run", "--hours", "8"]) is None
    assert "--hourz" in (parse_error(["run", "--hourz", "8"]) or "")
    assert parse_error(["rnu"]) is not None


def run_block(block: Block, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SOAK_DATA_DIR": str(tmp_path / "data"), "SOAK_REPORTS_DIR": str(tmp_path / "reports"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["bash", "-euo", "pipefail", "-c", block.text], cwd=tmp_path, env=env, text=True,
                          capture_output=True, timeout=600)


RUN = [block for block in blocks() if block.marker == "run"]
SLOW_RUN = [block for block in blocks() if block.marker == "slow"]


@pytest.mark.parametrize("block", RUN, ids=[block.where for block in RUN])
def test_a_quick_block_runs(block: Block, tmp_path: Path):
    done = run_block(block, tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("block", SLOW_RUN, ids=[block.where for block in SLOW_RUN])
def test_a_long_block_runs(block: Block, tmp_path: Path):
    done = run_block(block, tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def test_blocks_marked_to_run_are_there():
    assert RUN and SLOW_RUN
    assert all(block.info.split(" ")[0] in ("sh", "bash") for block in RUN + SLOW_RUN)


def check_sweep(data: dict) -> None:
    """A sweep file's own keys, then each configuration's overrides on top of a default soak.toml, as `soak sweep`
    resolves them (the base file an example names is not there)."""
    sweep = SweepFile.model_validate(data)
    for configuration in sweep.configurations:
        SoakConfig.model_validate(merged(SoakConfig().model_dump(), configuration.overrides))


CHECKS = {"soak.toml": SoakConfig.model_validate, "sweep.toml": check_sweep, "routing.toml": Routing.model_validate}


def toml_blocks() -> list[Block]:
    return [block for block in blocks() if block.info.split(" ")[0] == "toml"]


@pytest.mark.parametrize("block", toml_blocks(), ids=[block.where for block in toml_blocks()])
def test_every_toml_example_is_valid(block: Block):
    title = re.search(r'title="([^"]+)"', block.info)
    assert title and title[1] in CHECKS, f'{block.where}: title the block with one of {", ".join(CHECKS)}'
    CHECKS[title[1]](tomllib.loads(block.text))


def test_a_toml_example_with_an_unknown_key_fails():
    with pytest.raises(ValueError, match="budgetz"):
        SoakConfig.model_validate(tomllib.loads("[budgetz]\ntask_seconds = 1"))
    with pytest.raises(ValueError, match="cofigurations"):
        check_sweep(tomllib.loads('[[cofigurations]]\nname = "a"'))
    with pytest.raises(ValueError, match="enpoints"):
        check_sweep(tomllib.loads('[[configurations]]\nname = "a"\n[configurations.overrides.enpoints.x]\n'
                                  'base_url = "u"\nmodel = "m"'))


def test_the_toml_examples_cover_each_kind():
    titles = {re.search(r'title="([^"]+)"', block.info)[1] for block in toml_blocks()}  # type: ignore[index]
    assert titles == set(CHECKS)


def load_hook() -> ModuleType:
    """docs/reference_hook.py, which mkdocs loads by its path."""
    spec = importlib.util.spec_from_file_location("reference_hook", DOCS / "reference_hook.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HOOK = load_hook()


# --- the built site ----------------------------------------------------------------------------------------------


# The tests of the built site share one build: one xdist worker takes them all (--dist loadgroup).
on_the_site = pytest.mark.xdist_group("docs_site")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`mkdocs build --strict`, as CI runs it: a broken link, a missing page or a bad hook fails here."""
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def command_paths(group: click.Group, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    for name, command in group.commands.items():
        if command.hidden:
            continue
        yield (*prefix, name), command
        if isinstance(command, click.Group):
            yield from command_paths(command, (*prefix, name))


@on_the_site
def test_every_command_and_flag_is_in_the_built_reference(site: Path):
    page = (site / "reference" / "cli.html").read_text()
    assert "UNSET" not in page  # mkdocs-click's table style shows click's sentinel for an option without a default
    missing = []
    for path, command in command_paths(main):
        if f'id="soak-{"-".join(path)}"' not in page:
            missing.append(" ".join(path))
        missing += [f"{' '.join(path)} {opt}" for param in command.params if isinstance(param, click.Option)
                    and not param.hidden for opt in param.opts if opt.startswith("--") and opt not in page]
    assert not missing, missing


def tables(model: type[BaseModel], key: str = "") -> Iterator[tuple[str, str]]:
    """(TOML table, key) of every soak.toml key, walked apart from the generator."""
    for name, field in model.model_fields.items():
        inner = HOOK.nested(field.annotation)
        if inner:
            yield from tables(inner[1], f"{key}.{name}" if key else name)
        else:
            yield key, name


def sections(page: str) -> dict[str, str]:
    """A page's HTML cut at its h2 headings, by the heading's text."""
    parts = re.split(r"<h2 id=\"[^\"]*\">(.*?)<a class=\"headerlink\"", page)
    return {re.sub(r"<[^>]+>", "", parts[i]).strip(): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


@on_the_site
def test_every_config_key_is_in_the_built_reference(site: Path):
    found = sections((site / "reference" / "config.html").read_text())
    missing = []
    for table, key in tables(SoakConfig):
        heading = f"[{table}]" if table else "Top level"
        section = next((text for found_heading, text in found.items()
                        if found_heading in (heading, f"[[{table}]]", f"[{table}.NAME]")), "")
        if f"<code>{key}</code>" not in section:
            missing.append(f"[{table}] {key}")
    assert not missing, missing


@on_the_site
def test_every_column_of_every_run_folder_file_is_in_the_built_reference(site: Path):
    page = (site / "reference" / "run-folder.html").read_text()
    documented = HOOK.RUN_FOLDER
    rows = {model for base in Row.__subclasses__() for model in (base, *base.__subclasses__())} - {AttemptRow}
    assert rows <= set(documented.values())  # a new CSV's model needs its entry
    found = sections(page)
    missing = [f"{file} {column}" for file, model in documented.items() for column in model.model_fields
               if f"<code>{column}</code>" not in found.get(file.replace("`", ""), "")]
    assert not missing, missing


@on_the_site
def test_every_scenario_is_in_the_built_reference(site: Path):
    page = (site / "reference" / "scenarios.html").read_text()
    assert builtin_scenarios() and all(f'id="{name}"' in page for name in builtin_scenarios())


@on_the_site
def test_the_reference_says_what_a_field_docstring_says(site: Path):
    """The generated text is the code's: a docstring, a default and a type reach the page."""
    page = (site / "reference" / "config.html").read_text()
    assert "Wall-clock budget of one task, LLM calls and test runs together." in page
    assert "<code>600</code>" in page and "<code>float</code>" in page


# --- hand-written tables that name the schema's and the CLI's things ---------------------------------------------


def table(page: Path, header: str) -> list[list[str]]:
    """The cells of the table whose header row is `header`, row by row."""
    lines = page.read_text().splitlines()
    start = lines.index(header) + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


def test_every_outcome_has_one_meaning_in_the_schemas_order():
    assert list(OUTCOME_MEANINGS) == list(get_args(Outcome))


def test_the_outcomes_table_is_the_schemas():
    rows = table(DOCS / "start" / "morning-report.md", "| outcome | against the model | meaning |")
    expected = [[f"`{name}`", "yes" if name in MODEL_OUTCOMES else "no", meaning]
                for name, meaning in OUTCOME_MEANINGS.items()]
    assert rows == expected


def overview_commands() -> list[str]:
    """`soak run`, `soak agent setup|list`, ... in the first column -> run, agent setup, agent list, ... (once each:
    a row may show two forms of one command)."""
    names = []
    for row in table(DOCS / "reference" / "cli.md", "| command | job |"):
        for span in re.findall(r"`soak ([^`]+)`", row[0]):
            words = span.replace("\\|", "|").split()
            if isinstance(main.commands.get(words[0]), click.Group):
                names += [f"{words[0]} {sub}" for sub in words[1].split("|")]
            else:
                names.append(words[0])
    return list(dict.fromkeys(names))


def test_the_commands_overview_is_the_clis():
    leaves = [" ".join(path) for path, command in command_paths(main) if not isinstance(command, click.Group)]
    assert sorted(overview_commands()) == sorted(leaves)


def test_the_gate_choices_are_the_gates():
    (name,) = [param for param in main.commands["gate"].params if param.name == "name"]
    assert list(name.type.choices) == [*GATES, "all"]
