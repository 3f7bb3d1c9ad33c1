"""The Exercism practice-exercise layout, read the way the track's own tooling reads it.

One folder per exercise:

- `.meta/config.json` `files`: `solution` (the one file the coder writes, its content the stub), `test` (the
  unittest modules; a listed file that defines no test, like paasio's `test_utils.py`, is a helper), `example`
  (the reference), `editor` (files the student gets read-only beside the stub: shown in the prompt, written beside
  the tests), `invalidator` (files the results depend on: written beside the tests). `"test_runner": false` (the
  track's online runner does not run these tests: too heavy) gives the exercise the slow test timeout, tag `slow`.
- `.docs/introduction.md`, `instructions.md` (each with its `.append.md`) and `hints.md`: the prompt, in the
  order Exercism shows them.
- `.meta/tests.toml`: a case marked `include = false` is one the track's generator leaves out; a test still named
  after it (`test_<description in snake case>`, the generator's naming) is removed from the test file, unless an
  included case gives the same name.
- A test the file skips (`@unittest.skip...`, the track's extra-credit test) is un-skipped, as the track's CI
  (`bin/test_exercises.py`) does: soak never counts a skipped test as passed.
- A sibling module the tests, the stub or the example import without the config listing it (error-handling's
  `test_utils.py`) is a helper too.
- Refactoring exercises (instructions or blurb starting "Refactor") are tagged `refactoring` and skipped: the job
  is better code that still passes the tests, and their stub is working code, so the tests cannot judge it.

An optional `soak-exercism.toml` in the suite's folder sets the test timeouts and overrides any exercise.
"""

import ast
import json
import re
import tomllib
from pathlib import Path
from string import punctuation, whitespace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from soak import python_ast
from soak.errors import BadInput
from soak.files import load_model
from soak.tasks.spec import Difficulty, TaskMeta, TaskSpec

SETTINGS_FILE = "soak-exercism.toml"
DEFAULT_TEST_TIMEOUT_SECONDS: float = TaskMeta.model_fields["test_timeout_seconds"].default
SLOW_TEST_TIMEOUT_SECONDS = 300.0
REFACTORING = (
    "refactoring exercise: the job is better code that still passes the tests, which no test can judge; "
    f"run it anyway with skip = \"\" in {SETTINGS_FILE}"
)


class ExerciseOverride(BaseModel):
    """`[exercise.<slug>]` in soak-exercism.toml."""

    model_config = ConfigDict(extra="forbid")

    test_timeout_seconds: float | None = Field(default=None, gt=0)
    budget_seconds: float | None = Field(default=None, gt=0)
    max_calls: int | None = Field(default=None, gt=0)
    difficulty: Difficulty | None = None
    skip: str | None = None
    """A reason to leave the exercise out, or "" to run one soak skips (a refactoring exercise)."""


class SuiteSettings(BaseModel):
    """soak-exercism.toml: the suite's test timeouts and per-exercise overrides."""

    model_config = ConfigDict(extra="forbid")

    test_timeout_seconds: float = Field(default=DEFAULT_TEST_TIMEOUT_SECONDS, gt=0)
    """Every exercise's tests, in seconds."""
    slow_test_timeout_seconds: float = Field(default=SLOW_TEST_TIMEOUT_SECONDS, gt=0)
    """Exercises whose `.meta/config.json` says `"test_runner": false`."""
    exercise: dict[str, ExerciseOverride] = Field(default_factory=dict)


def settings(root: Path) -> SuiteSettings:
    path = root / SETTINGS_FILE
    return load_model(path, SuiteSettings, "Exercism suite settings") if path.is_file() else SuiteSettings()


# --- tests.toml and the test files -------------------------------------------------------------------------


def to_snake(text: str) -> str:
    """The track generator's `to_snake` (exercism/python bin/generate_tests.py): what test methods are named by."""
    clean = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", text)
    clean = re.sub("([a-z0-9])([A-Z])", r"\1_\2", clean).lower()
    separators = whitespace + punctuation
    clean = clean.translate(str.maketrans(separators, "_" * len(separators)))
    return re.sub("_+", "_", clean).strip("_")


def case_names(description: str) -> set[str]:
    """Test names a case may have been generated under: its own description, or its groups' and its own (a
    tests.toml description of a nested case reads "group -> case")."""
    parts = [part.strip() for part in description.split("->")]
    names = {"test_" + to_snake(parts[-1]), "test_" + to_snake(" ".join(parts))}
    if len(parts) > 1:
        names.add("test_" + to_snake(" ".join(parts[-2:])))
    return names


