"""What a solved task costs, on a real `soak run` against `soak sim` serving a DCGM-style exporter (`[power]`): the
night's energy per solved task is the exporter's counter delta over the passes, to the joule, in the units the
exporter means (mJ read as joules would be a thousand times off); when the exporter goes dark mid-night, that sampler
alone records errors and the others go on."""

import json
import threading
import time

import pandas as pd
import pytest

from soak.record.read import load_run
from soak.sim.scenario import Scenario
from soak.sim.server import SimServer
from tests.helpers import wait_until
from tests.night.test_loop import invoke, reference_judge, write_bank

IDLE_WATTS, BUSY_WATTS = 120.0, 480.0


def test_energy_per_solved_task_is_the_exporters_counter_over_the_passes_and_a_dark_exporter_costs_only_itself(
        tmp_path, monkeypatch):
    monkeypatch.setenv("SOAK_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr("soak.agent.loop.judge_solution", reference_judge)  # the energy path is under test, not pytest
    suite = write_bank(tmp_path / "bank", 4)
    scenario = Scenario.model_validate({
        "timing": {"ttft_seconds": 0.05, "decode_tokens_per_second": 400, "tokens_per_chunk": 8},
        "power": {"idle_watts": IDLE_WATTS, "busy_watts": BUSY_WATTS, "dark_from_s": 10**6},
    })
    samples = tmp_path / "data" / "night" / "samples.csv"

    def exporter_rows() -> pd.DataFrame:
        frame = pd.read_csv(samples)
        return frame[frame["source"] == "energy:default"]

    with SimServer(scenario, suite=suite) as sim:
        def darken() -> None:
            """Once the exporter was read five times, its clock jumps past `dark_from_s`: it answers 503 from then."""
            wait_until(lambda: len(exporter_rows()) >= 10, timeout=60, what="five exporter readings",
                       ignoring=(FileNotFoundError, pd.errors.EmptyDataError, KeyError))
            sim.started = time.monotonic() - 2 * 10**6

        watcher = threading.Thread(target=darken, daemon=True)
        watcher.start()
        config = tmp_path / "soak.toml"
        exporter = sim.base_url.removesuffix("/v1") + "/dcgm/metrics"
        config.write_text(f'suite = "{suite}"\nconcurrency = 2\n[endpoints.default]\nbase_url = "{sim.base_url}"\n'
                          f'model = "soak-sim"\nenergy_metrics_url = "{exporter}"\n'
                          '[sampling]\ninterval_seconds = 0.2\n[cost]\nkwh_price = 0.30\ncurrency = "EUR"\n')
        result = invoke("run", "--config", str(config), "--run-id", "night", "--minutes", "0.15", "--quiet")
        assert result.exit_code == 0, result.output
        watcher.join(timeout=5)
    rows = exporter_rows()
    readings = rows[rows["metric"] != "error"]
    errors = rows[rows["metric"] == "error"]
    assert len(readings) >= 10 and len(errors) >= 1 and errors["at"].min() > readings["at"].max()
    assert errors["error"].str.contains("503").all()
    host = pd.read_csv(samples).query("source == 'host' and metric == 'load1'")
    assert host["at"].max() > errors["at"].min()  # the other samplers went on after the exporter went dark

    counter = readings[readings["metric"] == "gpu_energy_joules"].sort_values("at")
    delta = counter["value"].iloc[-1] - counter["value"].iloc[0]
    watts = delta / (counter["at"].iloc[-1] - counter["at"].iloc[0])
    assert IDLE_WATTS * 0.9 <= watts <= BUSY_WATTS + IDLE_WATTS  # joules, not millijoules
    result = invoke("report", "night", "--output", str(tmp_path / "report"))
    assert result.exit_code == 0, result.output
    energy = json.loads((tmp_path / "report" / "summary.json").read_text())["runs"][0]["energy"]
    passes = int((load_run(tmp_path / "data" / "night").tasks["outcome"] == "pass").sum())
    assert passes > 0 and energy["passes"] == passes
    assert round(energy["joules_per_pass"]) == round(delta / passes)
    exporter = next(s for s in energy["sources"] if s["source"] == "energy:default")
    assert (exporter["counted"], exporter["method"], exporter["kind"]) == (True, "counter", "gpu")
    assert energy["cost_per_pass"] == pytest.approx(energy["joules_per_pass"] / 3.6e6 * 0.30)
    assert 0 <= energy["idle_share"] < 1
    windows = json.loads((tmp_path / "report" / "summary.json").read_text())["runs"][0]["course"]["windows"]
    measured = [w for w in windows if w["watts"] is not None]
    assert measured and all(IDLE_WATTS * 0.9 <= w["watts"] <= IDLE_WATTS + BUSY_WATTS for w in measured)
    html = (tmp_path / "report" / "index.html").read_text()
    assert "What a solved task costs" in html and "kJ per solved task" in html
