"""External agents as small data: how each installs, how it runs one-shot against a base URL, where its home and
transcript live. `soak agent setup NAME` installs one into its own cached venv (their pins conflict with soak's).

Placeholders in commands, environment and home files: {prompt} (the attempt's prompt text), {prompt_file},
{workspace}, {home} (the attempt's temporary HOME), {base_url} (the proxy's URL for this attempt), {api_key} (the
attempt's token, never the user's key), {model}, {max_tokens}, {stale_seconds}.
"""

import json
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from soak.errors import BadInput
from soak.venvs import CachedVenv, cache_dir


class Adapter(BaseModel):
    """One agent CLI."""

    name: str
    package: str = ""
    """The PyPI distribution, pinned; empty for a user's own command."""
    command: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    stale_env: tuple[str, ...] = ()
    """The agent's own stream-stale watchdog variables, set from `[agent] stale_seconds` when given."""
    stale_default_seconds: float | None = None
    """The agent's own stream-stale watchdog when `[agent] stale_seconds` is unset, as it applies against soak's
    proxy (a loopback URL); None when none is known."""
    home_files: dict[str, Any] = Field(default_factory=dict)
    """Files written into the temporary HOME before each run (a dict is written as JSON, which YAML reads too)."""
    transcripts: tuple[str, ...] = ()
    """Globs under HOME copied into the attempt's folder afterwards: the agent's own log of what it did."""
    python: str = "3.11"

    def watchdog_seconds(self, configured: float | None) -> float | None:
        """How long the agent waits for a chunk before it gives up on a stream: `[agent] stale_seconds` where soak
        passes it on (its `stale_env`, or `{stale_seconds}` in its command), else its own default."""
        passed_on = bool(self.stale_env) or any("{stale_seconds}" in part for part in self.command)
        return configured if configured is not None and passed_on else self.stale_default_seconds


COMMON_ENV = {
    "HOME": "{home}", "TMPDIR": "{home}/tmp", "XDG_CONFIG_HOME": "{home}/.config", "XDG_CACHE_HOME": "{home}/.cache",
    "XDG_DATA_HOME": "{home}/.local/share", "LANG": "C.UTF-8", "TERM": "dumb",
    # Everything but the proxy on loopback goes to a dead port: stray egress of the agent's libraries fails fast.
    "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",
    "http_proxy": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", "BROWSER": "true",
}

HERMES = Adapter(
    name="hermes",
    package="hermes-agent==0.19.0",
    command=["hermes", "--yolo", "-z", "{prompt}", "--provider", "custom", "--model", "{model}",
             "--toolsets", "terminal,file", "--usage-file", "{home}/usage.json"],
    env={"HERMES_HOME": "{home}/.hermes"},
    stale_env=("HERMES_STREAM_STALE_TIMEOUT", "HERMES_LOCAL_STREAM_STALE_TIMEOUT"),
    # HERMES_STREAM_STALE_TIMEOUT's default of 180 s becomes HERMES_LOCAL_STREAM_STALE_TIMEOUT's 900 s against a
    # local endpoint, which the proxy on 127.0.0.1 is.
    stale_default_seconds=900,
    home_files={".hermes/config.yaml": {
        # Hermes refuses a context window under 64K whatever the model has; max_tokens or it asks for 65536.
        "model": {"provider": "custom", "default": "{model}", "base_url": "{base_url}", "api_key": "{api_key}",
                  "context_length": 65536, "max_tokens": "{max_tokens}"},
        "agent": {"verify_on_stop": False}, "lsp": {"enabled": False},
        "security": {"tirith_enabled": False, "allow_lazy_installs": False},
        "sessions": {"write_json_snapshots": True},
    }},
    transcripts=("usage.json", ".hermes/sessions/*.json"),
)
MINI = Adapter(
    name="mini-swe-agent",
    package="mini-swe-agent==2.4.6",
    command=["mini", "-y", "--exit-immediately", "-t", "{prompt}", "-m", "openai/{model}", "-c", "mini.yaml",
             "-c", "model.model_kwargs.api_base={base_url}", "-c", "model.model_kwargs.api_key={api_key}",
             "-c", "model.model_kwargs.max_retries=0", "-c", "environment.timeout=60",
             "-o", "{home}/trajectory.json"],
    env={"MSWEA_CONFIGURED": "true", "MSWEA_SILENT_STARTUP": "1", "MSWEA_COST_TRACKING": "ignore_errors",
         "MSWEA_GLOBAL_CONFIG_DIR": "{home}/mswea", "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": "2"},
    transcripts=("trajectory.json",),
)
AIDER = Adapter(
    name="aider",
    package="aider-chat==0.86.2",
    command=["aider", "--message", "{prompt}", "--model", "openai/{model}", "--openai-api-base", "{base_url}",
             "--openai-api-key", "{api_key}", "--set-env", "OPENAI_BASE_URL={base_url}",
             "--model-metadata-file", "{home}/model.metadata.json", "--edit-format", "whole", "--yes-always",
             "--no-git", "--no-auto-commits", "--no-dirty-commits", "--no-gitignore", "--no-check-update",
             "--no-show-release-notes", "--no-analytics", "--no-show-model-warnings", "--no-detect-urls",
             "--disable-playwright", "--no-auto-lint", "--no-auto-test", "--no-suggest-shell-commands",
             "--map-tokens", "0", "--no-pretty", "--no-fancy-input", "--no-restore-chat-history",
             "--chat-history-file", "{home}/chat.md", "--input-history-file", "{home}/input.history",
             "--llm-history-file", "{home}/llm.log", "--timeout", "{stale_seconds}"],
    home_files={"model.metadata.json": {"openai/{model}": {
        "max_input_tokens": 32768, "max_output_tokens": "{max_tokens}", "max_tokens": "{max_tokens}",
        "input_cost_per_token": 0, "output_cost_per_token": 0, "litellm_provider": "openai", "mode": "chat"}}},
    transcripts=("chat.md", "llm.log"),
)
ADAPTERS = {adapter.name: adapter for adapter in (HERMES, MINI, AIDER)}
ALIASES = {"hermes-agent": "hermes", "mini": "mini-swe-agent", "aider-chat": "aider"}


