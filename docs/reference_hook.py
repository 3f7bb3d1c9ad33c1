"""The generated parts of the reference, written at build time from the code itself so they cannot drift from it: a
page holds a line `<!-- generated: NAME -->` and the build puts NAME's tables there. A hook rather than committed
pages: nothing to regenerate by hand, nothing stale to catch in a test, and `mkdocs serve` shows a changed docstring
on reload. The commands come from mkdocs-click the same way (reference/cli.md)."""

import inspect
import json
import re
import sys
import tomllib
from collections.abc import Callable
from functools import cache
from pathlib import Path
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

import griffe
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from soak.config import SoakConfig
from soak.record.info import Host, Routing, StartedStack
from soak.record.schema import (
    SCHEMA_VERSION,
    CallRow,
    EventRow,
    RoundRow,
    Row,
    RunInfo,
    RunLimits,
    SampleRow,
    Session,
    TaskRow,
)
from soak.sim.scenario import SCENARIO_DIR, builtin_scenarios

RUN_FOLDER: dict[str, type[BaseModel]] = {
    "tasks.csv": TaskRow, "rounds.csv": RoundRow, "calls.csv": CallRow, "events.csv": EventRow,
    "samples.csv": SampleRow, "run.json": RunInfo, "run.json `limits`": RunLimits, "run.json `sessions[]`": Session,
    "run.json `routing`": Routing, "run.json `stack`": StartedStack, "run.json `host`": Host,
}
"""Each file of a run folder (and run.json's nested objects) and the model that writes it."""


@cache
def module_docs(name: str) -> griffe.Module:
    """One module of soak read by griffe from its source (statically, on its own: fast, nothing imported)."""
    path = Path(sys.modules[name].__file__ or "")
    return griffe.visit(name, filepath=path, code=path.read_text())


def docstrings(model: type[BaseModel]) -> dict[str, str]:
    """The attribute docstrings of a model's fields, its bases' included."""
    out: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if issubclass(cls, BaseModel) and cls.__module__.startswith("soak."):
            members = module_docs(cls.__module__)[cls.__qualname__].members
            out |= {name: member.docstring.value for name, member in members.items() if member.docstring}
    return out


def type_name(annotation: Any) -> str:
    """`int`, `str | None`, `"auto" | "required"`, `dict[str, Endpoint]`: as a reader of the TOML would spell it."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return " | ".join(json.dumps(arg) for arg in args)
    if origin in (Union, UnionType):
        return " | ".join(type_name(arg) for arg in args)
    if origin is not None:
        return f"{origin.__name__}[{', '.join(type_name(arg) for arg in args)}]"
    if annotation is type(None):
        return "None"
    return annotation.__name__ if isinstance(annotation, type) else str(annotation).removeprefix("typing.")


def default_text(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    return "unset" if value is None else f"`{json.dumps(value, default=str)}`"


def limits_text(field: FieldInfo) -> str:
    """Constraints pydantic checks on the value (annotated-types metadata), e.g. `≥ 0`."""
    signs = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<", "min_length": "at least", "max_length": "at most"}
    return ", ".join(f"{sign} {getattr(item, key)}" for item in field.metadata for key, sign in signs.items()
                     if hasattr(item, key))


def outside_code(text: str, change: Callable[[str], str]) -> str:
    """`text` with `change` applied to what is outside its code spans."""
    parts = text.split("`")
    parts[::2] = [change(part) for part in parts[::2]]
    return "`".join(parts)


def shown(text: str) -> str:
    """`<` and `>` outside code spans shown rather than read as HTML."""
    return outside_code(text, lambda part: part.replace("<", "&lt;").replace(">", "&gt;"))


def cell(text: str) -> str:
    """One line of markdown for a table cell: a `|` outside code spans escaped (within one the table leaves it)."""
    return shown(outside_code(" ".join(text.split()), lambda part: part.replace("|", "\\|")))


def nested(annotation: Any) -> tuple[str, type[BaseModel]] | None:
    """A field holding tables: `[KEY]`, `[KEY.NAME]` (a dict of them) or `[[KEY]]` (a list of them)."""
    args = get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "[{}]", annotation
    if get_origin(annotation) is dict and isinstance(args[1], type) and issubclass(args[1], BaseModel):
        return "[{}.NAME]", args[1]
    if get_origin(annotation) is list and isinstance(args[0], type) and issubclass(args[0], BaseModel):
        return "[[{}]]", args[0]
    return None


def field_table(model: type[BaseModel], fields: dict[str, FieldInfo], with_default: bool,
                what: str = "key") -> list[str]:
    docs = docstrings(model)
    rows = [f"| {what} | type | default | |", "| --- | --- | --- | --- |"] if with_default else [
        f"| {what} | type | |", "| --- | --- | --- |"]
    for name, field in fields.items():
        text = cell(docs.get(name, ""))
        if limits := limits_text(field):
            text = f"{text} ({limits})" if text else f"({limits})"
        default = f" {default_text(field)} |" if with_default else ""
        rows.append(f"| `{name}` | `{type_name(field.annotation)}` |{default} {text} |")
    return rows


def config_sections(model: type[BaseModel], heading: str = "Top level", key: str = "", intro: str = "") -> list[str]:
    """One section per TOML table of soak.toml, each key with its type, default, limits and docstring."""
    texts = [text for text in (intro, model.__doc__ or "") if text]
    out = [f"## {heading}", "", *(f"{shown(inspect.cleandoc(text))}\n" for text in texts)]
    scalars = {name: field for name, field in model.model_fields.items() if not nested(field.annotation)}
    if scalars:
        out += [*field_table(model, scalars, with_default=True), ""]
    docs = docstrings(model)
    for name, field in model.model_fields.items():
        if shape := nested(field.annotation):
            form, inner = shape
            path = f"{key}.{name}" if key else name
            out += config_sections(inner, f"`{form.format(path)}`", path, docs.get(name, ""))
    return out


def run_folder_sections() -> list[str]:
    history = module_docs("soak.record.schema")["SCHEMA_VERSION"].docstring
    out = [f"Every row and run.json carry `schema_version`: {SCHEMA_VERSION} today. What each version changed, and how "
           "an older folder is read:", ""]
    out += [f"- {cell(change)}" for change in re.split(r"\n(?=\d+: )", history.value if history else "")]
    out.append("")
    for file, model in RUN_FOLDER.items():
        out += [f"## {file if '`' in file else f'`{file}`'}", "", shown(inspect.cleandoc(model.__doc__ or "")), ""]
        what = "column" if file.endswith(".csv") else "key"
        order = model.columns() if issubclass(model, Row) else list(model.model_fields)  # a CSV's header order
        out += [*field_table(model, {name: model.model_fields[name] for name in order}, with_default=False,
                             what=what), ""]
    return out


def scenario_sections() -> list[str]:
    out: list[str] = []
    for name in builtin_scenarios():
        text = (SCENARIO_DIR / f"{name}.toml").read_text()
        out += [f"## `{name}`", "", tomllib.loads(text).get("description", ""), "",
                f'```toml title="{name}.toml"', text.rstrip(), "```", ""]
    return out


GENERATED = {"config": lambda: config_sections(SoakConfig), "run-folder": run_folder_sections,
             "scenarios": scenario_sections}


def on_page_markdown(markdown: str, **_: Any) -> str:
    def fill(match: re.Match[str]) -> str:
        return "\n".join(GENERATED[match[1]]())

    return re.sub(r"^<!-- generated: ([\w-]+) -->$", fill, markdown, flags=re.M)
