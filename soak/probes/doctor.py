"""`soak doctor`: probe every configured endpoint before a night and say what to fix; say what the jail of agents
and test runs holds on this host."""

import asyncio
import json
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx2
import openai

from soak.config import Endpoint, Mode, SoakConfig, load_config, with_cli_endpoint
from soak.errors import BadInput
from soak.llm.client import ChatEndpoint
from soak.llm.reply import TOOL_TEXT
from soak.llm.tools import CODER_TOOLS
from soak.probes.gate import run_gates
from soak.probes.probe import GateResult, Probe
from soak.record.schema import MANGLED
from soak.sandbox import cgroup
from soak.sandbox.jail import isolation_kind
from soak.sandbox.visible import allow_listed, described
from soak.stack.cache_settings import CacheSettings, LlamaServerCache, read_cache_settings
from soak.stack.energy import ExporterSource, nvml_gpus, rapl_packages
from soak.stack.servers import metrics_url_for
from soak.stack.telemetry import fetch_server_metrics

TOOL_PROMPT = [
    {"role": "system", "content": "You write files with the write_file tool. Always call the tool."},
    {"role": "user", "content": "Call write_file with path \"hello.py\" and content \"print('hi')\". Nothing else."},
]
AS_TEXT = "as_text"
"""Doctor's own verdict beside MANGLED: the server's parser left the tool call in the content as text."""
CONVERSATIONS: dict[Mode, tuple[str, ...]] = {"delegate": ("orchestrator", "coder"), "direct": ("coder",),
                                              "agent": ("coder",)}
"""The roles whose conversations an attempt keeps open at once: the orchestrator's waits while the coder's runs."""
MEASURE = "`soak gate sessions` measures how many stay warm"


@dataclass
class Finding:
    check: str
    result: str
    ok: bool = True
    advice: str = ""
    critical: bool = False
    """A critical failure would waste the night: doctor exits 1."""


def roles_of(config: SoakConfig) -> dict[str, list[str]]:
    """Endpoint name -> the roles using it; endpoints no role uses are probed too."""
    used: dict[str, list[str]] = {name: [] for name in config.endpoints}
    for role in ("orchestrator", "coder"):
        used.setdefault(getattr(config.roles, role), []).append(role)
    return used


async def served_models(chat: ChatEndpoint) -> tuple[list[str], int | None]:
    """Model ids and the context length when the server tells it (vLLM: max_model_len)."""
    page = await chat.client.models.list()
    ids, context = [], None
    for model in page.data:
        ids.append(model.id)
        extra = model.model_extra or {}
        context = context or extra.get("max_model_len") or (extra.get("meta") or {}).get("n_ctx_train")
    return ids, context


async def tool_round_trips(endpoint: Endpoint, stream: bool, tries: int, stale: float) -> Counter[str]:
    chat = ChatEndpoint("doctor", endpoint.model_copy(update={"stream": stream, "temperature": 0.0, "retries": 0}),
                        stale)
    try:
        verdicts: Counter[str] = Counter()
        for _ in range(tries):
            result = await chat.chat(TOOL_PROMPT, tools=CODER_TOOLS, role="probe", max_tokens=200,
                                     owed_tool="write_file")
            if not result.ok:
                verdicts[f"error:{result.status}"] += 1
            elif result.integrity == "none" and TOOL_TEXT.search(result.content):
                verdicts[AS_TEXT] += 1
            else:
                verdicts[result.integrity] += 1
        return verdicts
    finally:
        await chat.close()


