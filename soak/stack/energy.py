"""Energy samplers: the GPUs through NVML, the CPU packages through RAPL (Linux powercap), and the Prometheus exporter
of the server's host (NVIDIA's DCGM exporter, node_exporter's RAPL counters). Each is one isolated sampler of
soak.stack.telemetry; a source that is not there is left out, so energy is "not measured", never guessed.

Every source writes the same metrics to samples.csv: `gpu_energy_joules` and `cpu_energy_joules` (counters, labelled
`gpu=N` / `package=N`), `gpu_power_watts`; NVML adds clocks, temperature, the power limit and the clock event reasons
(`gpu_clock_events`, NVML's bitmask)."""

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from prometheus_client.parser import text_string_to_metric_families

Reading = tuple[str, str, float | None, str]
"""(source, metric, value, labels): one reading of a sampler of soak.stack.telemetry."""

POWERCAP = Path("/sys/class/powercap")

CLOCK_EVENTS = {0x4: "software power cap", 0x8: "hardware slowdown", 0x20: "software thermal slowdown",
                0x40: "hardware thermal slowdown", 0x80: "hardware power brake"}
"""NVML's clock event reasons that hold a GPU below the clocks it asked for (idle, 0x1, and application clocks, 0x2,
are not throttling)."""
POWER_EVENTS = 0x4 | 0x80
THERMAL_EVENTS = 0x8 | 0x20 | 0x40


class NvmlGpus:
    """Every GPU NVML sees, read once per interval: memory and utilisation as nvidia-smi gave them, plus power, the
    total-energy counter (Volta and newer; left out where the GPU has none), clocks, temperature, the power limit and
    the clock event reasons. `nvml` is the `pynvml` module (nvidia-ml-py), or a recording of one in the tests."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        nvml.nvmlInit()
        self.handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]

    def read(self) -> list[Reading]:
        readings: list[Reading] = []
        for index, handle in enumerate(self.handles):
            readings += [("gpu", metric, value, f"gpu={index}") for metric, value in self.device(handle).items()
                         if value is not None]
        return readings

    def device(self, handle: Any) -> dict[str, float | None]:
        """One GPU's readings by metric; None for one this GPU or driver does not support."""
        nvml = self.nvml
        memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        return {
            "gpu_memory_used_bytes": float(memory.used),
            "gpu_memory_total_bytes": float(memory.total),
            "gpu_utilization": float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu),
            "gpu_power_watts": nvml.nvmlDeviceGetPowerUsage(handle) / 1000,
            "gpu_energy_joules": optional(nvml, lambda: nvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1000),
            "gpu_power_limit_watts": optional(nvml, lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000),
            "gpu_sm_clock_mhz": optional(nvml, lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
            "gpu_memory_clock_mhz": optional(nvml, lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM)),
            "gpu_temperature_c": optional(nvml, lambda: nvml.nvmlDeviceGetTemperature(handle,
                                                                                      nvml.NVML_TEMPERATURE_GPU)),
            "gpu_clock_events": optional(nvml, lambda: nvml.nvmlDeviceGetCurrentClocksEventReasons(handle)),
        }


def optional(nvml: Any, read: Callable[[], float]) -> float | None:
    """A reading this GPU or driver may not support: None when NVML says so."""
    try:
        return float(read())
    except nvml.NVMLError:
        return None


def nvml_gpus() -> NvmlGpus | None:
    """NVML when nvidia-ml-py loads and the driver answers; None on a machine without an NVIDIA driver."""
    try:
        import pynvml  # type: ignore[import-untyped]

        return NvmlGpus(pynvml)
    except Exception:  # noqa: BLE001 - no driver, no library, no GPU: NVML is simply not a source here
        return None


@dataclass
class RaplPackages:
    """The CPU packages' energy counters under /sys/class/powercap (`intel-rapl:N`, also on AMD), in joules since
    the first reading. A counter wraps at `max_energy_range_uj`; each wrap is added back."""

    zones: list[Path]
    last: dict[Path, int] = field(default_factory=dict)
    total: dict[Path, float] = field(default_factory=dict)

    def read(self) -> list[Reading]:
        readings: list[Reading] = []
        for zone in self.zones:
            now = int((zone / "energy_uj").read_text())
            before = self.last.get(zone)
            if before is not None:
                step = now - before
                if step < 0:
                    step += int((zone / "max_energy_range_uj").read_text())
                self.total[zone] = self.total.get(zone, 0.0) + step / 1e6
            self.last[zone] = now
            readings.append(("cpu", "cpu_energy_joules", self.total.get(zone, 0.0),
                             f"package={zone.name.rsplit(':', 1)[1]}"))
        return readings


def rapl_packages(root: Path = POWERCAP) -> RaplPackages | None:
    """The package zones whose counter this process can read (root only on current kernels: CVE-2020-8694)."""
    zones = sorted(p for p in root.glob("intel-rapl:*") if p.name.count(":") == 1) if root.is_dir() else []
    readable = []
    for zone in zones:
        try:
            int((zone / "energy_uj").read_text())
        except (OSError, ValueError):
            continue
        readable.append(zone)
    return RaplPackages(readable) if readable else None


EXPORTER_SERIES = {
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("gpu_energy_joules", "gpu", 1e-3),
    "DCGM_FI_DEV_POWER_USAGE": ("gpu_power_watts", "gpu", 1.0),
    "node_rapl_package_joules_total": ("cpu_energy_joules", "index", 1.0),
}
"""An exporter's series -> (soak's metric, the label naming the device, the factor to joules or watts): DCGM's energy
counter is in mJ."""


def parse_exporter(text: str) -> list[tuple[str, float, str]]:
    """Prometheus text -> (metric, value, labels) of the energy series, each device its own `gpu=N` / `package=N`."""
    found = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            # The parser names a counter's sample `<name>_total` even where the exporter (DCGM's) wrote none.
            kept = EXPORTER_SERIES.get(sample.name) or EXPORTER_SERIES.get(sample.name.removesuffix("_total"))
            if kept is None:
                continue
            metric, device, factor = kept
            label = "gpu" if metric.startswith("gpu") else "package"
            found.append((metric, sample.value * factor, f"{label}={sample.labels.get(device, '0')}"))
    return found


@dataclass
class ExporterSource:
    """The Prometheus exporter of the host an endpoint runs on (`[endpoints.X] energy_metrics_url`): the energy where
    the server is, when soak runs on another machine."""

    name: str
    url: str
    timeout_seconds: float = 4.0

    @property
    def source(self) -> str:
        return f"energy:{self.name}"

    async def read(self) -> list[Reading]:
        async with httpx2.AsyncClient(timeout=self.timeout_seconds) as client:
            response = await client.get(self.url)
        response.raise_for_status()
        return [(self.source, metric, value, labels) for metric, value, labels in parse_exporter(response.text)]
