"""How many agents can this box run at once: the `concurrency = [1, 2, 4, 8]` axis of `soak sweep`.

    base = "soak.toml"          # the stack under test: endpoints, [[stack.servers]], budgets
    concurrency = [1, 2, 4, 8]  # the levels: agents at once, one level after another
    tasks = 24                  # each level's length in attempts (or minutes = 30): a 12-task suite twice over
    repeat = 2                  # tries per task, one pass over the suite apart, the same at every level: pass^k
    seed = 0

    [[configurations]]          # optional, at most one: its overrides and gates apply to every level
    name = "vllm"
    [configurations.overrides]
    stack.servers = [{name = "vllm", up = "vllm serve ...", base_url = "http://127.0.0.1:8000/v1"}]

Why an axis of the sweep rather than a command of its own: a capacity curve is a sweep over one key of the stack's
configuration, and everything it needs the sweep already is. Each level is an ordinary run (`data/<id>.c4/`) on the
same tasks in the same order with the same seed and repeats; the stack's servers are started before and stopped
after each level, so one level's queue and cache never leak into the next; gates run per level; `soak sweep --resume
ID` carries on at the level and attempt where it stopped; `soak report ID` renders it. A separate command would
spell all of that again. What differs is the verdict, which soak.decisions.capacity gives: the knee, not the
fastest configuration. `tasks` and `minutes` are each level's own length, so a level's figures do not depend on how
many levels there are.

Bad input is refused before anything starts (exit 2, with the fix): levels that are not positive whole numbers,
fewer than two levels (one is `soak run --concurrency N`), or a level with more agents than a level has attempts
to give them (the extra agents would idle and the level would measure fewer).
"""

from typing import Any

from soak.errors import BadInput
from soak.record.schema import RunLimits

EXAMPLE = "concurrency = [1, 2, 4, 8]"


def check_levels(value: Any) -> Any:
    """The sweep file's `concurrency` (pydantic `before` validator): positive whole numbers, at least two, each once;
    sorted, so the curve reads left to right."""
    if value is None or value == []:
        return []
    if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in value):
        raise ValueError(f"levels are agents at once, positive whole numbers: got {value!r}; write e.g. {EXAMPLE}")
    if len(value) < 2:
        raise ValueError(f"one level draws no curve: give two or more, e.g. {EXAMPLE} (a single level is "
                         f"`soak run --concurrency {value[0]}`)")
    twice = sorted({v for v in value if value.count(v) > 1})
    if twice:
        raise ValueError(f"each level once: {', '.join(map(str, twice))} given twice")
    return sorted(value)


def level_name(prefix: str, agents: int) -> str:
    """A level's configuration name, `c4` (or `vllm-c4` under a named configuration): its run is `<id>.c4`."""
    return f"{prefix}-c{agents}" if prefix else f"c{agents}"


def level_overrides(overrides: dict[str, Any], agents: int) -> dict[str, Any]:
    """The configuration's overrides with this level's concurrency on top; a concurrency of its own is refused."""
    if "concurrency" in overrides:
        raise ValueError("a capacity sweep sets concurrency per level: drop `concurrency` from the configuration's "
                       "overrides and list the levels in the sweep's `concurrency = [...]`")
    return {**overrides, "concurrency": agents}


def check_room(agents: int, limits: RunLimits, per_cycle: int) -> None:
    """A level with more agents than attempts to hand out (its `tasks`, else one cycle's tasks times `repeat`) would
    idle the rest: bad input, with the fix."""
    attempts = limits.max_tasks or per_cycle
    if agents <= attempts:
        return
    fix = "raise `tasks`" if limits.max_tasks else "give the suite more tasks, or more `repeat`,"
    raise BadInput(f"level {agents} has more agents than its {attempts} attempts: {fix} to at least {agents}, or drop "
                   f"the level from `concurrency`")