def tool_advice(
    role_names: list[str], streamed: Counter[str], plain: Counter[str], configured_stream: bool,
    named: Counter[str] | None = None,
) -> Finding:
    """`named`: the verdicts with the tool named in tool_choice, probed when no tool call came back without it."""
    shown = f"stream {dict(streamed)}, non-stream {dict(plain)}" + (f", named {dict(named)}" if named else "")
    roles = "/".join(role_names) or "this endpoint"
    mangled_stream, mangled_plain = (sum(found[v] for v in (*MANGLED, AS_TEXT)) for found in (streamed, plain))
    if mangled_stream and not mangled_plain:
        return Finding("tool calls", shown, not configured_stream,
                       f"tool calls come back mangled when streaming: set stream = false for role {roles}",
                       critical=configured_stream)
    if mangled_plain:
        return Finding("tool calls", shown, False, "tool calls come back mangled: check the server's tool-call "
                       "parser and chat template; the fenced-code fallback will carry the coder meanwhile")
    if not streamed["ok"] and not plain["ok"]:
        if named and named["ok"]:
            return Finding("tool calls", shown, False, "tool calls come only when the request names the tool "
                           '(llama-cpp-python does this): set tool_choice = "named"')
        return Finding("tool calls", shown, True, "the model answers without tool calls: the coder will rely on "
                       "the fenced-code fallback (counted as fallback writes)")
    return Finding("tool calls", shown)


async def metrics_engine(url: str | None) -> Finding:
    if not url:
        return Finding("/metrics", "not configured", True, "no server metrics: only client-side timing is recorded")
    try:
        series = await fetch_server_metrics(url)
    except httpx2.HTTPError as error:
        return Finding("/metrics", f"unreachable ({type(error).__name__})", False, f"check {url}")
    if series is None:
        return Finding("/metrics", "absent", True, "no server metrics (e.g. llama-cpp-python): client-side timing only")
    # The engine names its own series (vllm:, llamacpp:); a process gauge beside them names none.
    prefixes = sorted({metric.split(":")[0] for metric, _ in series if ":" in metric})
    engine = ", ".join(prefixes) or "unknown names"
    return Finding("/metrics", f"{len(series)} series ({engine})", bool(prefixes),
                   "" if prefixes else "no vLLM or llama.cpp series found: samples will miss server metrics")


async def energy_source(endpoint: Endpoint) -> Finding:
    """Where this endpoint's energy would be read: the exporter of its host when `energy_metrics_url` names one, else
    this host's NVML and RAPL (the server's own only when it runs here), else nowhere."""
    if endpoint.energy_metrics_url:
        try:
            readings = await ExporterSource("doctor", endpoint.energy_metrics_url).read()
        except httpx2.HTTPError as error:
            return Finding("energy", f"exporter unreachable ({type(error).__name__})", False,
                           f"check energy_metrics_url ({endpoint.energy_metrics_url})")
        devices = Counter(metric for _, metric, _, _ in readings if metric.endswith("_energy_joules"))
        powered = {labels for _, metric, _, labels in readings if metric == "gpu_power_watts"}
        found = [f"{n} GPU energy counters" for m, n in devices.items() if m.startswith("gpu")]
        found += [f"{n} CPU package counters" for m, n in devices.items() if m.startswith("cpu")]
        if not devices and powered:
            found.append(f"{len(powered)} GPU power gauges (integrated)")
        if not found:
            return Finding("energy", "exporter has no DCGM or RAPL series", False,
                           "serve NVIDIA's DCGM exporter or node_exporter's powercap collector at energy_metrics_url")
        return Finding("energy", f"the server host's exporter: {', '.join(found)}")
    gpus, packages = await asyncio.to_thread(nvml_gpus), await asyncio.to_thread(rapl_packages)
    here = ([f"NVML ({len(gpus.handles)} GPUs)"] if gpus else []) + (
        [f"RAPL ({len(packages.zones)} CPU packages)"] if packages else [])
    if not here:
        return Finding("energy", "not measured", True, "no NVML or readable RAPL here: name the server host's "
                       "exporter (energy_metrics_url) for joules per solved task")
    return Finding("energy", f"this host: {', '.join(here)}", True,
                   "" if gpus else "the GPUs are not measured: name the server host's exporter (energy_metrics_url)")