def excluded_names(tests_toml: Path) -> set[str]:
    """Test names of the cases tests.toml marks `include = false` that no included case shares."""
    if not tests_toml.is_file():
        return set()
    try:
        cases = tomllib.loads(tests_toml.read_text())
    except tomllib.TOMLDecodeError as error:
        raise BadInput(f"{tests_toml}: not valid TOML: {error}") from None
    included: set[str] = set()
    excluded: set[str] = set()
    for case in cases.values():
        if isinstance(case, dict) and isinstance(case.get("description"), str):
            (included if case.get("include", True) is not False else excluded).update(case_names(case["description"]))
    return excluded - included


def test_functions(tree: ast.Module) -> list[tuple[ast.ClassDef | None, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Top-level test functions and test methods of top-level classes."""
    found: list[tuple[ast.ClassDef | None, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
            found.append((None, node))
        elif isinstance(node, ast.ClassDef):
            found += [(node, item) for item in node.body
                      if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name.startswith("test")]
    return found


def defines_tests(tree: ast.Module) -> bool:
    return bool(test_functions(tree))


def is_skip(decorator: ast.expr) -> bool:
    """`@unittest.skip(...)`, `@unittest.skipIf(...)`, `@unittest.skipUnless(...)`: the lines the track's CI strips."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return (isinstance(target, ast.Attribute) and target.attr.startswith("skip")
            and isinstance(target.value, ast.Name) and target.value.id == "unittest")


def adapt_tests(text: str, drop: set[str]) -> tuple[str, list[str], list[str]]:
    """The test file without the tests named in `drop` and without skip decorators: (text, dropped, unskipped)."""
    try:
        tree = python_ast.parse(text)
    except SyntaxError:
        return text, [], []
    removed: set[int] = set()
    dropped, unskipped = [], []
    for _, func in test_functions(tree):
        if func.name in drop:
            first = min([func.lineno, *(d.lineno for d in func.decorator_list)])
            removed.update(range(first, (func.end_lineno or func.lineno) + 1))
            dropped.append(func.name)
            continue
        for decorator in filter(is_skip, func.decorator_list):
            removed.update(range(decorator.lineno, (decorator.end_lineno or decorator.lineno) + 1))
            unskipped.append(func.name)
    if not removed:
        return text, [], []
    emptied = {cls.end_lineno: " " * (cls.body[0].col_offset) for cls in tree.body if isinstance(cls, ast.ClassDef)
               and all(line in removed for stmt in cls.body for line in range(stmt.lineno, (stmt.end_lineno or 0) + 1))}
    out = []
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        if number not in removed:
            out.append(line)
        if number in emptied:
            out.append(emptied[number] + "pass  # soak: tests.toml excludes every test here\n")
    return "".join(out), dropped, unskipped


def imported_modules(text: str) -> set[str]:
    """The top-level names of absolute imports anywhere in a module."""
    try:
        tree = python_ast.parse(text)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


# --- one exercise ------------------------------------------------------------------------------------------


def read_config(config_path: Path) -> dict[str, Any]:
    try:
        config: dict[str, Any] = json.loads(config_path.read_text())
        files = config["files"]
        for key in ("solution", "test", "example"):
            if not files[key] or not all(isinstance(name, str) for name in files[key]):
                raise ValueError(f"files.{key} is empty or not a list of names")
        for key in ("editor", "invalidator"):
            if not isinstance(files.get(key, []), list) or not all(isinstance(n, str) for n in files.get(key, [])):
                raise ValueError(f"files.{key} is not a list of names")
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        raise BadInput(f"{config_path}: needs files.solution, files.test and files.example ({error!r})") from None
    return config


def read_doc(path: Path) -> str:
    return path.read_text().strip() if path.is_file() else ""


def is_refactoring(config: dict[str, Any], instructions: str) -> bool:
    """The track says so in the blurb or the instructions' first sentence ("Refactor a ledger printer.")."""
    body = re.sub(r"^\s*#[^\n]*\n", "", instructions).lstrip()
    return str(config.get("blurb", "")).startswith("Refactor") or body.startswith("Refactor")


def exercise_files(folder: Path, files: dict[str, Any], config_path: Path) -> tuple[dict[str, str], ...]:
    """(tests, support, editor): the test files (adapted: the track's excluded cases dropped), the helpers they and
    the solution import (listed or not), and the read-only files shown to the coder."""
    solution, example = files["solution"][0], files["example"][0]
    module = Path(solution).stem
    drop = excluded_names(folder / ".meta" / "tests.toml")
    tests: dict[str, str] = {}
    support: dict[str, str] = {}
    for name in files["test"]:
        text = (folder / name).read_text()
        try:
            is_test = defines_tests(python_ast.parse(text))
        except SyntaxError:
            is_test = True  # Let the collection say what is wrong with it.
        if is_test:
            tests[Path(name).name] = adapt_tests(text, drop)[0]
        else:
            support[Path(name).name] = text
    if not tests:
        raise BadInput(f"{config_path}: files.test names no file that defines a test")
    editor = {Path(name).name: (folder / name).read_text() for name in files.get("editor", [])}
    support.update(editor)
    support.update({Path(name).name: (folder / name).read_text() for name in files.get("invalidator", [])
                    if name not in (solution, example) and Path(name).name not in tests})
    # Sibling modules something imports without the config listing them are helpers as well.
    pending = [*tests.values(), *support.values(), (folder / example).read_text(), (folder / solution).read_text()]
    while pending:
        for name in imported_modules(pending.pop()):
            file = folder / f"{name}.py"
            if name != module and file.is_file() and file.name not in tests and file.name not in support:
                support[file.name] = file.read_text()
                pending.append(support[file.name])
    if Path(solution).name in support:
        raise BadInput(f"{config_path}: the solution {solution} is listed as a test or helper file too")
    return tests, support, editor


def exercise_task(folder: Path, root: Path, suite: SuiteSettings) -> TaskSpec:
    config_path = folder / ".meta" / "config.json"
    config = read_config(config_path)
    files = config["files"]
    solution, example = files["solution"][0], files["example"][0]
    listed = [solution, example, *files["test"], *files.get("editor", []), *files.get("invalidator", [])]
    missing = [name for name in dict.fromkeys(listed) if not (folder / name).is_file()]
    if missing:
        raise BadInput(f"{config_path}: names files that do not exist: {', '.join(missing)}")
    skip = ""
    if len(files["solution"]) > 1:
        skip = f"{len(files['solution'])} solution files (soak's coder writes one)"
    module = Path(solution).stem

    tests, support, editor = exercise_files(folder, files, config_path)
    reference, stub = (folder / example).read_text(), (folder / solution).read_text()

    docs = folder / ".docs"
    instructions = read_doc(docs / "instructions.md")
    tags = ["exercism"]
    if is_refactoring(config, instructions):
        tags.append("refactoring")
        skip = skip or REFACTORING
    slow = config.get("test_runner") is False
    if slow:
        tags.append("slow")
    override = suite.exercise.get(folder.name, ExerciseOverride())
    timeout = suite.slow_test_timeout_seconds if slow else suite.test_timeout_seconds
    if override.test_timeout_seconds is not None:
        timeout = override.test_timeout_seconds
    if override.skip is not None:
        skip = override.skip

    parts = [read_doc(docs / name) for name in ("introduction.md", "introduction.append.md")]
    parts += [instructions, read_doc(docs / "instructions.append.md")]
    if editor:
        parts.append("These files sit beside yours, read-only:\n\n" + "\n\n".join(
            f"`{name}`:\n\n```{'python' if name.endswith('.py') else ''}\n{text.rstrip()}\n```"
            for name, text in editor.items()))
    parts.append(read_doc(docs / "hints.md"))
    parts.append(f"Write your solution in `{solution}`; the tests import it as `{module}`.")
    if slow:
        parts[-1] += f" The tests are heavy (the track's online runner does not run them): they get {timeout:g} s."
    elif timeout != DEFAULT_TEST_TIMEOUT_SECONDS:
        parts[-1] += f" The tests get {timeout:g} s."
    return TaskSpec(
        id=folder.name,
        title=folder.name.replace("-", " ").capitalize(),
        difficulty=override.difficulty or "medium",
        tags=tags,
        entry=Path(solution).name,
        test_timeout_seconds=timeout,
        budget_seconds=override.budget_seconds,
        max_calls=override.max_calls,
        suite=f"exercism:{root}",
        prompt="\n\n".join(part for part in parts if part) + "\n",
        tests=tests,
        support=support,
        reference=reference,
        stub=stub,
        source_dir=folder,
        skip=skip,
    )


def load(root: Path, include_skipped: bool = False) -> list[TaskSpec]:
    """Every exercise folder (one holding `.meta/config.json`) under `root`, sorted; skipped ones only if asked."""
    if not root.is_dir():
        raise BadInput(f"{root}: no such Exercism folder")
    suite = settings(root)
    folders = sorted(p for p in root.iterdir() if (p / ".meta" / "config.json").is_file())
    if not folders:
        raise BadInput(f"{root}: holds no Exercism exercises (each needs .meta/config.json)")
    unknown = sorted(set(suite.exercise) - {folder.name for folder in folders})
    if unknown:
        raise BadInput(f"{root / SETTINGS_FILE}: no such exercise: {', '.join(unknown)}")
    tasks = [exercise_task(folder, root, suite) for folder in folders]
    return [task for task in tasks if include_skipped or not task.skip]
