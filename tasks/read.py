"""The flow's read step: list, fingerprint, validate and stage the input (and the ground truth).

The staging itself is the library's (scorekeeper/staging/, no Prefect); this step adds what needs
the run: reusing an earlier staging of the same files, refusing changed input under committed
ranges, the duplicate-id check (DuckDB, out of core) and publishing into the run folder.
"""

from __future__ import annotations

import logging
import posixpath
import shutil

from prefect import task

from scorekeeper.errors import InputError, RunConflict
from scorekeeper.evaluation.duplicates import duplicate_ids_message
from scorekeeper.model_folder import SAMPLE_ROWS, check_tokenizer_on_rows
from scorekeeper.params import ScoreRequest
from scorekeeper.redact import raises_redacted
from scorekeeper.run_folder import RunFolder, SkippedFiles, StagedGroundTruth, StagedManifest
from scorekeeper.staging.listing import SHOWN, list_input, list_input_files
from scorekeeper.staging.stage import changed_files, new_workdir, stage_ground_truth, stage_input, staging_key
from scorekeeper.tasks.memory import release_memory
from scorekeeper.tasks.open_run import RunContext
from scorekeeper.tasks.retries import IO_RETRIES
from scorekeeper.tasks.runlog import run_logger

__all__ = ["list_input_files", "read_inputs", "read_inputs_task", "staging_key"]

log = logging.getLogger(__name__)


