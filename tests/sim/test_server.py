"""soak sim, driven by the real openai client: wire shapes, roles, every fault kind, /metrics against ground truth."""

import json
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from soak.cli import main
from soak.errors import BadInput
from soak.paths import builtin_tasks_dir
from soak.sim.reply import broken_variant, tokenize
from soak.sim.scenario import builtin_scenarios
from soak.sim.server import CRASH_EXIT_CODE, Scenario, SimServer, load_scenario, start_subprocess
from soak.stack.servers import free_port
from soak.tasks.suites import load_suites
from tests.helpers import wait_until


def tool(name: str, *params: str) -> dict[str, Any]:
    properties = {param: {"type": "string"} for param in params}
    schema = {"type": "object", "properties": properties, "required": list(params)}
    return {"type": "function", "function": {"name": name, "parameters": schema}}


CODER_TOOLS = [tool("write_file", "path", "content"), tool("read_file", "path")]
ORCHESTRATOR_TOOLS = [tool("delegate", "instructions")]
TASK = [{"role": "user", "content": "Task id: word-frequency\nWrite `solution.py` for the task."}]
NO_WRONG_REFERENCE = '''def add(a: int, b: int) -> int:
    return a + b


class Box:
    def get(self) -> int:
        return 1
'''


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A fixed two-task suite, so these tests do not move with the task bank."""
    root = tmp_path_factory.mktemp("suite")
    shutil.copytree(builtin_tasks_dir() / "word-frequency", root / "word-frequency")
    other = root / "add-numbers"
    other.mkdir()
    (other / "task.toml").write_text('id = "add-numbers"\ntitle = "Add"\ndifficulty = "easy"\n')
    (other / "prompt.md").write_text("Write `solution.py` with `add(a, b)` returning the sum of two integers.\n")
    (other / "test_solution.py").write_text(
        "from solution import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    (other / "reference.py").write_text(NO_WRONG_REFERENCE)
    return f"dir:{root}"


@pytest.fixture(scope="module")
def tasks(suite: str) -> dict[str, Any]:
    return {task.id: task for task in load_suites(suite)}


def scenario(**fields: Any) -> Scenario:
    """A zero-latency scenario with the given top-level sections."""
    return Scenario.model_validate({"timing": {"ttft_seconds": 0, "decode_tokens_per_second": 0}} | fields)


@pytest.fixture
def serve(suite: str):
    servers: list[SimServer] = []

    def start(scn: Scenario | None = None, **kwargs: Any) -> SimServer:
        sim = SimServer(scn or scenario(), suite=suite, **kwargs)
        sim.start()
        servers.append(sim)
        return sim

    yield start
    for sim in servers:
        sim.stop()


def client(sim: SimServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=sim.base_url, api_key="sim", max_retries=0, timeout=20)


def collect(stream: Any) -> dict[str, Any]:
    """Reassemble a chat stream the way a harness does; keep the raw tool-call deltas too."""
    out: dict[str, Any] = {"content": "", "reasoning": "", "calls": {}, "finish": None, "usage": None, "deltas": []}
    for chunk in stream:
        if chunk.usage is not None:
            assert chunk.choices == []
            out["usage"] = chunk.usage
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        extra = choice.delta.model_extra or {}
        out["content"] += choice.delta.content or ""
        out["reasoning"] += extra.get("reasoning") or extra.get("reasoning_content") or ""
        for call in choice.delta.tool_calls or []:
            out["deltas"].append(call)
            slot = out["calls"].setdefault(call.index, {"id": None, "name": "", "arguments": ""})
            slot["id"] = slot["id"] or call.id
            slot["name"] = slot["name"] or (call.function.name or "")
            slot["arguments"] += call.function.arguments or ""
        out["finish"] = choice.finish_reason or out["finish"]
    return out


def coder_stream(sim: SimServer, messages: list[dict] | None = None, **kwargs: Any) -> dict[str, Any]:
    stream = client(sim).chat.completions.create(
        model="m", messages=messages or TASK, tools=CODER_TOOLS, stream=True,
        stream_options={"include_usage": True}, **kwargs,
    )
    return collect(stream)


def metric_samples(sim: SimServer) -> dict[tuple[str, tuple], float]:
    text = httpx2.get(sim.base_url.removesuffix("/v1") + "/metrics").text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


# --- scenarios ---------------------------------------------------------------------------------


def test_shipped_scenarios_load() -> None:
    names = builtin_scenarios()
    assert {"clean", "flaky", "overiterate", "zero", "crash", "mangled"} <= set(names)
    flaky = load_scenario("flaky")
    assert {"http_500", "stall", "crash", "name_absorbs_args"} <= {fault.kind for fault in flaky.faults}
    assert next(f for f in flaky.faults if f.kind == "crash").at_requests == [400, 1200]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[timing]\nttft_seconds = -1\n", "timing.ttft_seconds"),
        ("[coder]\np_correct = 2\n", "coder.p_correct"),
        ("colour = 'red'\n", "colour: Extra inputs are not permitted"),
        ("[[faults]]\nkind = 'http_500'\n", "needs a rate > 0 or at_requests"),
        ("[[faults]]\nkind = 'stall'\nrate = 0.1\n", "needs seconds > 0"),
        ("[[faults]]\nkind = 'meteor'\nrate = 0.1\n", "faults.0.kind"),
        ("[timing\n", "not valid TOML"),
        ("[drift]\nttft_factor = 0\n", "drift.ttft_factor"),
        ("[drift]\npass_factor = 1.5\n", "drift.pass_factor"),
        ("[drift]\nrss_bytes = -1\n", "drift.rss_bytes"),
        ("[drift]\nttft_from_s = -5\n", "drift.ttft_from_s"),
        ("[drift]\nrss_growth_bytes_per_s = 10\n", "rss_growth_bytes_per_s needs rss_bytes > 0"),
        ("[drift]\nspeed = 2\n", "speed: Extra inputs are not permitted"),
    ],
)
def test_malformed_scenario_names_file_and_field(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(BadInput) as error:
        load_scenario(path)
    assert str(path) in str(error.value) and expected in str(error.value)


def test_unknown_scenario_lists_shipped_ones() -> None:
    with pytest.raises(BadInput, match="no scenario 'nope'.*clean"):
        load_scenario("nope")


def test_cli_reports_bad_scenario_with_exit_2() -> None:
    result = CliRunner().invoke(main, ["sim", "--scenario", "nope", "--port", "0"])
    assert result.exit_code == 2 and "no scenario 'nope'" in result.output
    assert CliRunner().invoke(main, ["sim", "--help"]).exit_code == 0


# --- wire shapes -------------------------------------------------------------------------------


def test_plain_chat_non_stream_usage_matches_content(serve) -> None:
    sim = serve()
    reply = client(sim).chat.completions.create(model="m", messages=[{"role": "user", "content": "hello"}])
    choice = reply.choices[0]
    assert choice.finish_reason == "stop" and choice.message.content and not choice.message.tool_calls
    assert reply.usage.completion_tokens == len(tokenize(choice.message.content))
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
    assert sim.stats.by_role == {"chat": 1} and sim.stats.by_kind == {"chat": 1}


def test_coder_streams_write_file_like_vllm(serve, tasks) -> None:
    sim = serve(scenario(timing={"ttft_seconds": 0, "decode_tokens_per_second": 0, "tokens_per_chunk": 3}))
    out = coder_stream(sim)
    first, rest = out["deltas"][0], out["deltas"][1:]
    assert first.id.startswith("chatcmpl-tool-") and first.type == "function"
    assert first.function.name == "write_file" and first.function.arguments == ""
    assert rest and all(d.id is None and d.function.name is None for d in rest)
    arguments = json.loads(out["calls"][0]["arguments"])
    assert arguments == {"path": "solution.py", "content": tasks["word-frequency"].reference}
    assert out["finish"] == "tool_calls"
    assert out["usage"].completion_tokens == 1 + len(tokenize(out["calls"][0]["arguments"]))
    record = sim.stats.records[0]
    assert (record.role, record.kind, record.task_id, record.correct) == ("coder", "write", "word-frequency", True)
    assert record.completion_tokens == out["usage"].completion_tokens


def test_raw_sse_ends_with_usage_then_done(serve) -> None:
    sim = serve()
    body = {"model": "m", "messages": TASK, "tools": CODER_TOOLS, "stream": True,
            "stream_options": {"include_usage": True}}
    text = httpx2.post(f"{sim.base_url}/chat/completions", json=body).text
    events = [line.removeprefix("data: ") for line in text.split("\n\n") if line]
    assert events[-1] == "[DONE]"
    usage_chunk, finish_chunk = json.loads(events[-2]), json.loads(events[-3])
    assert usage_chunk["choices"] == [] and usage_chunk["usage"]["prompt_tokens"] > 0
    assert finish_chunk["choices"][0]["finish_reason"] == "tool_calls"
    assert json.loads(events[0])["choices"][0]["delta"] == {"role": "assistant", "content": ""}


def test_coder_non_stream_returns_whole_tool_call(serve, tasks) -> None:
    sim = serve()
    reply = client(sim).chat.completions.create(model="m", messages=TASK, tools=CODER_TOOLS)
    call = reply.choices[0].message.tool_calls[0]
    assert reply.choices[0].finish_reason == "tool_calls" and call.function.name == "write_file"
    assert json.loads(call.function.arguments)["content"] == tasks["word-frequency"].reference


def test_task_found_by_prompt_text_without_task_id(serve, tasks) -> None:
    sim = serve()
    messages = [{"role": "user", "content": "Please solve this.\n\n" + tasks["add-numbers"].prompt}]
    call = client(sim).chat.completions.create(model="m", messages=messages, tools=CODER_TOOLS)
    assert json.loads(call.choices[0].message.tool_calls[0].function.arguments)["content"] == NO_WRONG_REFERENCE


def test_wrong_first_then_fixed_on_revision(serve, tasks) -> None:
    sim = serve(scenario(coder={"p_correct": 0.0, "p_fix": 1.0}))
    first = json.loads(coder_stream(sim)["calls"][0]["arguments"])["content"]
    assert first == tasks["word-frequency"].wrong
    revision = [*TASK, {"role": "user", "content": "The tests failed:\nAssertionError: ties"}]
    fixed = json.loads(coder_stream(sim, revision)["calls"][0]["arguments"])["content"]
    assert fixed == tasks["word-frequency"].reference
    assert [r.correct for r in sim.stats.records] == [False, True]


def test_broken_variant_without_wrong_py_raises(tasks) -> None:
    source = broken_variant(tasks["add-numbers"])
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    with pytest.raises(NotImplementedError):
        namespace["add"](1, 2)
    with pytest.raises(NotImplementedError):
        namespace["Box"]().get()


def test_fenced_answer_instead_of_tool_call(serve, tasks) -> None:
    sim = serve(scenario(coder={"p_fenced": 1.0}))
    out = coder_stream(sim)
    assert not out["calls"] and out["finish"] == "stop"
    assert f"```python\n{tasks['word-frequency'].reference.rstrip()}\n```" in out["content"]
    assert sim.stats.by_kind == {"fenced": 1}


def tool_round(call_name: str, result: str) -> list[dict[str, Any]]:
    call = {"id": "call-1", "type": "function", "function": {"name": call_name, "arguments": "{}"}}
    return [*TASK, {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call-1", "content": result}]


def test_coder_says_done_after_write_and_retries_after_tool_error(serve) -> None:
    sim = serve()
    done = coder_stream(sim, tool_round("write_file", "wrote 312 bytes to solution.py"))
    assert not done["calls"] and done["finish"] == "stop" and "solution.py" in done["content"]
    retry = coder_stream(sim, tool_round("write_file", "error: arguments are not valid JSON"))
    assert retry["calls"][0]["name"] == "write_file"
    after_read = coder_stream(sim, tool_round("read_file", "def top_words(): ..."))
    assert after_read["calls"][0]["name"] == "write_file"


def test_tool_choice_none_means_plain_chat(serve) -> None:
    sim = serve()
    reply = client(sim).chat.completions.create(model="m", messages=TASK, tools=CODER_TOOLS, tool_choice="none")
    assert not reply.choices[0].message.tool_calls and sim.stats.by_role == {"chat": 1}


def test_orchestrator_delegates_then_answers_done(serve, tasks) -> None:
    sim = serve()
    api = client(sim)
    first = api.chat.completions.create(model="m", messages=TASK, tools=ORCHESTRATOR_TOOLS)
    call = first.choices[0].message.tool_calls[0]
    instructions = json.loads(call.function.arguments)["instructions"]
    assert call.function.name == "delegate" and "Task id: word-frequency" in instructions
    assert tasks["word-frequency"].prompt in instructions
    after = [*TASK, first.choices[0].message.model_dump(exclude_none=True),
             {"role": "tool", "tool_call_id": call.id, "content": "coder finished; solution.py written"}]
    done = api.chat.completions.create(model="m", messages=after, tools=ORCHESTRATOR_TOOLS)
    assert done.choices[0].finish_reason == "stop" and not done.choices[0].message.tool_calls
    revision = [*TASK, {"role": "user", "content": "The tests failed:\nE   assert 1 == 2"}]
    again = api.chat.completions.create(model="m", messages=revision, tools=ORCHESTRATOR_TOOLS)
    text = json.loads(again.choices[0].message.tool_calls[0].function.arguments)["instructions"]
    assert "The tests failed" in text and "assert 1 == 2" in text and "Task id: word-frequency" in text


def test_overiterating_orchestrator_keeps_delegating(serve) -> None:
    sim = serve(scenario(orchestrator={"overiterate_tasks": ["word-*"]}))
    messages = list(TASK)
    for _ in range(4):
        reply = client(sim).chat.completions.create(model="m", messages=messages, tools=ORCHESTRATOR_TOOLS)
        call = reply.choices[0].message.tool_calls[0]
        assert call.function.name == "delegate" and "Task id: word-frequency" in call.function.arguments
        messages += [reply.choices[0].message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": "done"}]
    assert sim.stats.by_kind == {"delegate": 4}


@pytest.mark.parametrize("engine", ["vllm", "llama-server"])
def test_reasoning_field_per_engine(serve, engine: str) -> None:
    sim = serve(scenario(reasoning={"enabled": True, "tokens": 12}), engine=engine)
    key = "reasoning" if engine == "vllm" else "reasoning_content"
    out = coder_stream(sim)
    assert len(tokenize(out["reasoning"])) == 12 and out["usage"].completion_tokens_details.reasoning_tokens == 12
    whole = client(sim).chat.completions.create(model="m", messages=TASK, tools=CODER_TOOLS)
    assert len(tokenize(whole.choices[0].message.model_extra[key])) == 12
    assert sim.stats.reasoning_tokens == 24


def test_max_tokens_cuts_the_reply(serve) -> None:
    sim = serve()
    out = coder_stream(sim, max_completion_tokens=20)
    assert out["finish"] == "length" and out["usage"].completion_tokens == 20
    with pytest.raises(json.JSONDecodeError):
        json.loads(out["calls"][0]["arguments"])


def test_bad_requests_get_400(serve) -> None:
    sim = serve(scenario(max_model_len=64))
    response = httpx2.post(f"{sim.base_url}/chat/completions", json={"model": "m", "messages": []})
    assert response.status_code == 400 and "messages" in response.json()["error"]["message"]
    response = httpx2.post(f"{sim.base_url}/chat/completions", json={"messages": TASK, "max_tokens": 0})
    assert response.status_code == 400 and "max_tokens" in response.json()["error"]["message"]
    with pytest.raises(openai.BadRequestError, match="maximum context length"):
        client(sim).chat.completions.create(model="m", messages=[{"role": "user", "content": "word " * 100}])
    assert sim.stats.prompt_tokens == 0 and sim.stats.by_kind == {"invalid": 2, "error": 1}


def test_a_server_with_an_api_key_refuses_a_request_without_it(serve) -> None:
    sim = serve(scenario(api_key="sk-right"))
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=sim.base_url, api_key="sk-wrong").chat.completions.create(model="m", messages=TASK)
    answer = openai.OpenAI(base_url=sim.base_url, api_key="sk-right").chat.completions.create(model="m", messages=TASK)
    assert answer.choices[0].message is not None and sim.stats.by_kind.get("error") == 1


def test_models_and_health(serve) -> None:
    vllm, llama = serve(), serve(engine="llama-server")
    assert [m.id for m in client(vllm).models.list()] == ["soak-sim"]
    root = vllm.base_url.removesuffix("/v1")
    assert httpx2.get(f"{root}/health").status_code == 200 and httpx2.get(f"{root}/health").content == b""
    assert httpx2.get(llama.base_url.removesuffix("/v1") + "/health").json() == {"status": "ok"}


def test_llama_cpp_python_flavour(serve, tasks) -> None:
    """What soak met in the real llama-cpp-python server, so runs against it can be rehearsed."""
    sim = serve(scenario(timing={"ttft_seconds": 0.6, "decode_tokens_per_second": 0}), engine="llama-cpp-python")
    root = sim.base_url.removesuffix("/v1")
    assert httpx2.get(f"{root}/health").status_code == httpx2.get(f"{root}/metrics").status_code == 404
    assert httpx2.get(f"{root}/openapi.json").json()["openapi"]
    assert "max_model_len" not in httpx2.get(f"{sim.base_url}/models").json()["data"][0]
    # Tools without tool_choice are hidden from the model: a plain answer. Named, the tool is called.
    hidden = coder_stream(sim)
    assert not hidden["calls"] and hidden["content"] and hidden["usage"] is None  # no usage in streams
    named = coder_stream(sim, tool_choice={"type": "function", "function": {"name": "write_file"}})
    assert json.loads(named["calls"][0]["arguments"])["path"] == "solution.py"
    whole = client(sim).chat.completions.create(model="m", messages=TASK, tools=CODER_TOOLS, tool_choice="auto")
    assert whole.choices[0].message.tool_calls and whole.usage.prompt_tokens > 0
    assert whole.usage.prompt_tokens_details is None
    # One request at a time; /v1/models waits behind the running one: it answers only once the chat has finished.
    finished = len(sim.stats.records)
    # The last answer reaches the client before its slot is let go: wait for that, so the slot held next is the chat's.
    wait_until(lambda: not sim.recorder.running, timeout=5, interval=0.005, what="the last request's slot let go")
    with ThreadPoolExecutor(2) as pool:
        running = pool.submit(coder_stream, sim)
        # The chat holds the model (it then waits out its 0.6 s to the first token).
        wait_until(lambda: sim.recorder.running, timeout=5, interval=0.005, what="the chat holding the model")
        assert sim.recorder.running == 1 and len(sim.stats.records) == finished
        httpx2.get(f"{sim.base_url}/models", timeout=5).raise_for_status()
        assert len(sim.stats.records) == finished + 1, "/v1/models answered while the chat was running"
        running.result()


def test_same_seed_same_night(serve) -> None:
    noisy = scenario(coder={"p_correct": 0.5, "p_fenced": 0.3}, faults=[{"kind": "bad_json_args", "rate": 0.3}])

    def night(seed: int) -> list[tuple]:
        sim = serve(noisy, seed=seed)
        for _ in range(12):
            client(sim).chat.completions.create(model="m", messages=TASK, tools=CODER_TOOLS)
        return [(r.kind, r.correct, tuple(r.faults), r.completion_tokens) for r in sim.stats.records]

    assert night(7) == night(7)
    assert night(7) != night(8)


# --- faults ------------------------------------------------------------------------------------


def test_http_errors_on_schedule(serve) -> None:
    sim = serve(scenario(faults=[{"kind": "http_500", "at_requests": [1]}, {"kind": "http_503", "at_requests": [2]}]))
    with pytest.raises(openai.InternalServerError) as error:
        client(sim).chat.completions.create(model="m", messages=TASK)
    assert error.value.status_code == 500
    with pytest.raises(openai.APIStatusError) as error:
        coder_stream(sim)
    assert error.value.status_code == 503
    assert coder_stream(sim)["finish"] == "tool_calls"
    assert sim.stats.faults == {"http_500": 1, "http_503": 1}
    assert [r.status for r in sim.stats.records] == [500, 503, 200]


def test_drop_cuts_the_connection_mid_response(serve) -> None:
    sim = serve(scenario(faults=[{"kind": "drop", "at_requests": [1, 2]}]))
    with pytest.raises(openai.APIConnectionError):
        coder_stream(sim)
    with pytest.raises(openai.APIConnectionError):
        client(sim).chat.completions.create(model="m", messages=TASK, tools=CODER_TOOLS)
    records = sim.stats.records
    assert [r.finish_reason for r in records] == [None, None] and sim.stats.faults == {"drop": 2}
    assert 0 < records[0].completion_tokens < coder_stream(sim)["usage"].completion_tokens


def test_truncate_ends_stream_without_finish_or_done(serve) -> None:
    sim = serve(scenario(faults=[{"kind": "truncate", "at_requests": [1]}]))
    out = coder_stream(sim)
    assert out["finish"] is None and out["usage"] is None and out["calls"]
    assert sim.stats.records[0].completion_tokens == 1 + len(tokenize(out["calls"][0]["arguments"]))


@pytest.mark.parametrize("where", ["first_byte", "mid"])
def test_stall_holds_bytes_back(serve, where: str) -> None:
    sim = serve(scenario(faults=[{"kind": "stall", "at_requests": [1, 2], "seconds": 0.3, "where": where}]))
    assert coder_stream(sim)["finish"] == "tool_calls"
    client(sim).chat.completions.create(model="m", messages=TASK)
    streamed, whole = sim.stats.records
    if where == "first_byte":
        assert streamed.first_byte - streamed.received >= 0.3
    else:
        assert streamed.last_byte - streamed.first_byte >= 0.3
    assert whole.first_byte - whole.received >= 0.3 and sim.stats.faults == {"stall": 2}


def test_name_absorbs_arguments(serve) -> None:
    sim = serve(scenario(faults=[{"kind": "name_absorbs_args", "at_requests": [1]}]))
    call = coder_stream(sim)["calls"][0]
    assert call["name"].startswith('write_file(path="solution.py", content="') and call["arguments"] == "{}"


def test_arguments_not_json(serve) -> None:
    sim = serve(scenario(faults=[{"kind": "bad_json_args", "rate": 1.0}]))
    with pytest.raises(json.JSONDecodeError):
        json.loads(coder_stream(sim)["calls"][0]["arguments"])


def test_path_outside_workspace(serve) -> None:
    faults = [{"kind": "path_escape", "at_requests": [1], "path": "/tmp/x/solution.py"},
              {"kind": "path_escape", "at_requests": [2]}]
    sim = serve(scenario(faults=faults))
    assert json.loads(coder_stream(sim)["calls"][0]["arguments"])["path"] == "/tmp/x/solution.py"
    assert json.loads(coder_stream(sim)["calls"][0]["arguments"])["path"] in (
        "../solution.py", "/tmp/soak-escape/solution.py",
    )


def test_path_escape_skips_replies_without_a_path(serve) -> None:
    sim = serve(scenario(faults=[{"kind": "path_escape", "rate": 1.0}]))
    client(sim).chat.completions.create(model="m", messages=TASK, tools=ORCHESTRATOR_TOOLS)
    assert sim.stats.faults == {}


@pytest.mark.parametrize("stream", [True, False])
def test_reasoning_eats_the_budget(serve, stream: bool) -> None:
    sim = serve(scenario(faults=[{"kind": "reasoning_budget", "rate": 1.0}]))
    if stream:
        out = coder_stream(sim, max_completion_tokens=50)
        content, reasoning, finish, usage = out["content"], out["reasoning"], out["finish"], out["usage"]
    else:
        reply = client(sim).chat.completions.create(model="m", messages=TASK, tools=CODER_TOOLS, max_tokens=50)
        message, usage, finish = reply.choices[0].message, reply.usage, reply.choices[0].finish_reason
        content, reasoning = message.content, message.model_extra["reasoning"]
        assert not message.tool_calls
    assert finish == "length" and not content and reasoning.strip()
    assert usage.completion_tokens == 50 == usage.completion_tokens_details.reasoning_tokens


def test_no_usage_chunk(serve) -> None:
    sim = serve(scenario(faults=[{"kind": "no_usage", "rate": 1.0}]))
    out = coder_stream(sim)
    assert out["usage"] is None and out["finish"] == "tool_calls"
    assert sim.stats.faults == {"no_usage": 1}


def test_stream_mangle_only_in_streams(serve) -> None:
    sim = serve(scenario(faults=[{"kind": "stream_mangle", "rate": 1.0}]))
    out = coder_stream(sim)
    assert not out["calls"] and out["finish"] == "stop"
    assert out["content"].startswith("<tool_call>\n<function=write_file>\n<parameter=path>\nsolution.py")
    whole = client(sim).chat.completions.create(model="m", messages=TASK, tools=CODER_TOOLS)
    assert whole.choices[0].message.tool_calls[0].function.name == "write_file"
    assert sim.stats.faults == {"stream_mangle": 1}


def test_stream_mangle_without_arguments(serve) -> None:
    sim = serve(scenario(faults=[{"kind": "stream_mangle", "rate": 1.0, "style": "no_args"}]))
    out = coder_stream(sim)
    assert out["calls"][0]["name"] == "write_file" and out["calls"][0]["arguments"] == ""


def test_role_limited_fault_counts_that_roles_requests(serve) -> None:
    sim = serve(scenario(faults=[{"kind": "bad_json_args", "at_requests": [1], "roles": ["coder"]}]))
    client(sim).chat.completions.create(model="m", messages=TASK, tools=ORCHESTRATOR_TOOLS)
    with pytest.raises(json.JSONDecodeError):
        json.loads(coder_stream(sim)["calls"][0]["arguments"])
    assert [r.faults for r in sim.stats.records] == [[], ["bad_json_args"]]


def test_slow_health_and_metrics(serve) -> None:
    slow = [{"kind": "slow_health", "at_requests": [2], "seconds": 0.3},
            {"kind": "slow_metrics", "at_requests": [1], "seconds": 0.3}]
    sim = serve(scenario(faults=slow))
    root = sim.base_url.removesuffix("/v1")

    def seconds(path: str) -> float:
        start = time.monotonic()
        assert httpx2.get(root + path).status_code == 200
        return time.monotonic() - start

    seconds("/health")
    assert seconds("/health") >= 0.3 and seconds("/metrics") >= 0.3
    assert sim.stats.faults == {"slow_health": 1, "slow_metrics": 1}
    assert sim.stats.health_probes == 2 and sim.stats.metrics_scrapes == 1


def test_crash_in_thread_cuts_connections_and_refuses(serve) -> None:
    sim = serve(scenario(faults=[{"kind": "crash", "at_requests": [2]}]))
    assert coder_stream(sim)["finish"] == "tool_calls"
    with pytest.raises(openai.APIConnectionError):
        coder_stream(sim)
    wait_until(lambda: not sim.running, timeout=4, interval=0.02, what="the crashed sim to stop")
    with pytest.raises(openai.APIConnectionError):
        coder_stream(sim)
    port = int(sim.base_url.rsplit(":", 1)[1].removesuffix("/v1"))
    assert sim.start(port=port) == sim.base_url
    assert coder_stream(sim)["finish"] == "tool_calls"
    assert sim.stats.faults == {"crash": 1} and [r.n for r in sim.stats.records] == [1, 2, 3]


# --- metrics against ground truth ---------------------------------------------------------------


def test_vllm_metrics_equal_what_was_served(serve) -> None:
    faults = [{"kind": "http_500", "at_requests": [3]}, {"kind": "drop", "at_requests": [4]},
              {"kind": "truncate", "at_requests": [5]}]
    sim = serve(scenario(spec_decode={"enabled": True, "acceptance": [0.9, 0.5]}, faults=faults))
    usages = []
    for number in range(1, 9):
        try:
            out = coder_stream(sim, [*TASK, {"role": "user", "content": f"attempt {number // 2}"}])
            usages.append(out["usage"])
        except openai.APIError:
            pass
    client(sim).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    stats, samples = sim.stats, metric_samples(sim)
    labels = (("engine", "0"), ("model_name", "soak-sim"))

    def value(name: str, extra: tuple = ()) -> float:
        return samples[(name, tuple(sorted(labels + extra)))]

    assert value("vllm:prompt_tokens_total") == stats.prompt_tokens == sum(r.prompt_tokens for r in stats.records)
    assert value("vllm:generation_tokens_total") == stats.completion_tokens
    assert stats.completion_tokens == sum(r.completion_tokens for r in stats.records)
    assert value("vllm:prefix_cache_queries_total") == stats.prompt_tokens
    assert value("vllm:prefix_cache_hits_total") == stats.cached_tokens > 0
    complete = [u for u in usages if u is not None]
    assert sum(u.prompt_tokens_details.cached_tokens for u in complete) <= stats.cached_tokens
    assert value("vllm:request_success_total", (("finished_reason", "stop"),)) == 6
    assert value("vllm:request_success_total", (("finished_reason", "abort"),)) == 2
    assert value("vllm:time_to_first_token_seconds_count") == 8
    assert value("vllm:num_requests_running") == 0 and value("vllm:kv_cache_usage_perc") == 0
    drafts, accepted = value("vllm:spec_decode_num_drafts_total"), value("vllm:spec_decode_num_accepted_tokens_total")
    per_pos = [value("vllm:spec_decode_num_accepted_tokens_per_pos_total", (("position", str(p)),)) for p in (0, 1)]
    assert drafts == stats.spec_drafts > 0 and accepted == stats.spec_accepted == sum(per_pos)
    assert value("vllm:spec_decode_num_draft_tokens_total") == 2 * drafts and per_pos[0] >= per_pos[1]
    assert stats.faults == {"http_500": 1, "drop": 1, "truncate": 1}


def test_prefix_cache_counts_shared_blocks(serve) -> None:
    on, off = serve(), serve(scenario(cache={"enabled": False}))
    for sim in (on, off):
        coder_stream(sim)
        longer = tool_round("write_file", "wrote solution.py")
        usage = coder_stream(sim, longer)["usage"]
        cached = usage.prompt_tokens_details.cached_tokens
        if sim is on:
            assert cached > 0 and cached % 16 == 0 and cached < usage.prompt_tokens
        else:
            assert cached == 0 and sim.stats.prompt_tokens > 0


def test_cached_tokens_per_request_only_with_prompt_tokens_details(serve) -> None:
    """vLLM without --enable-prompt-tokens-details sends null details; its /metrics still counts the hits."""
    sim = serve(scenario(cache={"prompt_tokens_details": False}))
    coder_stream(sim)
    usage = coder_stream(sim, tool_round("write_file", "wrote solution.py"))["usage"]
    assert usage.prompt_tokens > 0 and usage.prompt_tokens_details is None
    assert metric_samples(sim)[("vllm:prefix_cache_hits_total", (("engine", "0"), ("model_name", "soak-sim")))] > 0
    llamacpp = serve(scenario(cache={"prompt_tokens_details": False}), engine="llama-server")
    assert coder_stream(llamacpp)["usage"].prompt_tokens_details is not None


def test_named_tool_choice_forces_the_tool(serve, tasks) -> None:
    sim = serve(scenario(coder={"p_fenced": 1.0}))
    out = coder_stream(sim, tool_choice={"type": "function", "function": {"name": "write_file"}})
    assert [call["name"] for call in out["calls"].values()] == ["write_file"]
    assert json.loads(out["calls"][0]["arguments"])["content"] == tasks["word-frequency"].reference


def test_llamacpp_metrics_names_without_labels(serve) -> None:
    sim = serve(engine="llama-server")
    coder_stream(sim)
    coder_stream(sim)
    whole = client(sim).chat.completions.create(model="m", messages=TASK, tools=CODER_TOOLS)
    assert whole.model_extra["timings"]["predicted_n"] == whole.usage.completion_tokens
    samples, stats = metric_samples(sim), sim.stats
    assert all(labels == () for _, labels in samples)
    names = {name for name, _ in samples}
    assert {"llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total", "llamacpp:requests_processing",
            "llamacpp:requests_deferred", "llamacpp:n_decode_total", "llamacpp:prompt_tokens_seconds"} <= names
    assert not any(name.startswith("vllm:") for name in names)
    assert samples[("llamacpp:tokens_predicted_total", ())] == stats.completion_tokens
    assert samples[("llamacpp:prompt_tokens_total", ())] == stats.prompt_tokens - stats.cached_tokens


def test_stats_endpoint_serves_ground_truth(serve) -> None:
    sim = serve()
    coder_stream(sim)
    remote = httpx2.get(sim.base_url.removesuffix("/v1") + "/sim/stats").json()
    assert remote["completion_tokens"] == sim.stats.completion_tokens and remote["records"][0]["kind"] == "write"


def test_busy_slots_make_requests_wait(serve) -> None:
    timing = {"ttft_seconds": 0, "decode_tokens_per_second": 0, "max_running": 1}
    stall = {"kind": "stall", "at_requests": [1], "seconds": 2.0, "where": "first_byte"}
    sim = serve(scenario(timing=timing, faults=[stall]))
    labels = (("engine", "0"), ("model_name", "soak-sim"))

    def wait_for(name: str, value: float) -> None:
        wait_until(lambda: metric_samples(sim)[(name, labels)] == value, timeout=5, interval=0.005,
                   what=f"{name} at {value:g}")

    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(coder_stream, sim)
        wait_for("vllm:num_requests_running", 1)
        second = pool.submit(coder_stream, sim)
        wait_for("vllm:num_requests_waiting", 1)
        assert metric_samples(sim)[("vllm:kv_cache_usage_perc", labels)] > 0
        assert first.result()["finish"] == second.result()["finish"] == "tool_calls"
    wait_for("vllm:num_requests_waiting", 0)
    assert metric_samples(sim)[("vllm:num_requests_running", labels)] == 0


# --- subprocess ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_subprocess_crash_exits_and_state_survives_restart(tmp_path: Path, suite: str) -> None:
    port, state = free_port(), tmp_path / "sim-state.json"
    process, url = start_subprocess("crash", port=port, state=state, suite=suite)
    try:
        api = openai.OpenAI(base_url=url, api_key="sim", max_retries=0, timeout=20)
        for _ in range(2):
            api.chat.completions.create(model="m", messages=TASK, tools=CODER_TOOLS)
        with pytest.raises(openai.APIConnectionError):
            api.chat.completions.create(model="m", messages=TASK, tools=CODER_TOOLS)
        assert process.wait(timeout=20) == CRASH_EXIT_CODE
        process, again = start_subprocess("crash", port=port, state=state, suite=suite)
        assert again == url
        for _ in range(3):
            assert api.chat.completions.create(model="m", messages=TASK, tools=CODER_TOOLS).choices
        assert [r["n"] for r in httpx2.get(url.removesuffix("/v1") + "/sim/stats").json()["records"]] == [4, 5, 6]
    finally:
        process.terminate()
    assert process.wait(timeout=20) == 0


@pytest.mark.slow
def test_subprocess_takes_a_scenario_object(suite: str) -> None:
    process, url = start_subprocess(scenario(reasoning={"enabled": True, "tokens": 5}), engine="llama-server",
                                    suite=suite)
    try:
        reply = openai.OpenAI(base_url=url, api_key="sim", max_retries=0).chat.completions.create(
            model="m", messages=TASK, tools=CODER_TOOLS
        )
        assert len(tokenize(reply.choices[0].message.model_extra["reasoning_content"])) == 5
    finally:
        process.terminate()
        process.wait(timeout=20)
