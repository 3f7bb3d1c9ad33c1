"""A night's attempts on a Ray cluster (`soak run --cluster ADDRESS`): each attempt is a Ray task on a node that
offers what the attempt declares (cores, memory, the jail's custom resource); the loop, the budgets' ledger and the run
folder stay here, the run folder's one writer.

The task on the node runs the attempt this machine would run (the same task function: soak's delegation loop, or the
external agent behind a recording proxy of its own on that node) in a work folder of its own, and streams back what
the attempt emits as it happens (Ray's streaming generator): its node, each call row, each step, each round row; then
the work folder as a tar and the attempt's row. Ray's own retries are off (a generator run twice would send its rows
twice): a node or worker lost mid-attempt ends the try `node_lost`, the runner retries it once, and this module sends
that retry to another node (a label selector on Ray's node id).

`soak doctor --cluster` runs `node_facts` on every node and turns them into findings."""

import asyncio
import io
import logging
import os
import platform
import re
import socket
import stat
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

import psutil

from soak import __version__
from soak.agent.attempt import AttemptContext, Ending, Finished, task_row
from soak.agent.limits import AttemptLimits
from soak.config import SoakConfig
from soak.errors import BadInput
from soak.probes.doctor import Finding
from soak.record.identity import AttemptId
from soak.record.info import Routing
from soak.record.schema import TaskRow
from soak.sandbox.disk import entries, remove_tree
from soak.tasks.spec import TaskSpec

INSTALL = "pip install 'soak[cluster]'"
CONNECT_SECONDS = 5.0
MAX_UNPACKED_BYTES = 4 << 30
"""The most an attempt's folder brings back from its node: an agent's workspace and HOME hold 512 MiB by default
([agent] disk_bytes), the transcripts far less; past it files are left out, not the head's disk filled."""
Event = tuple[str, Any]
"""What an attempt on a node streams back: ("node", (label, Ray's node id)), ("call", CallRow), ("step", (round,
role)), ("round", RoundRow), ("files", tar bytes), ("row", TaskRow)."""


def ray_module() -> Any:
    try:
        import ray
    except ImportError:
        raise BadInput(f"--cluster needs Ray on this machine and every node: {INSTALL}") from None
    return ray


def check_cluster(address: str) -> None:
    """A cluster answers at `address` (`auto`: the one `ray start` last started here, or RAY_ADDRESS), within
    seconds: ray.init itself would wait minutes on a dead address. BadInput otherwise. A Ray Client address
    (`ray://`) is left to ray.init."""
    ray_module()
    if address.startswith("ray://"):
        return
    from ray._private.services import canonicalize_bootstrap_address_or_die

    try:
        found = canonicalize_bootstrap_address_or_die(address)
        host, port = found.rsplit(":", 1)
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_SECONDS).close()
    except (ConnectionError, OSError, ValueError) as error:
        raise unreachable(address, error) from None


def unreachable(address: str, error: Exception) -> BadInput:
    return BadInput(f"--cluster {address}: no Ray cluster answers there ({error}); start one with `ray start --head` "
                    "(docs/scale/ray.md)")


def connect(address: str) -> Any:
    """Join the cluster as its driver, with nothing of this environment. Bad address: one BadInput."""
    ray = ray_module()
    if ray.is_initialized():
        return ray
    check_cluster(address)
    try:
        ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise unreachable(address, error) from None
    return ray


def api_keys(config: SoakConfig) -> dict[str, str]:
    """The API keys of the endpoints in use, by their variable's name: every attempt calls the model."""
    return {name: os.environ[name] for endpoint in config.endpoints.values()
            if (name := endpoint.api_key_env) and name in os.environ}


@cache
def node_label(node_id: str) -> str:
    """`<node name>/<first 8 of its id>`: a node's name (`ray start --node-name`, by default its IP) and which raylet,
    since a node started again has the same name and another id."""
    import ray

    names = {node["NodeID"]: node["NodeName"] for node in ray.nodes()}  # type: ignore[no-untyped-call]
    return f"{names.get(node_id, '?')}/{node_id[:8]}"


