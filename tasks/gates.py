"""Quality gates: fail the flow run when a gate failed, once every output is published.

The verdicts are computed with the metrics (scorekeeper/gates.py) and published in metrics.json and
the report; this step only turns a failed verdict into a failed flow run (and CLI exit 4), so
Prefect automations and notifications fire on it.
"""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from scorekeeper.errors import GateFailed
from scorekeeper.gates import failure_message
from scorekeeper.metrics.document import GateResult, MetricsDocument
from scorekeeper.redact import raises_redacted
from scorekeeper.tasks.open_run import RunContext


def enforce_gates(gates: list[GateResult] | None, run_uri: str) -> None:
    """Raise GateFailed naming each failed gate and its numbers; nothing when all passed (or none)."""
    message = failure_message(gates or [])
    if message:
        raise GateFailed(f"{message}; the outputs are published in {run_uri}")


@task(name="check quality gates", cache_policy=NO_CACHE)
@raises_redacted
def check_gates_task(context: RunContext, metrics: MetricsDocument) -> None:
    """Fail the run when a quality gate failed (the report is already published)."""
    gates = metrics.gates
    for gate in gates or []:
        if gate.warning:
            get_run_logger().warning(gate.warning)
    enforce_gates(gates, context.run_uri)
    if gates:
        get_run_logger().info("%d quality gate(s) passed", len(gates))
