"""The layer rules the docstrings state, held to the code. soak/__init__.py names the base modules (they import only
one another) and the CLI (it imports anything, nothing imports it); each stage's `__init__` lists, in one sentence
"Imports a, b and c.", every other stage and base module it imports. An import the rules leave out, a listed one
nothing makes, and an import cycle are each reported with the file and line behind them."""

import ast
import re
import shutil
from collections import defaultdict
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.helpers import REPO

SOAK = REPO / "soak"
CLI = "cli"
BASE_SENTENCE = re.compile(r"\bThe base modules import only one another: ([^.;]*)\.")
ORDER_SENTENCE = re.compile(r"\bThe stages, lowest first: ([^.;]*)[.;]")
MAX_LINES = 450
IMPORTS_SENTENCE = re.compile(r"\bImports ([^.;]*)[.;]")


class Edge(NamedTuple):
    """One import of another stage or base module: where it is, who imports whom, and the module as imported."""

    where: str
    source: str
    target: str
    module: str


def plain(docstring: str | None) -> str:
    """The docstring on one line, its parentheticals dropped: they explain a name, they are not one."""
    return re.sub(r"\s*\([^()]*\)", "", " ".join((docstring or "").split()))


def names(listing: str) -> set[str]:
    """`a, b and c` -> {a, b, c}."""
    return set(re.split(r",\s*|\s+and\s+", listing.strip()))


def docstring(path: Path) -> str:
    return plain(ast.get_docstring(ast.parse(path.read_text())))


def unit_of(path: Path, root: Path) -> str:
    """The stage (subpackage) or top-level module a file of the package belongs to."""
    parts = path.relative_to(root).parts
    return parts[0] if len(parts) > 1 else path.stem


def imported(node: ast.Import | ast.ImportFrom, package: list[str]) -> list[str]:
    """The modules an import statement names, relative ones resolved against the importer's package; for
    `from soak import x`, soak.x."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = package[: len(package) - node.level + 1] if node.level else []
    module = ".".join([*base, *([node.module] if node.module else [])])
    return [f"{module}.{alias.name}" for alias in node.names] if module == package[0] else [module]


def import_edges(root: Path, units: set[str]) -> list[Edge]:
    """Every import, anywhere in a module (function bodies too), of another stage or base module, in file order."""
    edges = set()
    files = [*root.glob("*.py"), *(path for init in root.glob("*/__init__.py") for path in init.parent.rglob("*.py"))]
    for path in files:
        if path == root / "__init__.py":
            continue
        source = unit_of(path, root)
        package = [root.name, *path.relative_to(root).parent.parts]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for module in imported(node, package):
                parts = module.split(".")
                if parts[0] == root.name and len(parts) > 1 and parts[1] in units and parts[1] != source:
                    edges.add((path.relative_to(root.parent).as_posix(), node.lineno, source, parts[1], module))
    return [Edge(f"{path}:{line}", *rest) for path, line, *rest in sorted(edges)]


def layer_problems(root: Path) -> list[str]:
    """Every way the package at `root` breaks the import rules its docstrings state, one line each."""
    problems = []
    top = root / "__init__.py"
    stages = {init.parent.name for init in root.glob("*/__init__.py")}
    modules = {path.stem for path in root.glob("*.py")} - {"__init__", CLI}
    found = BASE_SENTENCE.findall(docstring(top))
    base = names(found[0]) if len(found) == 1 else set()
    if base != modules:
        problems.append(f"{top.relative_to(root.parent)}:1: the base modules are {', '.join(sorted(modules))}; "
                        f"the sentence 'The base modules import only one another: ...' names {sorted(base)}")
    orders = ORDER_SENTENCE.findall(docstring(top))
    order = [name.strip() for name in re.split(r",\s*|\s+and\s+", orders[0].strip())] if len(orders) == 1 else []
    if sorted(order) != sorted(stages):
        problems.append(f"{top.relative_to(root.parent)}:1: the stages are {', '.join(sorted(stages))}; the sentence "
                        f"'The stages, lowest first: ...' names {order}")
    below = {stage: set(order[: order.index(stage)]) if stage in order else set() for stage in stages}
    allowed: dict[str, set[str]] = {module: modules for module in modules} | {CLI: stages | modules}
    where = {module: "the base modules' rule" for module in modules}
    for stage in sorted(stages):
        init = root / stage / "__init__.py"
        sentences = IMPORTS_SENTENCE.findall(docstring(init))
        if len(sentences) != 1:
            problems.append(f"{init.relative_to(root.parent)}:1: wants one sentence 'Imports a, b and c.', "
                            f"has {len(sentences)}")
        listed = names(sentences[0]) if sentences else set()
        problems += [f"{init.relative_to(root.parent)}:1: lists {name}, which is not a stage or base module"
                     for name in sorted(listed - stages - modules)]
        problems += [f"{init.relative_to(root.parent)}:1: lists {name}, which is not below {stage} in the order of "
                     "stages" for name in sorted((listed & stages) - below[stage])]
        allowed[stage] = (listed - stages) | (listed & below[stage])
        where[stage] = init.relative_to(root.parent).as_posix()
    edges = import_edges(root, stages | modules | {CLI})
    problems += [f"{edge.where}: {edge.source} imports {edge.target} ({edge.module}), which {where[edge.source]} "
                 "does not allow" for edge in edges if edge.target not in allowed[edge.source]]
    made = {(edge.source, edge.target) for edge in edges}
    problems += [f"{where[stage]}:1: lists {name}, which nothing in {stage} imports"
                 for stage in sorted(stages) for name in sorted(allowed[stage]) if (stage, name) not in made]
    return problems


def import_cycles(root: Path) -> list[str]:
    """Each set of stages and base modules that import one another round a loop, with the imports that close it."""
    units = {init.parent.name for init in root.glob("*/__init__.py")} | {path.stem for path in root.glob("*.py")}
    units.discard("__init__")
    edges = import_edges(root, units)
    graph = defaultdict(set)
    for edge in edges:
        graph[edge.source].add(edge.target)

    def reachable(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for target in graph[todo.pop()] - seen:
                seen.add(target)
                todo.append(target)
        return seen

    reach = {unit: reachable(unit) for unit in units}
    loops = {frozenset(other for other in reach[unit] if unit in reach[other]) for unit in units if unit in reach[unit]}
    return [f"{' <-> '.join(sorted(loop))}: " + ", ".join(f"{edge.where} ({edge.source} -> {edge.target})"
                                                         for edge in edges if {edge.source, edge.target} <= loop)
            for loop in sorted(loops, key=sorted)]


def stage_modules(stage: Path) -> dict[str, Path]:
    """A stage's modules by dotted name (`soak.night.loop`)."""
    root = stage.parent
    return {".".join((root.name, *path.relative_to(root).with_suffix("").parts)).removesuffix(".__init__"): path
            for path in stage.rglob("*.py")}


