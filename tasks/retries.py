"""Which task failures are worth a retry: transient I/O (network, storage, timeouts), never a
problem the user must fix and never a bug."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypedDict

from prefect.cache_policies import NO_CACHE, CachePolicy

from scorekeeper.errors import ScorekeeperError, storage_failure


@functools.cache
def transient_io_errors() -> tuple[type[BaseException], ...]:
    """The exception types a retry may cure.

    OSError covers ConnectionError and TimeoutError (asyncio's and fsspec's timeouts too), the
    errors s3fs translates S3 replies into, and pyarrow's I/O errors. The others are the transport
    errors of the clients underneath that are not OSErrors: those s3fs itself retries (botocore's
    HTTP client errors, truncated bodies, aiohttp's cut payloads), botocore's connection errors
    (once botocore's own retries are spent), aiohttp's lost connections, httpx's (the Prefect API)
    and DuckDB's I/O errors (the evaluation reads the run's files through DuckDB).
    """
    import aiohttp
    import botocore.exceptions
    import httpx
    from s3fs.core import S3_RETRYABLE_ERRORS

    from scorekeeper.evaluation.duck import transient_errors

    return (
        OSError,
        *S3_RETRYABLE_ERRORS,
        botocore.exceptions.ConnectionError,
        botocore.exceptions.HTTPClientError,
        aiohttp.ClientConnectionError,
        httpx.TransportError,
        *transient_errors(),
    )


def is_transient_io_error(exc: BaseException) -> bool:
    """Whether `exc`, or an exception it was explicitly raised from, is transient I/O."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ScorekeeperError) or storage_failure(current) is not None:  # a full disk stays full
            return False
        if isinstance(current, transient_io_errors()):
            return True
        seen.add(id(current))
        current = current.__cause__
    return False


def retry_io_only(task, task_run, state) -> bool:
    """Prefect's retry condition: retry transient I/O failures; a problem the user must fix, and
    a programming error (TypeError, KeyError, ...), fail at once."""
    try:
        state.result()
    except Exception as exc:
        return is_transient_io_error(exc)
    return False


class TaskRetries(TypedDict):
    """Keyword arguments of `@task` (typed, so that `@task(**IO_RETRIES)` is checked against it)."""

    retries: int
    retry_delay_seconds: float
    retry_condition_fn: Callable[[Any, Any, Any], bool]
    cache_policy: CachePolicy


IO_RETRIES = TaskRetries(retries=2, retry_delay_seconds=2, retry_condition_fn=retry_io_only, cache_policy=NO_CACHE)
"""Settings of a task whose work is idempotent I/O (reading, staging, writing whole files)."""
