"""Run soak's NVML sampler (soak.stack.energy.NvmlGpus) on a real NVIDIA GPU beside a bf16 matrix-multiply load and
record what it read: idle, under load, after. Prints per phase the mean power, the energy counter's joules and the
power integrated over the readings, and the clock event reasons seen; writes every reading as JSON (the test fixture
tests/fixtures/nvml/). Needs PyTorch with CUDA and nvidia-ml-py.

    python bench/nvml_record.py --out tests/fixtures/nvml/h200.json
"""

import argparse
import json
import threading
import time
from pathlib import Path

import pynvml
import torch

from soak.stack.energy import CLOCK_EVENTS, NvmlGpus

PHASES = (("idle", 8.0), ("load", 20.0), ("after", 8.0))


def load(stop: threading.Event) -> None:
    """8192³ bf16 products back to back until told to stop."""
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    while not stop.is_set():
        for _ in range(20):
            a @ b
        torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--interval", type=float, default=0.5)
    args = parser.parse_args()
    gpus = NvmlGpus(pynvml)
    name = pynvml.nvmlDeviceGetName(gpus.handles[0])
    samples = []
    for phase, seconds in PHASES:
        stop = threading.Event()
        worker = threading.Thread(target=load, args=(stop,)) if phase == "load" else None
        if worker:
            worker.start()
        end = time.time() + seconds
        while time.time() < end:
            samples.append({"at": time.time(), "phase": phase,
                            "readings": [[s, m, v, labels] for s, m, v, labels in gpus.read() if labels == "gpu=0"]})
            time.sleep(args.interval)
        if worker:
            stop.set()
            worker.join()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"gpu": name, "driver": pynvml.nvmlSystemGetDriverVersion(),
                                    "interval_s": args.interval, "samples": samples}, indent=0) + "\n")
    for phase, _ in PHASES:
        rows = [s for s in samples if s["phase"] == phase]
        value = [{m: v for _, m, v, _ in s["readings"]} for s in rows]
        watts = [v["gpu_power_watts"] for v in value]
        integrated = sum((b["at"] - a["at"]) * (va["gpu_power_watts"] + vb["gpu_power_watts"]) / 2
                         for a, b, va, vb in zip(rows, rows[1:], value, value[1:], strict=False))
        counter = value[-1]["gpu_energy_joules"] - value[0]["gpu_energy_joules"]
        events = sorted({CLOCK_EVENTS.get(bit, hex(bit)) for v in value for bit in (1 << i for i in range(16))
                         if int(v.get("gpu_clock_events", 0)) & bit})
        print(f"{name} {phase}: {len(rows)} readings, mean {sum(watts) / len(watts):.0f} W "
              f"(min {min(watts):.0f}, max {max(watts):.0f}), counter {counter:.0f} J, power integrated "
              f"{integrated:.0f} J, SM clock max {max(v.get('gpu_sm_clock_mhz', 0) for v in value):.0f} MHz, "
              f"temperature max {max(v.get('gpu_temperature_c', 0) for v in value):.0f} C, events {events}")


if __name__ == "__main__":
    main()
