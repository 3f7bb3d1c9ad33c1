"""The cache settings that decide how many agent sessions a server keeps warm, read where the server exposes them:
llama-server's slots and context per slot (`/props`, `/slots`) with its host-RAM prompt cache (`--cache-ram`, which
it does not expose, so from the `up` command that started it), and vLLM's prefix caching and KV cache size
(`vllm:cache_config_info` on `/metrics`)."""

import math
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from prometheus_client.parser import text_string_to_metric_families

from soak.config import Server, Stack
from soak.stack.servers import root_url

CACHE_RAM_DEFAULT_MIB = 8192
"""llama-server's `--cache-ram` when none is given (-1 is unlimited, 0 off)."""
KV_TYPE_BYTES = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32, "q4_1": 20 / 32,
                 "iq4_nl": 18 / 32, "q5_0": 22 / 32, "q5_1": 24 / 32}
"""Bytes per cached number of each llama-server `--cache-type-k/-v` (quantised types: a block of 32 with scales)."""
GGUF_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
GGUF_STRING, GGUF_ARRAY = 8, 9


@dataclass
class LlamaServerCache:
    slots: int
    context_tokens: int
    """Of one slot."""
    unified: bool
    """The slots share one KV pool of context_tokens (-kvu; llama-server's default when it picks the slot count)."""
    cache_ram_mib: int
    source: str
    """Where the cache RAM, the pool and the cache types were read: the `up` command, or llama-server's defaults."""
    kv_bytes_per_token: float | None
    """From the model file's header when it is readable on this host."""

    def shown(self) -> str:
        pool = " (one shared KV pool)" if self.unified else ""
        ram = {-1: "unlimited", 0: "off"}.get(self.cache_ram_mib, f"{self.cache_ram_mib} MiB")
        size = (f", {self.kv_bytes_per_token / 1024:.1f} KiB a token" if self.kv_bytes_per_token
                else ", size per token unknown (its model file is not readable here)")
        return (f"llama-server: {self.slots} slot(s) of {self.context_tokens} tokens{pool}, cache RAM {ram} "
                f"({self.source}){size}")

    def resident(self, tokens: int) -> int:
        """Sessions of `tokens` the slots hold at once."""
        return min(self.slots, self.context_tokens // tokens) if self.unified else self.slots

    def holds(self, tokens: int) -> float | None:
        """Sessions of `tokens` that stay warm; None when the cache RAM is on but the model's size per token unknown.

        Past what the slots hold, every session goes through the cache RAM, which then must hold them all. Measured
        on b11434 with one slot, 16 MiB and 23,040 bytes a token (8 MiB is 364 tokens): two sessions of 358-token
        prompts and 4-token replies stayed warm; two of 363, or three of 328, were evicted on every turn."""
        if self.cache_ram_mib < 0:
            return math.inf
        cached = 0.0
        if self.cache_ram_mib:
            if not self.kv_bytes_per_token:
                return None
            cached = self.cache_ram_mib * 2**20 // (tokens * self.kv_bytes_per_token)
        return float(max(self.resident(tokens), cached))

    def warm(self, sessions: int, tokens: int) -> bool | None:
        held = self.holds(tokens)
        if held is None:
            return True if sessions <= self.resident(tokens) else None
        return sessions <= held


@dataclass
class VllmCache:
    prefix_caching: bool
    kv_tokens: int
    blocks: int
    block_tokens: int
    kv_bytes: int | None
    """The KV cache's size in bytes when set (--kv-cache-memory-bytes, VLLM_CPU_KVCACHE_SPACE)."""

    def shown(self) -> str:
        return (f"vLLM: prefix caching {'on' if self.prefix_caching else 'off'}, KV cache {self.kv_tokens} tokens "
                f"({self.blocks} blocks of {self.block_tokens})")

    def holds(self, tokens: int) -> float:
        return float(self.kv_tokens // tokens) if self.prefix_caching else 0.0

    def warm(self, sessions: int, tokens: int) -> bool:
        return sessions <= self.holds(tokens)


CacheSettings = LlamaServerCache | VllmCache


def option(up: str, names: str, env: str, value: str = r"[\w.]+") -> str | None:
    """The value an `up` command gives a llama-server option (`-x N`, `--name N`, `--name=N`), else its LLAMA_ARG_
    variable; the last flag wins, as in llama-server. A value that is not plain (a shell variable) is not read."""
    flags = re.findall(rf"(?:^|\s)(?:{names})(?:=|\s+)['\"]?({value})['\"]?(?=\s|$)", up)
    found: list[str | None] = flags or re.findall(rf"(?:^|\s){env}=['\"]?({value})['\"]?(?=\s|$)", up) or [None]
    return found[-1]


def unified_pool(up: str) -> bool:
    """-kvu / -no-kvu as given, else llama-server's default: unified when it picks the slot count."""
    switches = re.findall(r"(?:^|\s)(-kvu|--kv-unified|-no-kvu|--no-kv-unified)(?=\s|$)", up)
    if switches:
        return "no" not in switches[-1]
    return option(up, "-np|--parallel", "LLAMA_ARG_N_PARALLEL", r"-?\d+") in (None, "-1")


def server_for(stack: Stack, base_url: str) -> Server | None:
    return next((s for s in stack.servers if root_url(s.base_url) == root_url(base_url)), None)


def gguf_metadata(path: Path) -> dict[str, Any]:
    """The key-value header of a GGUF model file (version 2 on). Read here rather than with the `gguf` package:
    its GGUFReader parses every tensor and vocabulary entry, about 10 s for the bundled 135M model on 2 cores
    against 0.6 s for the header alone."""
    with open(path, "rb") as file:

        def read(fmt: str, count: int = 1) -> Any:
            layout = f"<{count}{fmt}"
            values = struct.unpack(layout, file.read(struct.calcsize(layout)))
            return values[0] if count == 1 else list(values)

        def value(kind: int) -> Any:
            if kind == GGUF_STRING:
                return file.read(read("Q")).decode(errors="replace")
            if kind == GGUF_ARRAY:
                item, count = read("I"), read("Q")
                return [value(item) for _ in range(count)] if item in (GGUF_STRING, GGUF_ARRAY) else (
                    read(GGUF_SCALARS[item], count) if count else [])
            return read(GGUF_SCALARS[kind])

        if file.read(4) != b"GGUF" or read("I") < 2:
            raise ValueError(f"{path} is not a GGUF file of version 2 or later")
        _tensors, count = read("Q"), read("Q")
        return {value(GGUF_STRING): value(read("I")) for _ in range(count)}


def kv_bytes_per_token(meta: dict[str, Any], k_type: str = "f16", v_type: str = "f16") -> float:
    """What one token of a session takes in llama.cpp's KV cache, and so in its cache RAM: K and V rows of every
    layer at the cache types. Sliding-window and recurrent layers keep less, so for those models this errs towards
    a warning."""
    arch = meta["general.architecture"]
    layers, heads = meta[f"{arch}.block_count"], meta[f"{arch}.attention.head_count"]
    heads = max(heads) if isinstance(heads, list) else heads
    kv_heads = meta.get(f"{arch}.attention.head_count_kv", heads)
    per_layer = kv_heads if isinstance(kv_heads, list) else [kv_heads] * layers
    head_dim = meta[f"{arch}.embedding_length"] // heads
    k_dim = meta.get(f"{arch}.attention.key_length", head_dim)
    v_dim = meta.get(f"{arch}.attention.value_length", head_dim)
    return float(sum(per_layer) * (k_dim * KV_TYPE_BYTES[k_type] + v_dim * KV_TYPE_BYTES[v_type]))


def llama_server_cache(props: dict[str, Any], slots: list[dict[str, Any]], server: Server | None) -> LlamaServerCache:
    """From /props and /slots, and the `up` command of the stack entry serving the endpoint when there is one."""
    up = (server.up or "") if server else ""
    ram = option(up, "-cram|--cache-ram", "LLAMA_ARG_CACHE_RAM", r"-?\d+")
    k_type = option(up, "-ctk|--cache-type-k", "LLAMA_ARG_CACHE_TYPE_K") or "f16"
    v_type = option(up, "-ctv|--cache-type-v", "LLAMA_ARG_CACHE_TYPE_V") or "f16"
    if server is None or not up:
        source = "the default, assumed: no up command in soak.toml starts this endpoint"
    elif ram:
        source = f"from the up command of server '{server.name}'"
    else:
        source = f"the default: none in the up command of server '{server.name}'"
    try:
        size = kv_bytes_per_token(gguf_metadata(Path(props.get("model_path", ""))), k_type, v_type)
    except (OSError, ValueError, KeyError, struct.error, TypeError, ZeroDivisionError):
        size = None
    context = min((s["n_ctx"] for s in slots), default=props["default_generation_settings"]["n_ctx"])
    return LlamaServerCache(slots=props["total_slots"], context_tokens=context, unified=unified_pool(up),
                            cache_ram_mib=int(ram) if ram else CACHE_RAM_DEFAULT_MIB, source=source,
                            kv_bytes_per_token=size)


def number(labels: dict[str, str], name: str) -> int | None:
    """An info label's whole number; vLLM writes "None" for settings it has not resolved."""
    value = labels.get(name, "")
    return int(value) if value.isdigit() else None


def vllm_cache(metrics: str) -> VllmCache | None:
    """From the labels of vllm:cache_config_info; the KV cache in tokens is kv_cache_size_tokens (which counts hybrid
    models right) where vLLM gives it, else blocks × block size."""
    for family in text_string_to_metric_families(metrics):
        if family.name != "vllm:cache_config_info" or not family.samples:
            continue
        labels = family.samples[0].labels
        blocks, block = number(labels, "num_gpu_blocks") or 0, number(labels, "block_size") or 0
        return VllmCache(prefix_caching=labels.get("enable_prefix_caching") == "True",
                         kv_tokens=number(labels, "kv_cache_size_tokens") or blocks * block, blocks=blocks,
                         block_tokens=block, kv_bytes=number(labels, "kv_cache_memory_bytes"))
    return None


async def read_cache_settings(base_url: str, stack: Stack, metrics_url: str | None,
                              timeout: float = 10.0) -> CacheSettings | None:
    """llama-server's (it answers /props) or vLLM's (its /metrics has vllm:cache_config_info); None for servers
    that expose neither."""
    root = root_url(base_url)
    async with httpx2.AsyncClient(timeout=timeout) as client:
        props = await client.get(f"{root}/props")
        if props.status_code == 200 and "total_slots" in props.text:
            slots = await client.get(f"{root}/slots")
            listed = slots.json() if slots.status_code == 200 else []
            return llama_server_cache(props.json(), listed, server_for(stack, base_url))
        if metrics_url:
            metrics = await client.get(metrics_url)
            if metrics.status_code == 200:
                return vllm_cache(metrics.text)
    return None