def stage_cycles(root: Path) -> list[str]:
    """Modules of one stage that import one another round a loop, function bodies included: each cycle once."""
    found = []
    for init in sorted(root.glob("*/__init__.py")):
        modules = stage_modules(init.parent)
        graph: dict[str, set[str]] = defaultdict(set)
        for name, path in modules.items():
            package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    for target in imported(node, package):  # `from soak.night import loop`: the module loop
                        named = [f"{target}.{alias.name}" for alias in getattr(node, "names", [])]
                        graph[name] |= ({module for module in named if module in modules}
                                        or {target} & modules.keys()) - {name}
        try:
            TopologicalSorter(graph).prepare()
        except CycleError as error:
            found.append(f"{init.parent.name}: {' -> '.join(error.args[1])}")
    return found


def test_no_module_imports_itself_back_through_others_of_its_stage():
    assert stage_cycles(SOAK) == []


def test_a_cycle_inside_a_stage_is_reported(tmp_path):
    copy = copy_of_soak(tmp_path)
    append(copy / "night" / "attempts.py", "from soak.night.wiring import run_night")
    assert stage_cycles(copy) == ["night: soak.night.attempts -> soak.night.wiring -> soak.night.attempts"]


def test_every_import_of_another_stage_is_one_its_docstring_lists():
    assert layer_problems(SOAK) == []


def test_no_stage_or_base_module_imports_itself_back_through_others():
    assert import_cycles(SOAK) == []


def copy_of_soak(tmp_path: Path) -> Path:
    shutil.copytree(SOAK, tmp_path / "soak", ignore=shutil.ignore_patterns("__pycache__", "_bank"))
    return tmp_path / "soak"


def append(path: Path, line: str) -> int:
    """Add one line at the end of a module; its line number."""
    text = path.read_text()
    path.write_text(text + line + "\n")
    return text.count("\n") + 1


@pytest.mark.parametrize(("module", "line", "expected"), [
    ("record/summary.py", "from soak.night.loop import Runner",
     "record imports night (soak.night.loop), which soak/record/__init__.py does not allow"),
    ("paths.py", "import soak.record.schema",
     "paths imports record (soak.record.schema), which the base modules' rule does not allow"),
    ("stack/servers.py", "from soak import cli",
     "stack imports cli (soak.cli), which soak/stack/__init__.py does not allow"),
    ("sim/reply.py", "from ..llm import client",
     "sim imports llm (soak.llm), which soak/sim/__init__.py does not allow"),
])
def test_one_forbidden_import_is_reported_exactly_with_its_file_and_line(tmp_path, module, line, expected):
    copy = copy_of_soak(tmp_path)
    number = append(copy / module, line)
    assert layer_problems(copy) == [f"soak/{module}:{number}: {expected}"]


