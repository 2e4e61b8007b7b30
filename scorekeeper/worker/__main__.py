"""Entry point: `accelerate launch ... -m scorekeeper.worker JOB_URI`.

Parse, build, run, clean up (docs/style.md, 2). A problem the user can fix becomes one `error` event
and exit code 2; anything else keeps its traceback for the flow to show.

A worker can also be started ahead of its job (`--job-from FILE --owner-pid PID`): it does its
imports and joins its process group while the flow is still reading and planning, then waits for
the flow to write the job's URI into FILE. The imports are most of a worker's start-up (about 3.5
of 4 s on 2 cores), so scoring starts as soon as the plan exists.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

from scorekeeper.errors import ScorekeeperError, storage_error

JOB_POLL_S = 0.02
OWNER_POLL_S = 0.2


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m scorekeeper.worker")
    parser.add_argument("job_uri", nargs="?", help="the run's work/job.json, written by the flow")
    parser.add_argument("--job-from", metavar="FILE", help="wait for this local file, then read the job's URI from it")
    parser.add_argument("--owner-pid", type=int, help="with --job-from: give up waiting when this process is gone")
    parser.add_argument("--timeout", type=float, default=120.0, help="collective timeout, seconds")
    args = parser.parse_args(argv)
    if (args.job_uri is None) == (args.job_from is None):
        parser.error("give either JOB_URI or --job-from FILE")
    return args


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    if args.job_from is not None and args.owner_pid is not None:
        watch_owner(args.job_from, args.owner_pid)
    from scorekeeper.worker.device import tune_allocator

    tune_allocator()
    import torch

    from scorekeeper.boundary import Failed, Finished, Job, Started, run_uri_of
    from scorekeeper.run_folder import RunFolder
    from scorekeeper.storage import fs_and_path
    from scorekeeper.worker.device import engine_facts
    from scorekeeper.worker.model import import_model_code
    from scorekeeper.worker.runtime import emit, init_distributed, start_heartbeat

    ranks = init_distributed(args.timeout)
    start_heartbeat(ranks.rank)
    logging.basicConfig(
        level=logging.INFO if ranks.is_main else logging.WARNING,
        format=f"[rank {ranks.rank}] %(levelname)s %(name)s: %(message)s",
    )
    try:
        job_uri = args.job_uri
        if job_uri is None:
            import_model_code()
            job_uri = wait_for_job(args.job_from, args.owner_pid)
            if job_uri is None:
                return 1  # the flow that started us is gone: nothing to do
        fs, path = fs_and_path(job_uri)
        job = Job.from_json(fs.cat_file(path))
        run = RunFolder.from_uri(run_uri_of(job_uri) or job.run_uri)
        settings = job.scoring
        emit(
            Started(
                rank=ranks.rank,
                world=ranks.world,
                device=str(ranks.device),
                ranges=len(job.ranges),
                engine=engine_facts(ranks.device, settings.tokens_per_batch, settings.mode),
            )
        )
        load, loaded, dtype = load_job_model(job, ranks)
        if settings.mode == "pipeline":
            from scorekeeper.worker.pipeline import run_pipeline

            run_pipeline(job, ranks, run, loaded)
        else:
            from scorekeeper.worker.replica import run_replica

            if settings.embedding_rows:  # the sampled rows' representation (SPEC 14), read off each batch
                from scorekeeper.worker.embeddings import Representation

                loaded.representation = Representation(loaded.model, settings.embedding_rows, job.total_rows, loaded.model_pad_token_id)
            # a reduced dtype checks a sample against the float32 model (worker/precision.py)
            checked = dtype != torch.float32 and job.precision_check_rows > 0
            run_replica(job, ranks, run, loaded, reference=(lambda: load(torch.float32)) if checked else None)
        emit(Finished(rank=ranks.rank))
    except ScorekeeperError as exc:
        emit(Failed(rank=ranks.rank, message=str(exc)))
        return exc.exit_code
    except Exception as exc:  # a bug: its traceback goes to stderr, and its one line to the flow
        failure = storage_error(exc)  # a full disk, a missing bucket: the run's files, named, in one line
        if failure is not None:
            emit(Failed(rank=ranks.rank, message=str(failure)))
            return failure.exit_code
        emit(Failed(rank=ranks.rank, message=crash_line(exc), crash=True))
        raise
    finally:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
    return 0


def load_job_model(job, ranks):
    """The job's model on this rank's device in the job's dtype ("auto" resolved here), said in a
    ModelLoaded event (the report's run facts show the dtype); with the function that loads it in
    another dtype (the precision check's float32 reference) and the dtype."""
    import torch

    from scorekeeper.boundary import ModelLoaded
    from scorekeeper.worker.model import LoadedModel, load_model, resolve_dtype
    from scorekeeper.worker.runtime import emit

    settings = job.scoring
    began = time.time()
    dtype = resolve_dtype(settings.dtype, ranks.device)

    def load(dtype: torch.dtype) -> LoadedModel:
        loaded = load_model(
            job.model_path,
            job.adapter_path,
            merge_adapter=settings.merge_adapter,
            dtype=dtype,
            device=ranks.device,
            trust_remote_code=settings.trust_remote_code,
            max_length=settings.max_length,
            head=settings.head,
        )
        loaded.use_long_text(settings)  # windows.py: how a long text is cut
        return loaded

    loaded = load(dtype)
    emit(ModelLoaded(rank=ranks.rank, seconds=time.time() - began, dtype=str(dtype).removeprefix("torch.")))
    return load, loaded, dtype


def crash_line(exc: BaseException) -> str:
    """An unexpected error in one line, with where it was raised: under torchrun the flow sees
    this rank's own error, not only the launcher's summary of which rank exited."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno} in {frames[-1].name})" if frames else ""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:500]}{where}" if text else f"{type(exc).__name__}{where}"


def wait_for_job(path: str, owner_pid: int | None) -> str | None:
    """The job URI the flow writes into `path` (atomically, by rename); None if the flow is gone."""
    while True:
        try:
            with open(path) as f:
                return f.read().strip()
        except FileNotFoundError:
            pass
        if owner_pid is not None and not _alive(owner_pid):
            return None
        time.sleep(JOB_POLL_S)


def watch_owner(path: str, owner_pid: int) -> None:
    """End this process as soon as its owner is gone before handing it a job, even in the middle of
    its imports or of joining its process group: those take 10 to 30 s on a busy machine, and a
    worker that only looked in `wait_for_job` outlived a killed flow by that long. Once the job's
    file exists the worker is the job's, and runs it to the end whatever happens to the flow."""
    import threading

    def watch() -> None:
        while not os.path.exists(path):
            if not _alive(owner_pid):
                os._exit(1)  # nothing started yet: nothing to write, commit or clean up
            time.sleep(OWNER_POLL_S)

    threading.Thread(target=watch, name="owner-watch", daemon=True).start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


if __name__ == "__main__":
    code = main()
    # Everything is written and committed by now (the commit threads are joined); skip the
    # interpreter's teardown of torch and transformers, which takes about a second.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
