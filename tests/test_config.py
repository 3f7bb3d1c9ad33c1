import pytest

from soak.config import SoakConfig, load_config, redact
from soak.errors import BadInput

GOOD = """
mode = "direct"
[endpoints.local]
base_url = "http://127.0.0.1:8000/v1"
model = "qwen"
api_key_env = "MY_KEY"
extra_body = {reasoning_effort = "low"}
[roles]
orchestrator = "local"
coder = "local"
[budgets]
max_calls = 10
"""


def test_load_valid_config(tmp_path):
    path = tmp_path / "soak.toml"
    path.write_text(GOOD)
    config = load_config(path)
    assert config.mode == "direct" and config.budgets.max_calls == 10
    assert config.budgets.task_seconds == 600  # default kept
    assert config.endpoint_for("coder").extra_body == {"reasoning_effort": "low"}


def test_errors_are_one_readable_line(tmp_path):
    path = tmp_path / "soak.toml"
    path.write_text("[budgets]\nmax_calls = 'many'\nwall = 3\n")
    with pytest.raises(BadInput) as caught:
        load_config(path)
    message = str(caught.value)
    assert "budgets.max_calls: Input should be a valid integer" in message
    assert "budgets.wall: Extra inputs are not permitted" in message
    assert "\n" not in message
    path.write_text("[budgets\n")
    with pytest.raises(BadInput, match="not valid TOML"):
        load_config(path)
    with pytest.raises(BadInput, match="no such config file"):
        load_config(tmp_path / "missing.toml")


def test_undefined_role_endpoint_lists_known_ones():
    with pytest.raises(BadInput, match=r"endpoint 'default', which is not defined \(defined: none\)"):
        SoakConfig().endpoint_for("coder")


def test_redact_masks_secrets_but_keeps_env_var_names():
    raw = {"endpoints": {"a": {"api_key_env": "MY_KEY", "extra_body": {"api_key": "sk-123", "x": 1}}},
           "headers": [{"Authorization": "Bearer t"}]}
    clean = redact(raw)
    assert clean["endpoints"]["a"]["api_key_env"] == "MY_KEY"
    assert clean["endpoints"]["a"]["extra_body"] == {"api_key": "***", "x": 1}
    assert clean["headers"] == [{"Authorization": "***"}]