def test_a_declared_upward_import_is_reported(tmp_path):
    """A lower stage that lists a higher one and imports it: the order of stages, not the listing, decides."""
    copy = copy_of_soak(tmp_path)
    init = copy / "record" / "__init__.py"
    init.write_text(re.sub(r"\bImports\s+", "Imports night, ", init.read_text(), count=1))
    number = append(copy / "record" / "summary.py", "from soak.night.loop import Runner")
    assert layer_problems(copy) == [
        "soak/record/__init__.py:1: lists night, which is not below record in the order of stages",
        f"soak/record/summary.py:{number}: record imports night (soak.night.loop), which soak/record/__init__.py "
        "does not allow"]


def test_the_report_imports_analysis_never_probes(tmp_path):
    """The report reads records and their analysis (decisions); what calls a model or a server (probes) sits above it
    in the order of stages, so a report that lists the probes and imports one is told so."""
    units = {init.parent.name for init in SOAK.glob("*/__init__.py")}
    targets = {edge.target for edge in import_edges(SOAK, units) if edge.source == "report"}
    assert "decisions" in targets and "probes" not in targets, "the report imports analysis, never probes"
    copy = copy_of_soak(tmp_path)
    init = copy / "report" / "__init__.py"
    init.write_text(init.read_text().replace("Imports record", "Imports probes, record"))
    number = append(copy / "report" / "build.py", "from soak.probes.gate import GATES")
    assert layer_problems(copy) == [
        "soak/report/__init__.py:1: lists probes, which is not below report in the order of stages",
        f"soak/report/build.py:{number}: report imports probes (soak.probes.gate), which soak/report/__init__.py "
        "does not allow"]


def test_no_module_is_longer_than_the_limit():
    long = {path.relative_to(REPO).as_posix(): lines for path in SOAK.rglob("*.py") if "_bank" not in path.parts
            and (lines := path.read_text().count("\n")) > MAX_LINES}
    assert long == {}, f"modules over {MAX_LINES} lines; split them by concept"


def test_a_listed_import_nothing_makes_is_reported(tmp_path):
    copy = copy_of_soak(tmp_path)
    init = copy / "tasks" / "__init__.py"
    init.write_text(init.read_text().replace("Imports errors,", "Imports record, errors,"))
    assert layer_problems(copy) == ["soak/tasks/__init__.py:1: lists record, which nothing in tasks imports"]


def test_an_import_cycle_is_reported_with_the_imports_that_close_it(tmp_path):
    copy = copy_of_soak(tmp_path)
    init = copy / "tasks" / "__init__.py"
    init.write_text(init.read_text().replace("Imports errors,", "Imports sim, errors,"))
    number = append(copy / "tasks" / "spec.py", "import soak.sim.scenario")
    assert layer_problems(copy) == ["soak/tasks/__init__.py:1: lists sim, which is not below tasks in the order of "
                                    "stages", f"soak/tasks/spec.py:{number}: tasks imports sim (soak.sim.scenario), "
                                    "which soak/tasks/__init__.py does not allow"]
    [cycle] = import_cycles(copy)
    assert cycle.startswith("sim <-> tasks: ")
    assert f"soak/tasks/spec.py:{number} (tasks -> sim)" in cycle
    assert re.search(r"soak/sim/\w+\.py:\d+ \(sim -> tasks\)", cycle)


MAX_FUNCTION_LINES = 80
MAX_PARAMETERS = 6
"""Not counting self or cls: past six, the parameters that travel together want a value object."""


def over_the_limits(root: Path) -> set[str]:
    found = set()
    for path in root.rglob("*.py"):
        if "_bank" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                args = node.args
                named = [*args.posonlyargs, *args.args, *args.kwonlyargs]
                count = len(named) + bool(args.vararg) + bool(args.kwarg) - (bool(named) and named[0].arg in
                                                                              ("self", "cls"))
                if node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES or count > MAX_PARAMETERS:
                    found.add(f"{path.relative_to(root.parent).as_posix()}:{node.name}")
    return found


def test_no_function_is_longer_or_takes_more_parameters_than_the_limits():
    found = over_the_limits(SOAK)
    assert found == set(), f"over {MAX_FUNCTION_LINES} lines or {MAX_PARAMETERS} parameters: split it"
