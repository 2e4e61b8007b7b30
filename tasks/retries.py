"""Which task failures are worth a retry: I/O, never a problem the user must fix."""

from __future__ import annotations

from prefect.cache_policies import NO_CACHE

from scorekeeper.errors import ScorekeeperError


def retry_io_only(task, task_run, state) -> bool:
    """Retry I/O failures; a problem the user must fix fails at once."""
    try:
        state.result()
    except ScorekeeperError:
        return False
    except Exception:
        return True
    return False


IO_RETRIES = dict(retries=2, retry_delay_seconds=2, retry_condition_fn=retry_io_only, cache_policy=NO_CACHE)
"""Settings of a task whose work is idempotent I/O (reading, staging, writing whole files)."""
