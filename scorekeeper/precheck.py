"""Refusals before the start-up: the input's schema, ids and encodings, and the long-text settings
against the model's window, checked before the CLI starts Prefect's temporary server or any scoring
process (and before the flow starts its own processes, when no CLI checked first).

The window's refusals (precheck_model) read the model folder's config files alone, locally or
fetched from object storage, and make the flow's own check (model_folder.check_long_text).

The check is the read step's own validation (scorekeeper/staging/: every file opened, every row's
text, id and slice columns read and typed, the schemas compared across files, invalid UTF-8
refused naming the column, file and row) and its duplicate-id check, into a temporary folder that
is removed afterwards. The labels are not judged here: their staged form depends on the kind of
head, which only the model folder says (the read step judges them). It runs where it is cheap
next to a start-up: inputs up to PRECHECK_BYTES (64 MiB), read with the standard credentials (a storage
block's are known only inside the flow, which then checks there). Any other failure (storage not
reachable, a file it cannot list) is left to the flow's read step, which says it in its own words.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import posixpath
import shutil
import tempfile
from collections.abc import Iterator

from scorekeeper.errors import ScorekeeperError
from scorekeeper.params import ScoreRequest
from scorekeeper.run_folder import RunFolder

log = logging.getLogger(__name__)

# Larger inputs are checked by the read step alone: read twice, they would delay every valid run's start-up.
PRECHECK_BYTES = 64 * 1024 * 1024

_CHECKED: contextvars.ContextVar[bool] = contextvars.ContextVar("scorekeeper_prechecked", default=False)


def precheck(request: ScoreRequest) -> None:
    """Raise the read step's InputError for an input it would refuse (schema, ids, encodings), where
    that is cheap to know now; otherwise return and leave the input to the read step."""
    from scorekeeper.staging.listing import list_input
    from scorekeeper.staging.stage import new_workdir, stage_input

    if request.run_name:  # a rerun of a run with a labelling plan keeps its budget and sampling
        from scorekeeper.evaluation.labelling import check_label_plan

        run = RunFolder.under(request.output_uri, request.run_name)
        plan = check_label_plan(request, request.run_name, run)
        if plan is not None and request.ground_truth_uri is not None:
            _precheck_plan_labels(request, run, plan)

    try:
        listing = list_input(request.input_uri, exclude=RunFolder.under(request.output_uri, request.run_name or ".precheck"))
    except ScorekeeperError:
        raise
    except Exception as exc:  # unreachable storage, a listing the read step explains better
        log.debug("precheck: not listing %s here (%s)", request.input_uri, exc)
        return
    if not listing.files or sum(f.size for f in listing.files) > PRECHECK_BYTES:
        return
    unlabelled = request.model_copy(update={"label_column": None, "label_columns": [], "ground_truth_uri": None})
    workdir = new_workdir()
    try:
        staged = stage_input(unlabelled, listing.files, workdir, listing.partitions)
        if request.id_column:
            from scorekeeper.evaluation.duplicates import duplicate_ids_message

            message = duplicate_ids_message(staged.local_path, request.id_column, [f.uri for f in listing.files], staged.file_rows)
            if message:
                from scorekeeper.errors import InputError

                raise InputError(message)
    except ScorekeeperError:
        raise
    except Exception as exc:  # an input the read step explains better
        log.debug("precheck: leaving %s to the read step (%s)", request.input_uri, exc)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _precheck_plan_labels(request: ScoreRequest, run: RunFolder, plan: dict) -> None:
    """Labels handed back to a run with a pinned plan: ground truth that labels none of the plan's
    rows but other rows of the run (another run's plan's labels) is refused now, in the evaluate
    step's words (labelling.plan_labels_refusal). Ground truth this cannot read cheaply here (over
    PRECHECK_BYTES, storage not reachable, a file the read step refuses) is left to the flow."""
    from scorekeeper.errors import InputError
    from scorekeeper.evaluation.labelling import plan_labels_refusal
    from scorekeeper.staging.listing import list_input
    from scorekeeper.staging.stage import new_workdir, stage_ground_truth

    assert request.ground_truth_uri is not None and request.run_name is not None
    workdir = new_workdir()
    try:
        listing = list_input(request.ground_truth_uri, "ground truth", exclude=run)
        if not listing.files or sum(f.size for f in listing.files) > PRECHECK_BYTES:
            return
        path, _, _ = stage_ground_truth(request, listing.files, workdir, listing.partitions)
        message = plan_labels_refusal(run, plan, request.run_name, path)
    except Exception as exc:  # ground truth the read step explains in its own words
        log.debug("precheck: leaving the ground truth %s to the flow (%s)", request.ground_truth_uri, exc)
        return
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if message is not None:
        raise InputError(message)


# The model folder's files the window's refusals need: the head (config.json), the window's size
# (config.json's positions, tokenizer_config.json's model_max_length) and the special tokens a text
# gets (tokenizer.json). A few kilobytes to a few megabytes: fetched alone from object storage.
MODEL_FILES = ("config.json", "tokenizer_config.json", "tokenizer.json")


def precheck_model(request: ScoreRequest) -> None:
    """The refusals that need the model's window, before anything starts: `head_tokens` or
    `chunk_overlap` that leave the window no room, `chunk_aggregate max` with a single-label head
    (model_folder.check_long_text, the flow's own check). The folder's config files are read where
    they are (locally, or fetched alone from object storage with the standard credentials); a folder
    this cannot read (no config.json, a storage block's credentials) is left to the flow."""
    from scorekeeper.long_text import TRUNCATE

    if request.long_text == TRUNCATE:
        return  # truncate needs no room the window may lack
    from scorekeeper.heads import resolve_head
    from scorekeeper.model_folder import check_long_text, read_json

    with _model_files(request.model_uri) as folder:
        if folder is None:
            return
        head = resolve_head(request.head, read_json(os.path.join(folder, "config.json")), request.model_uri)
        check_long_text(folder, head, request)


@contextlib.contextmanager
def _model_files(uri: str) -> Iterator[str | None]:
    """A local folder holding the model folder's MODEL_FILES (the folder itself when it is local),
    or None when its config.json cannot be read here."""
    from scorekeeper.storage import fs_and_path, is_local

    try:
        fs, path = fs_and_path(uri)
        if is_local(fs):
            yield path if os.path.isfile(os.path.join(path, "config.json")) else None
            return
    except ScorekeeperError:
        raise
    except Exception as exc:
        log.debug("precheck: not reading the model folder %s here (%s)", uri, exc)
        yield None
        return
    folder = tempfile.mkdtemp(prefix="scorekeeper-model-files-")
    try:
        for name in MODEL_FILES:
            try:
                data = fs.cat_file(posixpath.join(path.rstrip("/"), name))
            except FileNotFoundError:
                continue
            except Exception as exc:  # unreachable storage, credentials only the flow has
                log.debug("precheck: not reading %s of %s here (%s)", name, uri, exc)
                break
            with open(os.path.join(folder, name), "wb") as f:
                f.write(data)
        yield folder if os.path.isfile(os.path.join(folder, "config.json")) else None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def no_data_tonight(request: ScoreRequest, dated: bool) -> str | None:
    """The `if_empty` rule before anything starts (scorekeeper/staging/presence.py), for a dated input
    or under skip: the 'no data tonight' line under skip, the input's NoInput under fail, None when
    it holds data or cannot be listed here (a storage block's credentials: the flow checks there)."""
    if not dated and request.if_empty == "fail":
        return None  # the read step's own refusal says it
    from scorekeeper.staging import presence
    from scorekeeper.storage import Location

    own = Location.from_uri(request.output_uri).child(request.run_name) if request.run_name else None
    try:
        return presence.no_data_tonight(request.input_uri, request.if_empty, dated, exclude=own)
    except ScorekeeperError:
        raise
    except Exception as exc:  # unreachable storage, credentials only the flow has
        log.debug("precheck: leaving the if_empty check of %s to the flow (%s)", request.input_uri, exc)
        return None


@contextlib.contextmanager
def prechecked() -> Iterator[None]:
    """Within this block the input counts as checked (the CLI did it before starting anything)."""
    token = _CHECKED.set(True)
    try:
        yield
    finally:
        _CHECKED.reset(token)


def was_prechecked() -> bool:
    return _CHECKED.get()
