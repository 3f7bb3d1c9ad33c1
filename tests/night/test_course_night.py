"""The course of the night on real nights: `soak run` against a `soak sim` that the stack supervisor starts, with the
`degrade` scenario's drift on a shorter clock, then `soak report`. Each change is found within one window of the time
the scenario set it and the headline names them; the `steady` stack's night holds up. (Twenty steady nights with no
alarm are checked on records of a known shape in tests/decisions/test_course.py: twenty real nights cost too long.)"""

import json
import shlex
import sys
import textwrap
from pathlib import Path

import pytest

from soak.sim.scenario import load_scenario
from soak.stack.servers import free_port

pytestmark = pytest.mark.slow

SOAK = [sys.executable, "-m", "soak.cli"]


def night(tmp_path: Path, soak, name: str, minutes: float, drift: dict | None = None) -> dict:
    """A night of `minutes` on the `name` scenario (its drift replaced by `drift`), reported; its summary's run."""
    scenario = load_scenario(name)
    if drift is not None:
        scenario = scenario.model_copy(update={"drift": scenario.drift.model_copy(update=drift)})
    (tmp_path / "scenario.json").write_text(scenario.model_dump_json())
    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    up = "exec " + shlex.join([*SOAK, "sim", "--port", str(port), "--scenario", str(tmp_path / "scenario.json")])
    config = tmp_path / "soak.toml"
    config.write_text(textwrap.dedent(f"""
        concurrency = 4
        [endpoints.default]
        base_url = "{base_url}"
        model = "soak-sim"
        [[stack.servers]]
        name = "sim"
        up = {json.dumps(up)}
        base_url = "{base_url}"
        start_timeout_seconds = 30
        [sampling]
        interval_seconds = 1
        """))
    ran = soak("run", "--config", str(config), "--minutes", str(minutes), "--quiet", "--run-id", name)
    assert ran.exit_code == 0, ran.output
    reported = soak("report", name, "--output", str(tmp_path / "report"))
    assert reported.exit_code == 0, reported.output
    [run] = json.loads((tmp_path / "report" / "summary.json").read_text())["runs"]
    run["html"] = (tmp_path / "report" / "index.html").read_text()
    return run


def test_a_degrading_night_is_found_where_the_scenario_set_it(tmp_path, data_dir, soak):
    """`degrade` on a 150-second clock: first tokens four times slower and memory growing from 60 s, the coder right
    a tenth as often from 75 s (a window holds 5 to 15 attempts here, so a smaller drop in the pass rate is not placed
    within one window every time). The TTFT and pass-rate steps are found within one window of their times, the leak as
    a degradation from within one window of its onset, and the verdict names all three from the first of them."""
    found = night(tmp_path, soak, "degrade", 2.5, {"ttft_from_s": 60, "rss_from_s": 60, "pass_factor": 0.1,
                                                   "pass_from_s": 75})
    course = found["course"]
    width = course["window_s"]
    assert width == 10
    # The first finding of each measure: a later one may follow (a loaded machine slows the sim's replies further).
    by_measure = {f["measure"]: f for f in sorted(course["findings"], key=lambda f: f["at_s"], reverse=True)}
    assert {"ttft_p95", "pass_rate", "server_rss_bytes"} <= set(by_measure), course["findings"]
    # The sim's clock starts a moment before the night's, so a change shows at or just before its time.
    for measure, at in (("ttft_p95", 60), ("pass_rate", 75), ("server_rss_bytes", 60)):
        assert abs(by_measure[measure]["at_s"] - at) <= width, (measure, by_measure[measure])
        assert by_measure[measure]["degrades"], by_measure[measure]
    assert by_measure["ttft_p95"]["kind"] == by_measure["pass_rate"]["kind"] == "change"
    assert by_measure["ttft_p95"]["after"] / by_measure["ttft_p95"]["before"] > 2.5
    assert by_measure["pass_rate"]["before"] - by_measure["pass_rate"]["after"] > 0.3
    assert course["held"] is False
    verdict = course["verdict"]
    first = min(course["findings"], key=lambda f: f["at_s"])
    assert verdict.startswith(f"degraded from {first['clock']}: {first['said']}"), verdict
    assert all(f"{words} " in verdict for words in ("TTFT p95", "pass rate", "server RSS")), verdict
    assert verdict.replace("→", "&rarr;") in found["html"] or verdict in found["html"]


def test_a_steady_night_holds_up(tmp_path, data_dir, soak):
    """`steady`, the same stack without the drift, for a minute: no change, and the verdict says it held."""
    course = night(tmp_path, soak, "steady", 1)["course"]
    assert course["findings"] == [] and course["held"] is True, course
    assert course["verdict"].startswith("held up for 1 min "), course["verdict"]