def custom(command: str) -> Adapter:
    """A user's own agent command (`agent.command`, or `--agent` with a space or placeholder in it)."""
    try:
        argv = shlex.split(command)
    except ValueError as error:
        raise BadInput(f"agent command {command!r}: {error}") from None
    if not argv:
        raise BadInput("agent command is empty")
    return Adapter(name=Path(argv[0]).name, command=argv)


def adapter_for(name_or_command: str) -> Adapter:
    """A built-in adapter by name, or a command line; an unknown bare name lists the known ones."""
    name = ALIASES.get(name_or_command, name_or_command)
    if name in ADAPTERS:
        return ADAPTERS[name]
    if " " in name_or_command or "{" in name_or_command or "/" in name_or_command:
        return custom(name_or_command)
    raise BadInput(f"unknown agent '{name_or_command}' (known: {', '.join(ADAPTERS)}; or give a command line with "
                   "{prompt_file}, {workspace}, {base_url}, {model})")


def fill(value: Any, values: dict[str, str]) -> Any:
    """Placeholders filled in every string of a value (strings, lists, dicts)."""
    if isinstance(value, str):
        return value.format_map(values)
    if isinstance(value, list | tuple):
        return [fill(item, values) for item in value]
    if isinstance(value, dict):
        return {fill(key, values): fill(item, values) for key, item in value.items()}
    return value


def write_home(adapter: Adapter, home: Path, values: dict[str, str]) -> None:
    for relative, content in adapter.home_files.items():
        path = home / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        filled = fill(content, values)
        path.write_text(filled if isinstance(filled, str) else json.dumps(numbers(filled), indent=2))


def numbers(value: Any) -> Any:
    """Filled placeholders that hold whole numbers become numbers again (max_tokens in a config file)."""
    if isinstance(value, dict):
        return {key: numbers(item) for key, item in value.items()}
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return value


# --- install -------------------------------------------------------------------------------------------------------


class AgentInstall(CachedVenv):
    def __init__(self, adapter: Adapter, cache: Path | None = None):
        super().__init__((cache or cache_dir()) / "agents" / adapter.name)
        self.adapter = adapter

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    def executable(self) -> Path:
        """The agent's command in its venv; a missing one names the setup command."""
        found = self.bin / self.adapter.command[0]
        if not self.read_stamp() or not found.is_file():
            raise BadInput(f"agent '{self.adapter.name}' is not installed: run `soak agent setup {self.adapter.name}`")
        return found

    def version(self) -> str:
        return str(self.read_stamp().get("version", ""))


def setup_agent(name: str, say: Callable[[str], None], cache: Path | None = None) -> AgentInstall:
    """Install a built-in agent into its own venv (idempotent: a finished setup of the same pin is kept)."""
    adapter = ADAPTERS.get(ALIASES.get(name, name))
    if adapter is None:
        raise BadInput(f"unknown agent '{name}' (known: {', '.join(ADAPTERS)})")
    install = AgentInstall(adapter, cache)
    if install.read_stamp().get("package") == adapter.package and (install.bin / adapter.command[0]).is_file():
        say(f"{adapter.name}: ready ({adapter.package} in {install.venv})")
        return install
    install.begin(say, adapter.name)
    say(f"{adapter.name}: installing {adapter.package} (about a minute)")
    install.step([str(install.python), "-m", "pip", "install", "-q", "--upgrade", "pip"], "upgrading pip")
    install.step([str(install.python), "-m", "pip", "install", "-q", adapter.package], f"installing {adapter.package}")
    distribution = adapter.package.split("==")[0]
    version = subprocess.run(
        [str(install.python), "-c", f"import importlib.metadata as m; print(m.version({distribution!r}))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    install.stamp.write_text(json.dumps({"package": adapter.package, "version": version}))
    say(f"{adapter.name}: ready ({distribution} {version} in {install.venv})")
    return install


def agent_lines() -> list[str]:
    """`soak agent list`: each built-in agent, its pinned package and whether it is installed."""
    lines = []
    for adapter in ADAPTERS.values():
        install = AgentInstall(adapter)
        state = f"installed ({install.version()})" if install.read_stamp() else f"run `soak agent setup {adapter.name}`"
        lines.append(f"{adapter.name:15} {adapter.package:24} {state}")
    return lines