# --- on the node ------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Place:
    """Where an attempt belongs in the run: what its rows are stamped with."""

    run_id: str
    attempt: AttemptId
    route: str


def attempt_on_node(config: SoakConfig, routing: Routing, task: TaskSpec, place: Place,
                    keys: dict[str, str]) -> Iterator[Event]:
    """One attempt, run on the node Ray placed it on, its events streamed back as they come. The API keys come as an
    argument (an object in Ray's store), never in the job's runtime environment, which the dashboard and `ray list
    jobs` show. Ray's cancel raises KeyboardInterrupt here (closing the stream, GeneratorExit): the attempt is
    cancelled, its tests and agent killed, before the task ends."""
    import ray

    os.environ.update(keys)

    node_id = ray.get_runtime_context().get_node_id()
    label = node_label(node_id)
    yield "node", (label, node_id)
    workdir = attempt_folder()
    loop = asyncio.new_event_loop()
    events: asyncio.Queue[Event | None] = asyncio.Queue()
    context = AttemptContext(
        place.run_id, replace(place.attempt, node=label), workdir, place.route,
        on_call=lambda row: events.put_nowait(("call", row)),
        on_step=lambda round_, role: events.put_nowait(("step", (round_, role))),
        on_round=lambda row: events.put_nowait(("round", row)))
    job = loop.create_task(run_attempt(config, routing, task, context, events))
    try:
        while (event := loop.run_until_complete(events.get())) is not None:
            yield event
        row = job.result()
        yield "files", packed(workdir)
        yield "row", row
    except BaseException:
        job.cancel()
        loop.run_until_complete(asyncio.gather(job, return_exceptions=True))
        raise
    finally:
        loop.close()
        remove_tree(workdir)


ATTEMPT_PREFIX = "soak-attempt-"


def attempt_folder() -> Path:
    """A new work folder named for this worker process (`<pid namespace>.<pid>`), once the folders of dead workers are
    gone: a head killed with SIGKILL can take its job's workers down before their own cleanup runs, and the next
    attempt on the node clears what they left. Only a folder of this pid namespace is judged: a container that shares
    /tmp but not its processes cannot tell whether another's worker lives."""
    namespace = os.stat("/proc/self/ns/pid").st_ino
    for folder in Path(tempfile.gettempdir()).glob(f"{ATTEMPT_PREFIX}*"):
        worker = worker_of(folder)
        if worker and worker[0] == namespace and not psutil.pid_exists(worker[1]):
            remove_tree(folder)
    return Path(tempfile.mkdtemp(prefix=f"{ATTEMPT_PREFIX}{namespace}.{os.getpid()}-"))


def worker_of(folder: Path) -> tuple[int, int] | None:
    """The (pid namespace, pid) an attempt folder is named for; None for any other folder."""
    found = re.fullmatch(re.escape(ATTEMPT_PREFIX) + r"(\d+)\.(\d+)-.*", folder.name, re.S)
    return (int(found.group(1)), int(found.group(2))) if found else None


async def run_attempt(config: SoakConfig, routing: Routing, task: TaskSpec, context: AttemptContext,
                      events: asyncio.Queue[Event | None]) -> TaskRow:
    """The attempt as this machine runs it (soak.night.attempts.local_attempts); None on `events` when it ends."""
    from soak.night.attempts import local_attempts

    try:
        async with AsyncExitStack() as cleanup:
            attempts = await local_attempts(config, routing, None, cleanup)
            return await attempts(task, context)
    finally:
        events.put_nowait(None)


