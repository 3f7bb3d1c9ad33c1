"""The night's energy from samples.csv: the real readings of soak's NVML sampler on an H200 (tests/fixtures/nvml,
recorded by bench/nvml_record.py beside a bf16 matrix-multiply load), counters against integrated power, which source
counts, the idle share, throttling, prices; RAPL's counters read from a powercap tree, wraps included; exporters'
text as DCGM and node_exporter write it."""

import json
from pathlib import Path

import pandas as pd
import pytest

from soak.config import Cost
from soak.decisions.energy import meters, night_energy
from soak.stack.energy import parse_exporter, rapl_packages

H200 = json.loads((Path(__file__).parents[1] / "fixtures" / "nvml" / "h200.json").read_text())


def h200_samples() -> pd.DataFrame:
    return pd.DataFrame([{"at": s["at"], "source": source, "metric": metric, "value": value, "labels": labels}
                         for s in H200["samples"] for source, metric, value, labels in s["readings"]])


def phase(name: str) -> tuple[float, float]:
    at = [s["at"] for s in H200["samples"] if s["phase"] == name]
    return min(at), max(at)


def no_tasks(passes: int = 0, fails: int = 0) -> pd.DataFrame:
    return pd.DataFrame({"canary": [""] * (passes + fails), "outcome": ["pass"] * passes + ["fail"] * fails})


NO_CALLS = pd.DataFrame({"started_at": [], "duration_s": [], "status": [], "completion_tokens": []})


def test_the_h200_readings_of_the_nvml_sampler_give_idle_and_load_power_and_a_counter_that_agrees_with_it():
    samples = h200_samples()
    for name, low, high in (("idle", 60, 100), ("load", 550, 710)):
        start, end = phase(name)
        [meter] = meters(samples, start, end)
        assert (meter.name, meter.method, meter.devices) == ("GPU (NVML, this host)", "counter", 1)
        assert low <= meter.total / meter.span <= high, (name, meter.total / meter.span)
    start, end = phase("idle")[0], phase("after")[1]
    counter = meters(samples, start, end)[0].total
    integrated = meters(samples[samples["metric"] != "gpu_energy_joules"], start, end)[0]
    assert integrated.method == "power"
    assert integrated.total == pytest.approx(counter, rel=0.03)  # the counter and the sampled power agree
    energy = night_energy(samples, no_tasks(passes=2, fails=1), NO_CALLS, start, end, Cost())
    assert energy["joules_per_pass"] == pytest.approx(counter / 2)
    assert energy["idle_share"] == 1.0  # no call was in flight
    [gpu] = energy["throttle"]
    assert 0.3 < gpu["power_share"] < 0.8 and gpu["thermal_share"] == 0  # the software power cap under load
    assert "GPU 0 power-throttled" in energy["said"] and energy["cost"] is None


def test_the_idle_share_is_the_energy_while_no_call_was_in_flight():
    samples = h200_samples()
    start, end = phase("idle")[0], phase("after")[1]
    load_start, load_end = phase("load")
    calls = pd.DataFrame({"started_at": [load_start, load_start + 5], "duration_s": [10.0, load_end - load_start - 5],
                          "status": ["ok", "ok"], "completion_tokens": [300, 700]})
    energy = night_energy(samples, no_tasks(passes=1), calls, start, end, Cost(kwh_price=0.3, hardware_per_hour=2.0,
                                                                               currency="EUR"))
    idle, _ = phase("idle")
    assert 0.03 < energy["idle_share"] < 0.3  # the idle and cooling phases at a fraction of the load's watts
    assert energy["tokens_per_joule"] == pytest.approx(1000 / energy["joules"])
    cost = energy["cost"]
    assert cost["energy"] == pytest.approx(energy["kwh"] * 0.3)
    assert cost["hardware"] == pytest.approx((end - start) / 3600 * 2.0)
    assert energy["cost_per_pass"] == pytest.approx(cost["energy"] + cost["hardware"])


