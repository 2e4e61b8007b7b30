"""Entry point: `accelerate launch ... -m scorekeeper.worker JOB_URI`.

Parse, build, run, clean up (STYLE.md 2). A problem the user can fix becomes one `error` event
and exit code 2; anything else keeps its traceback for the flow to show.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from scorekeeper.errors import ScorekeeperError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scorekeeper.worker")
    parser.add_argument("job_uri", help="the run's work/job.json, written by the flow")
    parser.add_argument("--timeout", type=float, default=120.0, help="collective timeout, seconds")
    args = parser.parse_args(argv)

    import torch

    from scorekeeper.storage import Location, fs_and_path
    from scorekeeper.worker.job import Job
    from scorekeeper.worker.model import load_model, resolve_dtype
    from scorekeeper.worker.runtime import emit, init_distributed, start_heartbeat

    ranks = init_distributed(args.timeout)
    start_heartbeat(ranks.rank)
    logging.basicConfig(
        level=logging.INFO if ranks.is_main else logging.WARNING,
        format=f"[rank {ranks.rank}] %(levelname)s %(name)s: %(message)s",
    )
    try:
        fs, path = fs_and_path(args.job_uri)
        job = Job.from_json(fs.cat_file(path).decode())
        run = Location.from_uri(job.run_uri)
        emit("started", rank=ranks.rank, world=ranks.world, device=str(ranks.device), ranges=len(job.ranges))
        began = time.time()
        loaded = load_model(
            job.model_path,
            job.adapter_path,
            merge_adapter=job.request.merge_adapter,
            dtype=resolve_dtype(job.request.dtype, ranks.device),
            device=ranks.device,
            trust_remote_code=job.request.trust_remote_code,
            max_length=job.request.max_length,
        )
        emit("model_loaded", rank=ranks.rank, seconds=time.time() - began)
        if job.request.mode == "pipeline":
            from scorekeeper.worker.pipeline import run_pipeline

            run_pipeline(job, ranks, run, loaded)
        else:
            from scorekeeper.worker.replica import run_replica

            run_replica(job, ranks, run, loaded)
        emit("finished", rank=ranks.rank)
    except ScorekeeperError as exc:
        emit("error", rank=ranks.rank, message=str(exc))
        return exc.exit_code
    finally:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