def packed(workdir: Path) -> bytes:
    """The attempt's work folder as a gzip'd tar, walked at any depth by file descriptor (the attempt made the tree);
    regular files, folders and links only, as they are (the head checks each member: `kept`)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        for here, name, info in entries(workdir):
            if stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode) or stat.S_ISLNK(info.st_mode):
                try:
                    tar.add(workdir / here / name, arcname=str(here / name), recursive=False)
                except OSError:  # a path too long to open, or gone: the head goes without it
                    continue
    return buffer.getvalue()


def unpacked(data: bytes, workdir: Path, max_bytes: int = MAX_UNPACKED_BYTES) -> None:
    """A node's work folder into the run folder, member by member: what `kept` refuses is left out, the rest kept.
    Written as the head's own files (no owner, mode or time from the tar), so no setuid bit can come back."""
    room = max_bytes
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extraction_filter = trusted  # checked by `kept`; on 3.12-3.13 it also silences the missing-filter warning
        for member in tar:
            if kept(member, workdir, room):
                room -= member.size if member.isreg() else 0
                tar.extract(member, workdir, set_attrs=False)


def trusted(member: tarfile.TarInfo, _path: str) -> tarfile.TarInfo:
    return member


def kept(member: tarfile.TarInfo, workdir: Path, room: int) -> bool:
    """tarfile's `data` filter, spelled out because Python 3.11.0-3.11.3 (Debian 12's own) lack it: a regular file
    within the room left, a folder or a link, its path and a link's target inside `workdir` (as the links already
    unpacked resolve them); no device, FIFO or absolute name."""
    if not (member.isreg() or member.isdir() or member.issym() or member.islnk()) or os.path.isabs(member.name):
        return False
    if member.isreg() and member.size > room:
        return False
    root = os.path.realpath(workdir)

    def inside(path: str) -> bool:
        return os.path.commonpath([os.path.realpath(os.path.join(root, path)), root]) == root

    if not inside(member.name):
        return False
    if member.issym():
        return not os.path.isabs(member.linkname) and inside(os.path.join(os.path.dirname(member.name),
                                                                          member.linkname))
    return not member.islnk() or (not os.path.isabs(member.linkname) and inside(member.linkname))


# --- on the head ------------------------------------------------------------------------------------------------------

class ClusterTasks:
    """The night's task function with `--cluster`: each attempt a Ray task, its rows handed to the runner as the
    node sends them; a try lost with its node is a `node_lost` row, and its retry avoids the nodes lost before."""

    def __init__(self, config: SoakConfig, routing: Routing) -> None:
        ray = ray_module()
        self.ray, self.config, self.routing = ray, config, routing
        wants = config.cluster
        self.remote = ray.remote(attempt_on_node)
        self.keys = ray.put(api_keys(config))
        self.declared = {"num_cpus": wants.cpus_per_attempt, "max_retries": 0, "retry_exceptions": False,
                         "memory": int(wants.memory_per_attempt_gb * 2**30) if wants.memory_per_attempt_gb else None,
                         "resources": {wants.jail_resource: 1} if wants.jail_resource else None}
        self.lost: dict[AttemptId, list[str]] = {}
        """An attempt (its try's identity but the node) -> the ids of the nodes its tries were lost with."""

    async def __call__(self, task: TaskSpec, context: AttemptContext) -> TaskRow:
        from ray.exceptions import RayError, RayTaskError

        started, attempt, node_id = time.time(), replace(context.attempt, node=""), ""
        avoid = self.lost.get(attempt, [])
        options = {"label_selector": {"ray.io/node-id": f"!in({','.join(avoid)})"}} if avoid else {}
        place = Place(context.run_id, attempt, context.route)
        name = f"soak {task.id} {attempt.cycle}-{attempt.repeat}"
        stream = self.remote.options(name=name, **self.declared, **options).remote(
            self.config, self.routing, task, place, self.keys)
        try:
            async for ref in stream:
                kind, value = await ref
                if kind == "node":
                    label, node_id = value
                    context.attempt = replace(attempt, node=label)
                elif kind == "call":
                    context.totals.add(value)
                    context.on_call(value)
                elif kind == "step":
                    context.on_step(*value)
                elif kind == "round":
                    context.on_round(value)
                elif kind == "files":
                    await asyncio.to_thread(unpacked, value, context.workdir)
                else:
                    row: TaskRow = value
                    return row
        except asyncio.CancelledError:
            self.ray.cancel(stream)
            raise
        except RayTaskError:  # the attempt itself raised on the node: soak's bug, a harness_error with its traceback
            raise
        except RayError as error:  # the node, its raylet or the worker process died under the attempt
            if node_id:
                self.lost.setdefault(attempt, []).append(node_id)
            ending = Ending("node_lost", type(error).__name__, str(error))
            return task_row(task, context, Finished(started, time.time() - started, ending),
                            AttemptLimits.of(task, self.config.budgets))
        raise RuntimeError(f"the attempt of {task.id} on {context.attempt.node or 'its node'} ended without its row")