def test_the_server_hosts_exporter_counts_for_the_gpu_and_this_hosts_rapl_for_the_cpu():
    rows = []
    for at in range(0, 11):
        local = 100.0 * (at if at <= 5 else at - 5.5)  # the driver reloaded at 5.5 s: its counter starts again
        rows += [{"at": float(at), "source": "gpu", "metric": "gpu_energy_joules", "value": local, "labels": "gpu=0"},
                 {"at": float(at), "source": "energy:vllm", "metric": "gpu_energy_joules", "value": 300.0 * at,
                  "labels": "gpu=0"},
                 {"at": float(at), "source": "energy:vllm", "metric": "gpu_energy_joules", "value": 300.0 * at,
                  "labels": "gpu=1"},
                 {"at": float(at), "source": "cpu", "metric": "cpu_energy_joules", "value": 50.0 * at,
                  "labels": "package=0"}]
    rows.append({"at": 5.5, "source": "gpu", "metric": "gpu_energy_joules", "value": 0.0, "labels": "gpu=0"})
    energy = night_energy(pd.DataFrame(rows), no_tasks(passes=4), NO_CALLS, 0.0, 10.0, Cost())
    by_source = {(s["source"], s["kind"]): s for s in energy["sources"]}
    assert by_source[("energy:vllm", "gpu")]["counted"] and by_source[("energy:vllm", "gpu")]["devices"] == 2
    assert not by_source[("gpu", "gpu")]["counted"]
    assert by_source[("gpu", "gpu")]["joules"] == 500 + 0 + 50 + 400  # the step down at the reset counts nothing
    assert by_source[("cpu", "cpu")]["counted"]
    assert energy["joules"] == 2 * 3000 + 500 and energy["mean_watts"] == 650
    assert energy["joules_per_pass"] == 6500 / 4


def test_no_source_means_not_measured_never_a_guess():
    samples = pd.DataFrame({"at": [0.0, 1.0], "source": ["host", "host"], "metric": ["load1", "load1"],
                            "value": [0.1, 0.2], "labels": ["", ""]})
    energy = night_energy(samples, no_tasks(passes=3), NO_CALLS, 0.0, 1.0, Cost(kwh_price=0.3))
    assert (energy["measured"], energy["joules"], energy["joules_per_pass"]) == (False, None, None)
    assert energy["said"].startswith("energy not measured")
    assert energy["cost"]["energy"] is None


def test_rapl_packages_are_read_in_joules_since_the_first_reading_and_a_wrap_is_added_back(tmp_path):
    for zone, start in (("intel-rapl:0", 999_000_000), ("intel-rapl:1", 5_000_000)):
        (tmp_path / zone).mkdir()
        (tmp_path / zone / "energy_uj").write_text(f"{start}\n")
        (tmp_path / zone / "max_energy_range_uj").write_text("1000000000\n")
    (tmp_path / "intel-rapl:0:0").mkdir()  # a subzone (core): not a package
    packages = rapl_packages(tmp_path)
    assert packages is not None and [z.name for z in packages.zones] == ["intel-rapl:0", "intel-rapl:1"]
    assert [r[2] for r in packages.read()] == [0.0, 0.0]
    (tmp_path / "intel-rapl:0" / "energy_uj").write_text("2000000\n")  # wrapped: 1 J to the top, 2 J after
    (tmp_path / "intel-rapl:1" / "energy_uj").write_text("9000000\n")
    assert packages.read() == [("cpu", "cpu_energy_joules", 3.0, "package=0"),
                               ("cpu", "cpu_energy_joules", 4.0, "package=1")]
    assert rapl_packages(tmp_path / "nothing") is None


def test_exporter_text_as_dcgm_and_node_exporter_write_it():
    text = """# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a",Hostname="box"} 301.5
DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-b",Hostname="box"} 88
# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).
# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",UUID="GPU-a",Hostname="box"} 123456789
# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).
# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a",Hostname="box"} 54
# HELP node_rapl_package_joules_total Current RAPL package value in joules
# TYPE node_rapl_package_joules_total counter
node_rapl_package_joules_total{index="0",path="/sys/class/powercap/intel-rapl:0"} 41234.5
"""
    assert parse_exporter(text) == [("gpu_power_watts", 301.5, "gpu=0"), ("gpu_power_watts", 88.0, "gpu=1"),
                                    ("gpu_energy_joules", pytest.approx(123456.789), "gpu=0"),
                                    ("cpu_energy_joules", 41234.5, "package=0")]
