"""run.json typed end to end: its routing, stack and host keep the shape every soak version wrote, and a part a
reader cannot read is unknown, never guessed."""

import json

from soak.config import SoakConfig
from soak.record.folder import RunFolder
from soak.record.info import Host, Route, Routing, StartedStack
from soak.record.read import load_run
from soak.record.schema import RunInfo, RunLimits


def night(tmp_path) -> RunFolder:
    folder = RunFolder(tmp_path / "night")
    folder.open()
    folder.close()
    return folder


def test_routing_stack_and_host_are_written_with_the_keys_they_were_given(tmp_path):
    """As when they were plain tables: no key a night did not set, a None it did set kept."""
    folder = night(tmp_path)
    info = RunInfo(run_id="night", created_at=5.0, config=SoakConfig(), limits=RunLimits(),
                   routing=Routing(tasks={"slow": Route(action="extend", budget_seconds=900)}),
                   stack=StartedStack(engine="llama-cpp-python", settings={"n_ctx": "8192"}, embedded=True),
                   host=Host(hostname="box", cpus=4, agent_name="mini-swe-agent", agent_stale_seconds=None))
    folder.write_info(info)
    written = json.loads(folder.layout.info.read_text())
    assert written["routing"] == {"tasks": {"slow": {"action": "extend", "budget_seconds": 900.0}}}
    assert written["stack"] == {"engine": "llama-cpp-python", "settings": {"n_ctx": "8192"}, "embedded": True}
    assert written["host"] == {"hostname": "box", "cpus": 4, "agent_name": "mini-swe-agent",
                               "agent_stale_seconds": None}
    assert written["config"] == SoakConfig().model_dump(mode="json")
    assert folder.read_info() == info
    folder.write_info(folder.read_info())
    assert json.loads(folder.layout.info.read_text()) == written


def test_an_older_run_json_reads_what_it_can_and_the_rest_as_unknown(tmp_path):
    """A config with a key this soak does not know is noted and read as None; a host with fewer keys and a missing
    stack or routing read as not recorded."""
    folder = night(tmp_path)
    config = {**SoakConfig().model_dump(mode="json"), "retired": True}
    folder.layout.info.write_text(json.dumps({"run_id": "night", "created_at": 5.0, "config": config,
                                              "limits": {}, "host": {"hostname": "box", "gpu": "none"}}))
    run = load_run(folder.path)
    assert run.info is not None and run.config is None
    assert "run.json: unreadable config (read as unknown)" in run.notes
    assert run.host.model_dump() == {"hostname": "box"} and run.host.agent_isolation is None
    assert run.info.stack.model_dump() == {} and not run.info.stack.embedded and run.info.routing.tasks == {}
