"""Quality gates: fail the flow run when a gate failed, once every output is published.

The verdicts are computed with the metrics (scorekeeper/gates.py) and published in metrics.json and
the report; this step only turns a failed verdict into a failed flow run (and CLI exit 4), so
Prefect automations and notifications fire on it. A failed gate is an expected outcome, not a
crash: the step logs one line naming the failed gates and returns it, and the flow ends in a
Failed state carrying that line as its message (`gates_failed`), with no exception raised and so
no traceback in the flow run's logs.
"""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.states import Failed, State

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
def check_gates_task(context: RunContext, metrics: MetricsDocument) -> str | None:
    """The line naming each failed quality gate (logged once), or None when every gate passed (the
    report is already published)."""
    gates = metrics.gates
    for gate in gates or []:
        if gate.warning:
            get_run_logger().warning(gate.warning)
    try:
        enforce_gates(gates, context.run_uri)
    except GateFailed as failed:
        get_run_logger().error("%s", failed, extra={GATE_FAILURE: True})
        return str(failed)
    if gates:
        get_run_logger().info("%d quality gate(s) passed", len(gates))
    return None


GATE_FAILURE = "scorekeeper_gate_failure"  # a log record's attribute: the line the CLI's own error line repeats


def gates_failed(failures: list[str]) -> State:
    """The flow run's end when a gate or a precision bound failed: Failed, its message the failures'
    line; its result raises GateFailed (the CLI's exit 4) for a caller that asks for it."""
    message = "; ".join(failures)
    return Failed(message=message, data=GateFailed(message))
