"""The attempts this machine runs: soak's delegation loop against the configured endpoints, or the external agent
behind its recording proxy. The night's session (soak.night.wiring) and a cluster node (soak.night.cluster) both
build them here, so neither imports the other."""

from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

from soak.agent.attempt import AttemptContext
from soak.config import SoakConfig
from soak.decisions.routing import applied
from soak.night.loop import TaskFn
from soak.record.info import Routing
from soak.record.schema import TaskRow
from soak.tasks.spec import TaskSpec


class AgentTasks:
    """The delegation loop (soak.agent) against the configured endpoints; a task the routing file escalates gets the
    stronger endpoint as its coder (the runner applies the rest of the routing, to external agents alike).

    `judge` replaces the sandbox (soak.sandbox.judge), e.g. to soak the serving side without paying for pytest.
    """

    def __init__(self, config: SoakConfig, routing: Routing, judge: Callable[..., Any] | None = None):
        from soak.agent.loop import run_task
        from soak.llm.client import ChatEndpoint

        self.config, self.run_task, self.judge = config, run_task, judge
        self.routing = routing
        names = {config.roles.coder, config.roles.orchestrator if config.mode == "delegate" else config.roles.coder}
        names |= {r.endpoint for r in self.routing.tasks.values() if r.action == "escalate" and r.endpoint}
        stale = config.budgets.stale_seconds
        self.endpoints = {name: ChatEndpoint(name, config.endpoints[name], stale) for name in sorted(names)}

    async def __call__(self, task: TaskSpec, context: AttemptContext) -> TaskRow:
        coder = applied(self.routing, task).coder or self.config.roles.coder
        orchestrator = self.endpoints[self.config.roles.orchestrator] if self.config.mode == "delegate" else None
        return await self.run_task(task, context, orchestrator=orchestrator, coder=self.endpoints[coder],
                                   budgets=self.config.budgets, judge=self.judge)

    async def close(self) -> None:
        for endpoint in self.endpoints.values():
            await endpoint.close()


async def local_attempts(config: SoakConfig, routing: Routing, judge: Callable[..., Any] | None,
                         cleanup: AsyncExitStack) -> TaskFn:
    """The task function that runs attempts on this machine, closed by `cleanup`: the external agent behind its
    recording proxy (mode "agent") or soak's delegation loop. A cluster node runs its attempts with it too."""
    if config.mode == "agent":
        from soak.agent.external import AgentNight

        external = AgentNight(config, judge)
        await external.start()
        cleanup.push_async_callback(external.close)
        return external
    agent = AgentTasks(config, routing, judge)
    cleanup.push_async_callback(agent.close)
    return agent