def cache_finding(twin: GateResult) -> Finding:
    shown = twin.line().split("  ", 1)[1].strip()
    if twin.measured is None:
        return Finding("prefix caching", shown, False, "prefix caching cannot be observed on this server")
    advice = "" if twin.passed else ("no prefix-cache hits observed: enable prefix caching (vLLM "
                                     "--enable-prefix-caching) or expect slower multi-turn tasks")
    return Finding("prefix caching", shown, twin.passed, advice)


def planned_sessions(config: SoakConfig, name: str) -> int:
    """Conversations open at once on an endpoint: one per attempt in flight and role of the mode that uses it."""
    return config.concurrency * sum(1 for role in CONVERSATIONS[config.mode] if getattr(config.roles, role) == name)


def session_tokens(config: SoakConfig, endpoint: Endpoint, context: int | None) -> int:
    """The length a session is planned to reach. Its prompt is the whole conversation so far: every reply (at most
    max_tokens, in at most max_calls calls of an attempt) and every tool result stay in it until the server's context
    stops it. So the smaller of max_calls × max_tokens and the context (per slot on llama-server): the length a long
    attempt reaches, the one whose eviction costs most."""
    budget = config.budgets.max_calls * endpoint.max_tokens
    return min(budget, context) if context else budget


def warmth_advice(settings: CacheSettings, sessions: int, tokens: int, attempts: int) -> str:
    """The fixes for sessions that cannot all stay warm, with the figures that would make them fit."""
    fits = int((settings.holds(tokens) or 0) * attempts // sessions)
    fewer = f"run fewer at once (concurrency = {fits})" if fits else "run fewer at once"
    if isinstance(settings, LlamaServerCache):
        size = settings.kv_bytes_per_token
        ram = f"to {math.ceil(sessions * tokens * size / 2**20)} MiB" if size else "(how far: unknown here)"
        return (f"evicted sessions re-prefill their whole history on their next turn: raise --cache-ram {ram}, or "
                f"give each session a slot (--parallel {sessions} --ctx-size {sessions * tokens}), or {fewer}; "
                f"{MEASURE}")
    if not settings.prefix_caching:
        return f"every turn re-prefills its whole history: start vLLM with --enable-prefix-caching; {MEASURE}"
    cache = (f"a KV cache of {math.ceil(settings.kv_bytes * sessions * tokens / settings.kv_tokens / 2**30)} GiB"
             if settings.kv_bytes else "a larger KV cache")
    return (f"evicted sessions re-prefill their whole history on their next turn: give vLLM {cache} "
            f"(--kv-cache-memory-bytes; VLLM_CPU_KVCACHE_SPACE in GiB on CPU, --gpu-memory-utilization on a GPU), "
            f"or {fewer}; {MEASURE}")


def cache_findings(settings: CacheSettings | None, sessions: int, tokens: int, attempts: int) -> list[Finding]:
    """The settings that decide how many sessions stay warm, then whether the planned ones do (`attempts`: the
    concurrency)."""
    if settings is None:
        return [Finding("cache settings", "not exposed (no llama-server /props, no vllm:cache_config_info)", True,
                        MEASURE)]
    findings = [Finding("cache settings", settings.shown())]
    if not sessions:
        return findings
    planned = f"{sessions} sessions of {tokens} tokens"
    warm, held = settings.warm(sessions, tokens), settings.holds(tokens)
    if warm is None:
        assert isinstance(settings, LlamaServerCache)
        findings.append(Finding("warm sessions", f"{planned}: the slots hold {settings.resident(tokens)}, the "
                                "cache RAM an unknown number more", True, MEASURE))
    elif warm:
        room = "" if held == math.inf else f" (room for {held:.0f})"
        findings.append(Finding("warm sessions", f"{planned}: stay warm{room}"))
    else:
        findings.append(Finding("warm sessions", f"{planned}: room for only {held:.0f}", False,
                                warmth_advice(settings, sessions, tokens, attempts)))
    return findings


async def diagnose(name: str, endpoint: Endpoint, roles: list[str], config: SoakConfig, tries: int) -> list[Finding]:
    stale = min(config.budgets.stale_seconds, 120)
    chat = ChatEndpoint(name, endpoint.model_copy(update={"retries": 0}), stale)
    findings: list[Finding] = []
    try:
        try:
            models, context = await served_models(chat)
        except (openai.APIError, httpx2.HTTPError) as error:
            return [Finding("reachable", f"no ({type(error).__name__})", False,
                            f"nothing answers at {endpoint.base_url}: start the server or fix base_url", True)]
        findings.append(Finding("reachable", f"yes, {len(models)} model(s)"))
        # Servers with a single model (llama.cpp) answer under any requested name.
        served = endpoint.model in models or len(models) == 1
        findings.append(Finding("model served", endpoint.model if served else f"{endpoint.model} not in {models}",
                                served, "" if served else f"set model = one of {models}", critical=not served))
        findings.append(Finding("context length", str(context) if context else "unknown"))
        streaming = ChatEndpoint(name, endpoint.model_copy(update={"stream": True, "retries": 0}), stale)
        try:
            streamed = await streaming.chat([{"role": "user", "content": "Say OK."}], role="probe", max_tokens=16)
        finally:
            await streaming.close()
        findings.append(Finding("streaming", "works" if streamed.ok else f"fails ({streamed.status})", streamed.ok,
                                "" if streamed.ok else "set stream = false for this endpoint",
                                critical=endpoint.stream and not streamed.ok))
        usage = streamed.rows[-1].prompt_tokens is not None if streamed.ok else False
        findings.append(Finding("usage in streams", "reported" if usage else "missing", usage,
                                "" if usage else "token counts will be unknown when streaming (recorded as such)"))
        streamed_tools = await tool_round_trips(endpoint, True, tries, stale)
        plain_tools = await tool_round_trips(endpoint, False, tries, stale)
        named = None
        if endpoint.tool_choice is None and not streamed_tools["ok"] and not plain_tools["ok"]:
            named_endpoint = endpoint.model_copy(update={"tool_choice": "named"})
            named = await tool_round_trips(named_endpoint, endpoint.stream, tries, stale)
        findings.append(tool_advice(roles, streamed_tools, plain_tools, endpoint.stream, named))
        thinking = await chat.chat([{"role": "user", "content": "What is 17 * 23? Answer with the number."}],
                                   role="probe", max_tokens=48)
        if thinking.reasoning_exhausted:
            findings.append(Finding("reasoning", "ate the whole 48-token budget", False,
                                    "reasoning consumed the whole budget: pass reasoning_effort or raise max_tokens"))
        else:
            findings.append(Finding("reasoning", "field present" if thinking.reasoning else "none seen"))
        url = metrics_url_for(config.stack, endpoint.base_url)
        findings.append(await metrics_engine(url))
        findings.append(await energy_source(endpoint))
        try:
            settings = await read_cache_settings(endpoint.base_url, config.stack, url)
        except httpx2.HTTPError as error:
            findings.append(Finding("cache settings", f"unreadable ({type(error).__name__})", False, MEASURE))
        else:
            length = settings.context_tokens if isinstance(settings, LlamaServerCache) else context
            findings += cache_findings(settings, planned_sessions(config, name),
                                       session_tokens(config, endpoint, length), config.concurrency)
        small = config.gates.model_copy(update={"twin_tokens": 600})
        probe = Probe(chat, url)
        try:
            (twin,) = await run_gates(probe, ["prefix-twin"], small, None)
        finally:
            await probe.close()
        findings.append(cache_finding(twin))
    finally:
        await chat.close()
    return findings


async def diagnose_all(config: SoakConfig, tries: int) -> dict[str, list[Finding]]:
    """Endpoint name -> its findings, for every endpoint (those no role uses too)."""
    return {
        name: await diagnose(name, config.endpoints[name], roles, config, tries)
        for name, roles in roles_of(config).items() if name in config.endpoints
    }


def jail_findings() -> list[Finding]:
    """What the jail holds on this host: the isolation kind, what a test run and an agent read and write, network, and
    whether run records are protected (soak.sandbox.visible)."""
    kind = isolation_kind()
    contained = allow_listed(kind)
    findings = [Finding("isolation", kind, contained, "" if contained else "install bubblewrap (bwrap), or run "
                        "where unshare works, to hide the bank and the run folder from agents and solutions and "
                        "contain their writes")]
    findings += [Finding(check, result, ok) for check, result, ok in described(kind)]
    counted = cgroup.hierarchy() is not None
    return findings + [Finding("memory", cgroup.described(), counted, "" if counted else
                               "run soak as root, or delegate a cgroup v2 subtree with the memory and pids "
                               "controllers to its user (systemd-run --user --scope -p Delegate=yes soak ...)")]


NodeFindings = dict[str, list[Finding]]
"""A cluster's nodes, each its findings under its title (soak.night.cluster.node_findings)."""


def doctor_json(config: SoakConfig, results: dict[str, list[Finding]], jail: list[Finding],
                nodes: NodeFindings | None = None) -> dict[str, Any]:
    """The findings as `soak doctor --json` prints them: `ok` (False when doctor exits 1), the jail's findings,
    per endpoint its name, base_url, roles and findings (check, result, ok, advice, critical), in the table's
    order, and with `--cluster` per node its title and findings."""
    roles = roles_of(config)
    nodes = nodes or {}
    return {
        "ok": not any(f.critical for findings in [*results.values(), *nodes.values()] for f in findings),
        "jail": [asdict(f) for f in jail],
        "nodes": [{"node": title, "findings": [asdict(f) for f in found]} for title, found in nodes.items()],
        "endpoints": [
            {"name": name, "base_url": config.endpoints[name].base_url, "roles": roles[name],
             "findings": [asdict(f) for f in findings]}
            for name, findings in results.items()
        ],
    }


def run_doctor(config: SoakConfig, tries: int, as_json: bool = False, nodes: NodeFindings | None = None) -> bool:
    """Print a table of the jail, one per endpoint and one per cluster node (or the findings as JSON); False when
    something would waste the night."""
    from rich.console import Console
    from rich.table import Table

    results = asyncio.run(diagnose_all(config, tries))
    jail = jail_findings()
    report = doctor_json(config, results, jail, nodes)
    if as_json:
        print(json.dumps(report, indent=2))
        return bool(report["ok"])
    console = Console()
    tables = {"the jail of agents and test runs": jail} | {
        f"{endpoint['name']} ({'/'.join(endpoint['roles']) or 'unused'}) {endpoint['base_url']}":
            results[endpoint["name"]] for endpoint in report["endpoints"]} | (nodes or {})
    for title, findings in tables.items():
        table = Table("check", "result", "advice", title=title, title_justify="left")
        for f in findings:
            style = "" if f.ok else ("bold red" if f.critical else "yellow")
            table.add_row(f.check, f.result, f.advice, style=style)
        console.print(table)
    return bool(report["ok"])


def doctor_command(config_path: Path | None, base_url: str | None, model: str | None, tries: int,
                   as_json: bool, cluster: Callable[[SoakConfig], NodeFindings] | None = None) -> bool:
    """`soak doctor`: the config's endpoints, or the one given by --base-url/--model, probed, and with `--cluster`
    every node of the cluster (`cluster` gives their findings); False when unfit."""
    config = with_cli_endpoint(load_config(config_path), base_url, model)
    if not config.endpoints and cluster is None:
        raise BadInput("no endpoint to probe: pass --config soak.toml or --base-url URL --model M (or --cluster)")
    return run_doctor(config, tries, as_json, cluster(config) if cluster else None)
