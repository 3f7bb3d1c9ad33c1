"""`soak try`: one task end to end against the configured (or given) endpoints, every call printed."""

import asyncio
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from soak.agent.attempt import AttemptContext
from soak.agent.loop import run_task
from soak.config import Mode, load_config, with_cli_endpoint
from soak.llm.client import chat_endpoints
from soak.night.plan import embed_default_stack
from soak.paths import data_dir
from soak.record.identity import AttemptId
from soak.record.schema import CallRow, TaskRow
from soak.stack.servers import StackSupervisor
from soak.tasks.suites import find_task


def try_command(
    task_ref: str, suite: str, config_path: Path | None, base_url: str | None, model: str | None, mode: Mode | None
) -> bool:
    """One task against the configured (or given) endpoints; each call and the result as tables.

    The config's stack servers are started first and stopped after; with no endpoint at all, the embedded default.
    """
    config = with_cli_endpoint(load_config(config_path), base_url, model)
    if not config.endpoints:
        config, _ = embed_default_stack(config)
    mode = mode or config.mode
    task = find_task(task_ref, suite)
    endpoints = chat_endpoints(config, ("orchestrator", "coder") if mode == "delegate" else ("coder",))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    workdir = data_dir() / "try" / f"{task.id}-{stamp}"
    console = Console()
    console.print(f"[bold]{task.id}[/] ({mode}) -> {workdir}")
    rows: list[CallRow] = []

    def show(row: CallRow) -> None:
        rows.append(row)
        console.print(f"  call {row.call_index:>3} {row.role:<12} {row.status:<9} {row.duration_s:7.2f} s  "
                      f"{row.finish_reason or '-':<10} {row.integrity:<12} {row.tool_names}", markup=False)

    async def go() -> TaskRow:
        stack = StackSupervisor(config.stack, workdir / "logs", lambda kind, source, detail: console.print(
            f"  {kind} {source} {detail}", markup=False))
        try:
            await stack.start()
            context = AttemptContext(f"try-{stamp}", AttemptId(task.id, 0), workdir, on_call=show)
            return await run_task(task, context, orchestrator=endpoints.get("orchestrator"), coder=endpoints["coder"],
                                  budgets=config.budgets)
        finally:
            for endpoint in set(endpoints.values()):
                await endpoint.close()
            stack.stop()

    row = asyncio.run(go())
    console.print(_calls_table(rows))
    console.print(_task_table(row))
    return row.outcome == "pass"


def _shown(value: Any, digits: int = 2) -> str:
    if value is None:
        return "?"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _calls_table(rows: list[CallRow]) -> Any:
    table = Table(title="calls (? = not reported by the server)")
    for column in ("#", "role", "status", "ttft s", "dur s", "tok/s", "in/out", "cached", "reason", "finish", "tools"):
        table.add_column(column)
    table.add_column("error", overflow="fold")
    for row in rows:
        status = row.status if row.http_status in (None, 200) else f"{row.status} {row.http_status}"
        tools = escape(f"{row.tool_names} [{row.integrity}]") if row.tool_calls or row.integrity != "none" else ""
        table.add_row(
            f"{row.call_index}" + (f".{row.retry}" if row.retry > 1 else ""),
            row.role.replace("orchestrator", "orch"), status,
            _shown(row.ttft_s), _shown(row.duration_s), _shown(row.decode_tps, 0),
            f"{_shown(row.prompt_tokens)}/{_shown(row.completion_tokens)}", _shown(row.cached_tokens),
            _shown(row.reasoning_tokens) + (" (ate budget)" if row.reasoning_exhausted else ""), row.finish_reason,
            tools, escape(row.error[:120]),
        )
    return table


def _task_table(row: TaskRow) -> Any:
    table = Table(title=f"task {row.task_id}: {row.outcome}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    for name in row.columns():
        if name not in ("schema_version", "error_tail"):
            table.add_row(name, _shown(getattr(row, name), 3))
    if row.error_tail:
        table.add_row("error_tail", escape(row.error_tail))
    return table