# --- soak doctor --cluster --------------------------------------------------------------------------------------------

def node_facts(suite: str) -> dict[str, Any]:
    """What `soak doctor --cluster` needs to know of the node this runs on."""
    from soak.sandbox.jail import isolation_kind
    from soak.sandbox.visible import allow_listed
    from soak.tasks.suites import load_suites

    try:
        tasks: int | str = len(load_suites(suite))
    except BadInput as error:
        tasks = str(error)
    kind = isolation_kind()
    return {"soak": __version__, "python": platform.python_version(), "isolation": kind,
            "contained": allow_listed(kind), "tasks": tasks, "cores": os.cpu_count() or 0, "load": os.getloadavg()[0]}


def node_findings(config: SoakConfig, address: str) -> dict[str, list[Finding]]:
    """Each live node's findings (`node_table`), under its label and address."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    ray = connect(address)
    probe = ray.remote(node_facts)
    nodes = [node for node in ray.nodes() if node["Alive"]]
    facts = ray.get([probe.options(num_cpus=0, max_retries=0, scheduling_strategy=NodeAffinitySchedulingStrategy(
        node["NodeID"], soft=False)).remote(config.suite) for node in nodes], timeout=120)
    here = node_facts(config.suite)
    return {f"node {node_label(node['NodeID'])} ({node['NodeManagerAddress']})": node_table(config, node, seen, here)
            for node, seen in zip(nodes, facts, strict=True)}


def node_table(config: SoakConfig, node: dict[str, Any], seen: dict[str, Any], here: dict[str, Any]) -> list[Finding]:
    """soak's version and Python against this machine's, the jail that works there beside whether the node takes
    attempts (it offers their cores and the jail's resource), the suite, its cores. Critical: another soak or Python
    (Ray would refuse the node, or run other code), or a node that offers the jail's resource without a jail."""
    wants, resources = config.cluster, node["Resources"]
    offered = resources.get(wants.jail_resource, 0) if wants.jail_resource else None
    takes = offered != 0 and resources.get("CPU", 0) >= wants.cpus_per_attempt
    uncontained = takes and not seen["contained"]
    jail = seen["isolation"] + ("" if offered is None else f"; offers {wants.jail_resource}: {offered:g}")
    found = isinstance(seen["tasks"], int)
    return [
        Finding("soak", seen["soak"], seen["soak"] == here["soak"], "" if seen["soak"] == here["soak"] else
                f"install soak {here['soak']} there", critical=seen["soak"] != here["soak"]),
        Finding("python", seen["python"], seen["python"] == here["python"], "" if seen["python"] == here["python"]
                else f"Ray needs Python {here['python']} on every node", critical=seen["python"] != here["python"]),
        Finding("jail", jail, not uncontained, "" if not uncontained else "install bubblewrap there"
                + (f", or stop offering {wants.jail_resource}" if offered else ""),
                critical=uncontained and bool(offered)),
        Finding("attempts", "takes attempts" if takes else
                f"takes none (no {wants.jail_resource if offered == 0 else 'CPU'})"),
        Finding("tasks", f"{config.suite}: {seen['tasks']}" + (" tasks" if found else ""), found, "" if found else
                "tasks travel with each attempt; only `soak try` there reads the suite itself"),
        Finding("cores", f"{resources.get('CPU', 0):g} declared to Ray of {seen['cores']}; "
                f"{max(0.0, seen['cores'] - seen['load']):.1f} free (load {seen['load']:.1f})"),
    ]
