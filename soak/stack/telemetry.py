"""Telemetry samplers (host, processes, GPU, server /metrics), each isolated, written to samples.csv."""

import asyncio
import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Set
from dataclasses import dataclass, field
from typing import Any

import httpx2
import psutil
from prometheus_client.parser import text_string_to_metric_families

from soak.record.schema import SampleRow
from soak.stack.energy import ExporterSource, Reading, nvml_gpus, rapl_packages

KEPT_SERVER_METRICS = {
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:num_preemptions_total",
    "vllm:spec_decode_num_drafts_total",
    "vllm:spec_decode_num_draft_tokens_total",
    "vllm:spec_decode_num_accepted_tokens_total",
    "vllm:spec_decode_num_accepted_tokens_per_pos_total",
    "llamacpp:prompt_tokens_total",
    "llamacpp:prompt_tokens_cached_total",
    "llamacpp:prompt_seconds_total",
    "llamacpp:tokens_predicted_total",
    "llamacpp:tokens_predicted_seconds_total",
    "llamacpp:n_decode_total",
    "llamacpp:requests_processing",
    "llamacpp:requests_deferred",
    "llamacpp:spec_decode_num_drafts_total",
    "llamacpp:spec_decode_num_draft_tokens_total",
    "llamacpp:spec_decode_num_accepted_tokens_total",
    "process_resident_memory_bytes",
}
"""The series that matter, by their current exposed names (llama.cpp's *_seconds gauges reset per scrape); the
server's own resident memory where its /metrics has the Prometheus process collector (vLLM)."""

OLD_NAMES = {
    "vllm:gpu_cache_usage_perc": "vllm:kv_cache_usage_perc",
    "vllm:gpu_prefix_cache_queries_total": "vllm:prefix_cache_queries_total",
    "vllm:gpu_prefix_cache_hits_total": "vllm:prefix_cache_hits_total",
}
"""Older vLLM names mapped onto the current ones."""

DROPPED_LABELS = {"model_name", "engine"}


def parse_server_metrics(text: str) -> list[tuple[str, float, str]]:
    """Prometheus text -> (metric, value, labels) for the kept series, summed over model/engine labels."""
    totals: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = OLD_NAMES.get(sample.name, sample.name)
            if name not in KEPT_SERVER_METRICS:
                continue
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()) if k not in DROPPED_LABELS)
            totals[(name, labels)] = totals.get((name, labels), 0.0) + sample.value
    return [(name, value, labels) for (name, labels), value in sorted(totals.items())]


async def fetch_server_metrics(url: str, timeout: float = 4.0) -> dict[tuple[str, str], float] | None:
    """The kept series of one /metrics page by (metric, labels); None when the server has no /metrics."""
    async with httpx2.AsyncClient(timeout=timeout) as client:
        response = await client.get(url)
    if response.status_code in (404, 501):
        return None
    response.raise_for_status()
    return {(metric, labels): value for metric, value, labels in parse_server_metrics(response.text)}


def sample_host() -> list[Reading]:
    memory, swap = psutil.virtual_memory(), psutil.swap_memory()
    return [
        ("host", "mem_available_bytes", float(memory.available), ""),
        ("host", "mem_total_bytes", float(memory.total), ""),
        ("host", "swap_used_bytes", float(swap.used), ""),
        ("host", "load1", os.getloadavg()[0], ""),
    ]


class ProcessTrees:
    """RSS and CPU of process trees. psutil handles are kept between samples, since a process's CPU percent is
    measured from one call to the next on the same handle; handles of processes gone are dropped."""

    def __init__(self) -> None:
        self.handles: dict[int, psutil.Process] = {}

    def walk(self, pid: int, skip: Set[int], seen: dict[int, psutil.Process]) -> None:
        handle = self.handles.get(pid)
        if handle is None or not handle.is_running():
            handle = psutil.Process(pid)
        seen[pid] = handle
        for child in handle.children():
            if child.pid not in skip:
                with contextlib.suppress(psutil.NoSuchProcess):
                    self.walk(child.pid, skip, seen)

    def usage(self, trees: dict[str, int], skip: Set[int] = frozenset()) -> list[Reading]:
        """(source, rss_bytes / cpu_percent) per named tree; subtrees rooted at `skip` pids are left out."""
        readings: list[Reading] = []
        seen: dict[int, psutil.Process] = {}
        for source, root in trees.items():
            rss = cpu = 0.0
            tree: dict[int, psutil.Process] = {}
            with contextlib.suppress(psutil.NoSuchProcess):
                self.walk(root, skip, tree)
            for handle in tree.values():
                with contextlib.suppress(psutil.Error):
                    rss += handle.memory_info().rss
                    cpu += handle.cpu_percent(None)
            seen.update(tree)
            if tree:
                readings += [(source, "rss_bytes", rss, ""), (source, "cpu_percent", cpu, "")]
        self.handles = seen
        return readings