def staged_sample(path: str, has_text_pair: bool, limit: int = SAMPLE_ROWS) -> list[tuple[int, str, str | None]]:
    """Up to `limit` staged rows (row_index, text, text_pair), spread over the input: the first rows of
    up to eight row groups evenly spaced from the first to the last."""
    import numpy as np
    import pyarrow.parquet as pq

    staged = pq.ParquetFile(path)
    groups = staged.num_row_groups
    if not groups:
        return []
    chosen = sorted({int(g) for g in np.linspace(0, groups - 1, min(groups, 8))})
    columns = ["row_index", "text"] + (["text_pair"] if has_text_pair else [])
    rows: list[tuple[int, str, str | None]] = []
    for g in chosen:
        table = staged.read_row_group(g, columns=columns).slice(0, limit // len(chosen))
        pairs = table.column("text_pair").to_pylist() if has_text_pair else [None] * table.num_rows
        texts = [t or "" for t in table.column("text").to_pylist()]
        rows += zip(table.column("row_index").to_pylist(), texts, pairs, strict=True)
    return rows


def read_inputs(request: ScoreRequest, run: RunFolder, tokenizer_folder: str | None = None) -> StagedManifest:
    """List, fingerprint, validate and stage the input (and ground truth); reuse an earlier staging
    of the same files with the same staging parameters. Returns the staged manifest. `request.head`
    is the kind of head resolved from the model: it decides the form the ground truth is staged in.

    The ground truth is fingerprinted like the input: when it changed since an earlier attempt it
    is staged again and the run is evaluated against it (the predictions do not depend on it).

    With `tokenizer_folder` (the model folder), a sample of the staged rows is encoded with its
    tokenizer before anything is published: rows that become unknown or special tokens only are
    refused (model_folder.check_tokenizer_on_rows)."""
    from scorekeeper.tasks.open_run import has_commits

    logger = run_logger(__name__)
    listing = list_input(request.input_uri, exclude=run, log=logger)
    truth = list_input(request.ground_truth_uri, "ground truth", exclude=run, log=logger) if request.ground_truth_uri else None
    files, truth_files = listing.files, truth.files if truth else []
    key = staging_key(request, files, truth_files)
    earlier = run.read_manifest()
    if earlier is not None:
        if earlier.staging_key == key and run.exists(RunFolder.STAGED_INPUT):
            log.info("input already staged for this run (%d rows); reusing it", earlier.total_rows)
            # The same files are read; what is skipped beside them is as this listing found it.
            update: dict[str, object] = {"skipped": SkippedFiles.of(listing.hidden)}
            if earlier.ground_truth and truth:
                update["ground_truth"] = earlier.ground_truth.model_copy(update={"skipped": SkippedFiles.of(truth.hidden)})
            return earlier.model_copy(update=update)
        changed = changed_files(earlier.files, files)
        if changed and has_commits(run):
            raise RunConflict(
                f"the input changed since run '{posixpath.basename(run.path)}' started "
                f"({', '.join(changed[:SHOWN])}); choose another run_name to score it"
            )
        truth_changed = changed_files(earlier.ground_truth.files if earlier.ground_truth else [], truth_files)
        if truth_changed and not changed and earlier.ground_truth and truth_files:
            logger.warning(
                "the ground truth changed since the last attempt of run '%s' (%s): evaluating against it as it is now; "
                "the committed predictions are reused (they do not depend on it)",
                posixpath.basename(run.path),
                ", ".join(truth_changed[:SHOWN]),
            )
        # Same files, other evaluation settings (labels, ground truth, slices): stage them again;
        # the rows and their order are the same, so committed shards stay valid. (Changed files
        # with nothing committed yet: the earlier attempt left nothing to protect.)
    workdir = new_workdir()
    try:
        staged = stage_input(request, files, workdir, listing.partitions)
        if request.id_column:
            message = duplicate_ids_message(staged.local_path, request.id_column, [f.uri for f in files], staged.file_rows)
            if message:
                raise InputError(message)
        ground_truth = _stage_truth(request, run, truth, workdir) if truth is not None else None
        manifest = staged.manifest(key, ground_truth).model_copy(update={"skipped": SkippedFiles.of(listing.hidden)})
        if tokenizer_folder is not None:
            check_tokenizer_on_rows(tokenizer_folder, staged_sample(staged.local_path, manifest.has_text_pair))
        run.publish_local_file(staged.local_path, RunFolder.STAGED_INPUT)
        run.publish_manifest(manifest)
        return manifest
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _stage_truth(request: ScoreRequest, run: RunFolder, truth, workdir) -> StagedGroundTruth:
    """Stage the listed ground truth (`truth`, listed where request.ground_truth_uri is set) and
    publish it; refuses duplicate ids."""
    gt_path, gt_id_type, file_rows = stage_ground_truth(request, truth.files, workdir, truth.partitions)
    assert request.id_column is not None, "ScoreRequest requires it with a ground_truth_uri"
    message = duplicate_ids_message(
        gt_path, request.id_column, [f.uri for f in truth.files], file_rows, what="ground truth id column", indexed=False
    )
    if message:
        raise InputError(message)
    ground_truth = StagedGroundTruth(files=[f.redacted() for f in truth.files], id_type=gt_id_type, skipped=SkippedFiles.of(truth.hidden))
    run.publish_local_file(gt_path, RunFolder.STAGED_GROUND_TRUTH)
    return ground_truth


@task(name="read inputs", **IO_RETRIES)
@raises_redacted
def read_inputs_task(request: ScoreRequest, context: RunContext) -> StagedManifest:
    """Validate, count, fingerprint and stage the input rows (and the ground truth); decide how the
    ground truth is matched to the model's labels before anything is scored."""
    from scorekeeper.evaluation.driver import check_truth

    manifest = read_inputs(request.model_copy(update={"head": context.head}), context.run, tokenizer_folder=context.model_path)
    check_truth(context.run, context.labels, manifest, request.label_column or "label", context.head)
    release_memory(manifest.total_rows)  # staging and the duplicate-id check's pages, before scoring and the evaluation
    return manifest


@task(name="check for data", **IO_RETRIES)
@raises_redacted
def check_input_present_task(request: ScoreRequest, run_id: str, dated: bool) -> str | None:
    """Whether tonight's input holds data (if_empty): None when it does, the 'no data tonight' line
    to end the run with under skip; under fail, the input refused naming its filled URI."""
    from scorekeeper.staging.presence import no_data_tonight
    from scorekeeper.storage import Location

    own = Location.from_uri(request.output_uri).child(run_id)
    return no_data_tonight(request.input_uri, request.if_empty, dated, exclude=own)
