"""How many agents at once: the knee rule on per-level figures whose answer is known, the limiting signal it names,
the capacity sweep file's bad input (exit 2 with the fix), its resume and its report before any level ran."""

import json
import re
import textwrap
import tomllib
from pathlib import Path

import pytest
from rich.console import Console

from soak.decisions.capacity import Level, answer
from soak.decisions.sweep import Standing
from soak.errors import BadInput
from soak.night.sweep import Sweep, SweepFile, plan_sweep
from soak.report.render import render_sweep
from tests.helpers import REPO


def level(agents: int, passes: int, attempts: int, solved: float, **figures) -> Level:
    standing = Standing(name=f"c{agents}", run_id=f"s.c{agents}", status="done", passes=passes, attempts=attempts)
    return Level(agents, standing, solved_per_hour=solved, budget_s=600.0, **figures)


def curve(**at_six) -> list[Level]:
    """A box that holds four agents: solved/h rises to 4, then queueing breaks the pass rate."""
    six = {"queued_s": 140.0, "timeouts": 9, "hit_rate": 0.8} | at_six
    return [level(1, 12, 12, 10.0, queued_s=0.0, hit_rate=0.8), level(2, 12, 12, 19.0, queued_s=0.0, hit_rate=0.8),
            level(4, 11, 12, 35.0, queued_s=2.0, timeouts=1, hit_rate=0.8), level(6, 3, 12, 12.0, **six),
            level(8, 0, 12, 0.0, queued_s=300.0, timeouts=12, hit_rate=0.3)]


def test_the_knee_is_the_most_solved_per_hour_before_the_pass_rate_breaks_and_queueing_is_named():
    verdict = answer(curve())
    assert verdict.agents == 4
    assert verdict.line == ("run 4 agents: 35.0 solved/h; at 6 the pass rate falls 100% → 25% "
                            "(timeouts 9 of 12: queued 140.0 s per attempt of the 600 s budget)")
    assert verdict.limit == "queueing"
    assert verdict.held == {1: "", 2: "", 4: "", 6: "the pass rate falls 100% → 25%"}


def test_without_a_queue_a_collapsing_prefix_cache_is_the_limit():
    verdict = answer(curve(queued_s=0.5, hit_rate=0.2))
    assert verdict.agents == 4 and verdict.limit == "prefix cache"
    assert "prefix-cache hit rate 80% → 20%: sessions evicted and prefilled again" in verdict.line


def test_a_drop_within_noise_does_not_stop_the_search_but_fewer_solved_per_hour_loses():
    found = curve()
    found[3] = level(6, 9, 12, 30.0, queued_s=20.0, timeouts=3, hit_rate=0.8)  # 75 % [47-91]: within noise of 100 %
    verdict = answer(found)
    assert verdict.agents == 4
    assert verdict.line.startswith("run 4 agents: 35.0 solved/h; at 6 solved/h is no higher (30.0)")
    assert verdict.held[6] == "" and "falls" in verdict.held[8]


def test_timeouts_with_no_server_signal_moving_point_at_the_host():
    found = curve(queued_s=0.0)
    found[3].ttft_p95_s = found[2].ttft_p95_s = 1.0
    verdict = answer(found)
    assert verdict.limit == "host"
    assert verdict.line.endswith("(timeouts 9 of 12: no server signal moved: the host running the agents and their "
                                 "tests is the likelier limit)")


def test_quality_that_holds_everywhere_says_to_try_more_and_one_agent_is_singular():
    rising = [level(n, 12, 12, 10.0 * n) for n in (1, 2, 4)]
    assert answer(rising).line == "run 4 agents: 40.0 solved/h, the most tried, and quality held at every level: " \
                                  "try more agents"
    falling = [level(1, 12, 12, 10.0), level(2, 2, 12, 3.0)]
    verdict = answer(falling)
    assert verdict.agents == 1 and verdict.line.startswith("run 1 agent: 10.0 solved/h; at 2 the pass rate falls")
    assert verdict.limit == "host"


def test_no_finished_level_gives_no_answer_and_an_unfinished_next_level_is_said():
    pending = Level(1, Standing(name="c1", run_id="s.c1", status="pending"))
    assert answer([pending]).agents is None
    stopped = Level(4, Standing(name="c4", run_id="s.c4", status="stack_down"))
    verdict = answer([level(1, 12, 12, 10.0), level(2, 12, 12, 19.0), stopped])
    assert verdict.agents == 2 and verdict.line.endswith("at 4 not measured (stack_down)")
    tripped = Level(4, Standing(name="c4", run_id="s.c4", status="stopped", detail="error budget: 5 infra errors"))
    verdict = answer([level(1, 12, 12, 10.0), level(2, 12, 12, 19.0), tripped])
    assert verdict.line.endswith("at 4 its night stopped early (error budget: 5 infra errors)")