def sample_processes(trees: ProcessTrees, server_pids: Callable[[], dict[str, int]]) -> list[Reading]:
    """The harness (with its sandboxes, without the servers it started) and each server's tree; a server that is
    gone (restarting) is skipped."""
    servers = server_pids()
    named = {"harness": os.getpid(), **{f"server:{name}": pid for name, pid in servers.items()}}
    return trees.usage(named, skip=set(servers.values()))


GPU_QUERY = "memory.used,memory.total,utilization.gpu"


def sample_gpu() -> list[Reading]:
    """nvidia-smi, one line per GPU; MiB are reported as bytes."""
    out = subprocess.run(
        ["nvidia-smi", f"--query-gpu={GPU_QUERY}", "--format=csv,noheader,nounits"],
        capture_output=True, text=True, timeout=10, check=True,
    ).stdout
    readings: list[Reading] = []
    for index, line in enumerate(filter(None, out.splitlines())):
        used, total, util = (float(x) for x in line.split(","))
        label = f"gpu={index}"
        readings += [
            ("gpu", "gpu_memory_used_bytes", used * 2**20, label),
            ("gpu", "gpu_memory_total_bytes", total * 2**20, label),
            ("gpu", "gpu_utilization", util, label),
        ]
    return readings


@dataclass
class Sampler:
    """One isolated source: a failure becomes an error sample and never blanks the others."""

    source: str
    read: Callable[[], Any]
    """Returns readings; a coroutine function when is_async."""
    is_async: bool = False


@dataclass
class ServerMetricsSource:
    """Scrapes one server's /metrics; a server without one is noted once, not every interval."""

    name: str
    url: str
    note: Callable[[str], object]
    timeout_seconds: float = 4.0
    missing: bool = field(default=False, init=False)

    async def read(self) -> list[Reading]:
        if self.missing:
            return []
        series = await fetch_server_metrics(self.url, self.timeout_seconds)
        if series is None:
            self.missing = True
            self.note(f"{self.name} has no /metrics at {self.url}; only client-side timing is recorded")
            return []
        return [(f"server:{self.name}", metric, value, labels) for (metric, labels), value in series.items()]


def default_samplers(
    server_pids: Callable[[], dict[str, int]], metrics: list[ServerMetricsSource],
    exporters: list[ExporterSource],
) -> list[Sampler]:
    """Host and processes always; the GPUs through NVML (nvidia-smi where NVML cannot load), the CPU packages' RAPL
    counters where readable, each server's /metrics and each endpoint's energy exporter."""
    trees = ProcessTrees()
    samplers = [
        Sampler("host", sample_host),
        Sampler("processes", lambda: sample_processes(trees, server_pids)),
    ]
    if (gpus := nvml_gpus()) is not None:
        samplers.append(Sampler("gpu", gpus.read))
    elif shutil.which("nvidia-smi"):
        samplers.append(Sampler("gpu", sample_gpu))
    if (packages := rapl_packages()) is not None:
        samplers.append(Sampler("cpu", packages.read))
    samplers += [Sampler(f"server:{m.name}", m.read, is_async=True) for m in metrics]
    samplers += [Sampler(e.source, e.read, is_async=True) for e in exporters]
    return samplers


class Monitor:
    """Runs every sampler each interval and hands the readings to the record writer."""

    def __init__(self, run_id: str, samplers: list[Sampler], write: Callable[[SampleRow], None], interval: float):
        self.run_id, self.samplers, self.write, self.interval = run_id, samplers, write, interval

    async def sample_once(self) -> None:
        results = await asyncio.gather(*(self.run_sampler(s) for s in self.samplers))
        at = time.time()
        for sampler, (readings, error) in zip(self.samplers, results, strict=True):
            if error:
                self.write(SampleRow(run_id=self.run_id, at=at, source=sampler.source, metric="error", error=error))
            for source, metric, value, labels in readings:
                self.write(SampleRow(run_id=self.run_id, at=at, source=source, metric=metric, value=value,
                                     labels=labels))

    async def run_sampler(self, sampler: Sampler) -> tuple[list[Reading], str]:
        try:
            readings = await sampler.read() if sampler.is_async else await asyncio.to_thread(sampler.read)
            return list(readings), ""
        except Exception as error:  # noqa: BLE001 - a broken source is recorded, never fatal
            return [], f"{type(error).__name__}: {error}"[:500]

    async def run(self) -> None:
        """Sample until cancelled."""
        while True:
            await self.sample_once()
            await asyncio.sleep(self.interval)
