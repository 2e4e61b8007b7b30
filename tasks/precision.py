"""The precision bounds: fail the run when its reduced dtype moved the checked rows too far.

The check itself runs in the scoring processes (scorekeeper/worker/precision.py) and its figures
are published with the scoring step's in metrics.json (`scoring.precision_check`) and the report;
this step only turns a bound the figures exceed into a failed run (CLI exit 4, as a quality gate:
one log line, a Failed flow run with that line as its message, no traceback), after everything is
published.
"""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from scorekeeper.errors import PRECISION_FAILED
from scorekeeper.params import ScoreRequest
from scorekeeper.redact import raises_redacted
from scorekeeper.scoring_summary import PrecisionCheck, ScoringSummary
from scorekeeper.tasks.gates import GATE_FAILURE
from scorekeeper.tasks.open_run import RunContext


def precision_failures(request: ScoreRequest, check: PrecisionCheck) -> list[str]:
    """Each bound of the request the check exceeds, in words."""
    failures = []
    if request.precision_bounded and check.skipped:  # what could not be checked does not pass
        failures.append(f"part of the check was skipped ({check.skipped})")
    largest, changed = check.max_difference, check.changed
    what = "probability" if check.max_probability_difference is not None else "prediction"
    if request.precision_max_difference is not None and largest is not None and largest > request.precision_max_difference:
        failures.append(f"largest |{what} difference| {largest:.3g} > precision_max_difference {request.precision_max_difference:g}")
    if request.precision_max_changed is not None and changed is not None and changed > request.precision_max_changed:
        decisions = "label decisions" if check.changed_label_decisions is not None else "predictions"
        failures.append(f"{changed} changed {decisions} > precision_max_changed {request.precision_max_changed}")
    return failures


@task(name="check precision bounds", cache_policy=NO_CACHE)
@raises_redacted
def check_precision_task(request: ScoreRequest, context: RunContext, scoring: ScoringSummary) -> str | None:
    """The line saying which precision bound the check exceeds (logged once, as a failed quality
    gate: tasks/gates.py), or None (the report is already published)."""
    check = scoring.precision_check
    if check is None:
        return None
    failures = precision_failures(request, check)
    if failures:
        message = (
            f"{PRECISION_FAILED} ({check.rows} rows, {check.dtype}): {'; '.join(failures)}; the outputs are published in {context.run_uri}"
        )
        get_run_logger().error("%s", message, extra={GATE_FAILURE: True})
        return message
    if request.precision_bounded:
        get_run_logger().info("precision check within its bounds (%d rows scored again in float32)", check.rows)
    return None