def test_levels_that_solved_nothing_name_no_knee():
    """A model that solves none of the tasks (the embedded default's 135M model on the bank) leaves every level at
    0 solved/h: fewer agents are no answer then, and the line says why."""
    verdict = answer([level(1, 0, 12, 0.0, queued_s=0.0), level(2, 0, 12, 0.0, queued_s=0.0),
                      level(4, 0, 12, 0.0, queued_s=30.0)])
    assert verdict.agents is None and verdict.limit == ""
    assert verdict.line.startswith("no answer: no level solved a task (0 of 36 attempts passed)")


# --- the sweep file's levels ------------------------------------------------------------------------------------


def sweep_file(tmp_path: Path, head: str) -> Path:
    (tmp_path / "base.toml").write_text('[endpoints.default]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n')
    path = tmp_path / "sweep.toml"
    path.write_text('base = "base.toml"\n' + textwrap.dedent(head))
    return path


def test_levels_become_configurations_on_the_same_tasks_seed_and_repeats(tmp_path, data_dir):
    path = sweep_file(tmp_path, """
        concurrency = [4, 1, 2]
        tasks = 126
        repeat = 2
        seed = 3
        [[configurations]]
        name = "vllm"
        overrides = {budgets = {task_seconds = 60}}
        """)
    info, configs = plan_sweep(path, "cap")
    assert info.levels == [1, 2, 4]
    assert [entry.run_id for entry in info.configurations] == ["cap.vllm-c1", "cap.vllm-c2", "cap.vllm-c4"]
    assert [c.concurrency for c in configs] == [1, 2, 4]
    assert {(c.seed, c.budgets.task_seconds) for c in configs} == {(3, 60)}
    assert {(e.limits.max_tasks, e.limits.repeats) for e in info.configurations} == {(126, 2)}


@pytest.mark.parametrize(("head", "fix"), [
    ("concurrency = [0, 2]", "positive whole numbers: got [0, 2]; write e.g. concurrency = [1, 2, 4, 8]"),
    ("concurrency = [1.5, 2]", "positive whole numbers: got [1.5, 2]"),
    ('concurrency = ["4"]', "positive whole numbers"),
    ("concurrency = [4]", "one level draws no curve: give two or more, e.g. concurrency = [1, 2, 4, 8] (a single "
                          "level is `soak run --concurrency 4`)"),
    ("concurrency = [1, 2, 2]", "each level once: 2 given twice"),
    ("concurrency = [1, 8]\ntasks = 6", "level 8 has more agents than its 6 attempts: raise `tasks` to at least 8, "
                                        "or drop the level from `concurrency`"),
    ("concurrency = [1, 2]\n[[configurations]]\nname = \"a\"\n[[configurations]]\nname = \"b\"",
     "a capacity sweep (concurrency = [...]) measures one stack"),
    ("concurrency = [1, 2]\n[[configurations]]\nname = \"a\"\noverrides = {concurrency = 3}",
     "drop `concurrency` from the configuration's overrides"),
])
def test_bad_levels_are_refused_with_the_fix(tmp_path, data_dir, head, fix):
    with pytest.raises(BadInput) as refused:
        plan_sweep(sweep_file(tmp_path, head), "cap")
    assert fix in str(refused.value)
    assert not data_dir.exists() or not any(data_dir.iterdir())


def test_a_level_above_the_suite_exits_2_on_the_command_line(tmp_path, data_dir, soak):
    result = soak("sweep", str(sweep_file(tmp_path, "concurrency = [1, 500]\n")))
    assert result.exit_code == 2
    assert "level 500 has more agents than its" in result.output
    assert "give the suite more tasks, or more `repeat`, to at least 500" in result.output


def test_the_docs_capacity_sweep_for_vllm_is_a_valid_sweep_file():
    page = (REPO / "docs" / "decide" / "capacity.md").read_text()
    block = re.search(r'```toml title="sweep.toml"\n(# capacity.toml:.*?)```', page, re.S)
    assert block is not None
    spec = SweepFile.model_validate(tomllib.loads(block.group(1)))
    assert [c.name for c in spec.configurations] == ["vllm-c1", "vllm-c2", "vllm-c4", "vllm-c6", "vllm-c8", "vllm-c12"]
    assert spec.configurations[2].overrides["concurrency"] == 4 and "stack" in spec.configurations[2].overrides


def test_a_capacity_sweep_resumes_as_one_and_reports_before_any_level_ran(tmp_path, data_dir):
    Sweep.start(sweep_file(tmp_path, "concurrency = [1, 2]\ntasks = 4\n"), "cap", Console(), quiet=True)
    resumed = Sweep.resume("cap", Console(), quiet=True)
    assert resumed.info.levels == [1, 2] and [c.concurrency for c in resumed.configs] == [1, 2]
    page = render_sweep("cap", tmp_path / "report")
    summary = json.loads((page.parent / "summary.json").read_text())["capacity"]
    assert summary["agents"] is None and summary["answer"].startswith("no answer yet")
    assert [row["status"] for row in summary["rows"]] == ["pending", "pending"]
    assert 'id="capacity"' in page.read_text()
