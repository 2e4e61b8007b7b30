"""The one description of a run: the flow's parameter schema, the CLI's options, the worker's input.

Defaults live here and nowhere else. docs/contracts.md, section 1, is the contract for the first block of
fields; the tuning fields below it are ours to name and each has a working default.

Every field says what its value changes (`json_schema_extra=affects(...)`); the parameters a resume
may change, the scoring fingerprint and the staging cache's key are derived from that, so a new
field is classified once, here, and cannot be forgotten in one of them.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from scorekeeper import uri_template
from scorekeeper.head_kind import AUTO, HeadChoice, HeadKind
from scorekeeper.redact import redact_uri

Mode = Literal["replica", "pipeline"]
Dtype = Literal["auto", "float32", "bfloat16", "float16"]
Head = HeadChoice  # scorekeeper/head_kind.py
LongText = Literal["truncate", "head_tail", "chunk"]
ChunkAggregate = Literal["mean", "max"]

RUN_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
# Moments a run_name template is checked with: every field one digit and then two digits wide, the
# second the last day of a leap year (so %j, %U and friends take their widest values too).
_SAMPLE_MOMENTS = (datetime(2001, 2, 3, 4, 5, 6, tzinfo=UTC), datetime(2028, 12, 31, 23, 59, 59, tzinfo=UTC))
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")


class Affects(StrEnum):
    """What a parameter's value changes. A field may change several things."""

    PREDICTIONS = "predictions"  # what a committed shard holds: in the scoring fingerprint; a resume must keep it
    STAGING = "staging"  # what the read step stages under work/: in the staging key; a change stages again
    EVALUATION = "evaluation"  # the evaluation and the report only: a resume may change it
    NOTHING = "nothing"  # how the run is carried out (processes, timeouts, credentials), not what it writes


PREDICTIONS, STAGING, EVALUATION, NOTHING = Affects.PREDICTIONS, Affects.STAGING, Affects.EVALUATION, Affects.NOTHING


def affects(*kinds: Affects) -> dict:
    """A field's `json_schema_extra`: what the parameter changes (read back by `parameter_effects`)."""
    return {"affects": sorted(Affects(k).value for k in kinds)}


class ScoreRequest(BaseModel):
    """Everything that describes one scoring run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # -- contract (docs/contracts.md, section 1) ----------------------------------------------
    # `affects` on each field: see Affects. A new field must say what it changes.
    input_uri: str = Field(
        description="Input rows: a file, a folder/prefix or a glob (s3://bucket/eval/*.parquet, "
        "./data/test.csv, file:///...). Parquet, CSV and JSON Lines, chosen by extension (.parquet/.pq, .csv, "
        ".jsonl/.ndjson/.json; CSV and JSON Lines optionally .gz/.bz2/.xz/.zst). Names starting with '.' or '_' "
        "are skipped and key=value folders give a column (docs/inputs.md). Credentials in a URI are used to "
        "read and shown as ***.",
        json_schema_extra=affects(PREDICTIONS, STAGING),
    )
    text_column: str = Field(
        "text",
        description="Column holding the text to classify.",
        json_schema_extra=affects(PREDICTIONS, STAGING),
    )
    text_pair_column: str | None = Field(
        None,
        description="Optional column with a second text, for sentence-pair models.",
        json_schema_extra=affects(PREDICTIONS, STAGING),
    )
    id_column: str | None = Field(
        None,
        description="Column holding each row's identity (integers or strings, unique); when absent the row index is "
        "the id. CSV ids are text as written ('007' stays '007'); JSON Lines and Parquet ids keep their type.",
        json_schema_extra=affects(PREDICTIONS, STAGING),  # the predictions' `id` column; the join with ground_truth_uri
    )
    label_column: str | None = Field(
        "label",
        description="Ground-truth label column (names or integer ids), in the input rows or in "
        "the ground_truth_uri files. None scores only. When left at 'label' and the input has no "
        "such column, the run is a scoring-only run and the report says so. Values are matched to the model's "
        "labels by one rule for the whole column (metrics.json truth_matching, docs/evaluation.md).",
        json_schema_extra=affects(STAGING, EVALUATION),
    )
    ground_truth_uri: str | None = Field(
        None,
        description="Ground truth in separate files (same formats, id_column + label_column), joined on id_column.",
        json_schema_extra=affects(STAGING, EVALUATION),
    )
    model_uri: str = Field(
        description="Model folder (config.json, safetensors weights, tokenizer files), local or in object storage.",
        json_schema_extra=affects(PREDICTIONS),
    )
    adapter_uri: str | None = Field(
        None,
        description="PEFT adapter folder (LoRA), local or in object storage.",
        json_schema_extra=affects(PREDICTIONS),
    )
    merge_adapter: bool = Field(
        True,
        description="Merge the adapter into the base weights before scoring.",
        json_schema_extra=affects(PREDICTIONS),
    )
    mode: Mode = Field(
        "replica",
        description="replica: every process holds the whole model (data parallel). pipeline: the "
        "model's layers are split across processes.",
        json_schema_extra=affects(PREDICTIONS),  # equal within float tolerance, not bit for bit
    )
    num_processes: int | Literal["auto"] = Field(
        "auto",
        description="Processes to launch; auto = visible GPUs, or 1 without a GPU. More than the visible GPUs is "
        "refused; without a GPU, more than the CPU cores is refused unless oversubscribe.",
        json_schema_extra=affects(NOTHING),  # batches are a function of the range alone
    )
    output_uri: str = Field(
        description="Where runs are written: a local folder or an object-storage prefix.",
        # It changes no prediction, but it has always been part of the scoring fingerprint: taking
        # it out would leave every earlier run's commit records stale and unresumable.
        json_schema_extra=affects(PREDICTIONS),
    )
    run_name: str | None = Field(
        None,
        description="The run's id under output_uri; a run with the same name resumes. Default: "
        "the Prefect flow run's id, so a retry of that flow run resumes it. May be a dated template "
        "(monitor-{date}) like the URIs: each night is then a run of its own, and a retry or a rerun of that night resumes it.",
        json_schema_extra=affects(NOTHING),
    )

    # -- dated runs (docs/inputs.md, "Dated runs") ----------------------------------------------------
    as_of: str | None = Field(
        None,
        description="The moment the templates in input_uri, ground_truth_uri, output_uri and run_name are filled "
        "with ({date}, {date-1d}, {scheduled:%Y/%m/%d}: docs/inputs.md): a date (YYYY-MM-DD, its midnight UTC) or an "
        "ISO 8601 time, for a backfill. Default: the flow run's scheduled time, or now (UTC). request.json records "
        "the moment used, the filled URIs and the templates.",
        json_schema_extra=affects(NOTHING),  # what it changes, the filled URIs, is compared itself
    )
    if_empty: Literal["fail", "skip"] = Field(
        "fail",
        description="An input that holds no data (a missing folder or prefix, one with no data files, files with no "
        "rows): 'fail' refuses it naming the filled URI (exit 2); 'skip' ends the run as 'no data tonight' (CLI exit 0, "
        "the flow run Completed with that message) and writes nothing.",
        json_schema_extra=affects(NOTHING),
    )

    # -- tuning ------------------------------------------------------------------------------
    dtype: Dtype = Field(
        "auto",
        description="Compute dtype; auto = bfloat16 on GPUs that support it, else float32. bfloat16 or float16 on a "
        "CPU only where it computes them natively (avx512_bf16/amx_bf16, avx512_fp16/amx_fp16), else refused "
        "(exit 2: emulated, it is slower than float32 as well as less exact). The dtype used is scoring.dtype "
        "in metrics.json (docs/precision.md).",
        json_schema_extra=affects(PREDICTIONS),
    )
    precision_check_rows: int = Field(
        256,
        ge=0,
        description="With a dtype other than float32: rows (a seeded sample over the length range) scored again in "
        "float32; the largest difference and the changed predictions go into metrics.json and the report. 0: no check.",
        json_schema_extra=affects(EVALUATION),  # what the run reports, never a committed prediction
    )
    precision_max_difference: float | None = Field(
        None,
        ge=0,
        description="Fail the run (exit 4, outputs published) when the precision check's largest |probability "
        "difference| (regression: |prediction difference|) exceeds this.",
        json_schema_extra=affects(EVALUATION),
    )
    precision_max_changed: int | None = Field(
        None,
        ge=0,
        description="Fail the run (exit 4, outputs published) when more of the precision check's predictions "
        "(multi_label: label decisions) changed against float32 than this.",
        json_schema_extra=affects(EVALUATION),
    )
    max_length: int | None = Field(
        None,
        ge=2,
        description="Tokens per text (pair) before truncation; default: the model's maximum. Truncated rows are counted.",
        json_schema_extra=affects(PREDICTIONS),
    )
    rows_per_range: int = Field(
        4096,
        ge=1,
        description="Rows per planned index range: the unit of work, commit and resume.",
        json_schema_extra=affects(PREDICTIONS, STAGING),  # the ranges, and the staged row groups
    )
    tokens_per_batch: int | None = Field(
        None,
        ge=1,
        description="Padded tokens (rows x longest row) per model batch; default 2048 on CPU, 131072 on a GPU.",
        json_schema_extra=affects(PREDICTIONS),  # batch composition: float-level differences
    )
    max_batch_rows: int = Field(
        1024,
        ge=1,
        description="Upper bound on rows in one model batch.",
        json_schema_extra=affects(PREDICTIONS),
    )
    null_text: Literal["error", "empty"] = Field(
        "error",
        description="Null text: 'error' refuses the input naming the rows, 'empty' scores it as '' (counted).",
        json_schema_extra=affects(PREDICTIONS, STAGING),
    )
    pipeline_stages: int | None = Field(
        None,
        ge=1,
        description="Pipeline mode: stages per pipeline; default all processes (one pipeline). num_processes / "
        "pipeline_stages pipelines run side by side.",
        json_schema_extra=affects(PREDICTIONS),
    )
    microbatches: int = Field(
        4,
        ge=1,
        description="Pipeline mode: micro-batches each model batch is cut into.",
        json_schema_extra=affects(PREDICTIONS),
    )
    slice_columns: list[str] = Field(
        default_factory=list,
        description="Input columns whose values the report breaks the metrics down by (accuracy with Wilson intervals, "
        "worst first; multi_label: micro-F1 and subset accuracy; regression: MAE). Values must be single values "
        "(text, numbers, booleans, dates): struct, list and map columns are refused up front.",
        json_schema_extra=affects(STAGING, EVALUATION),  # staged as slice_0, slice_1, ...
    )
    compare_to: str | None = Field(
        None,
        description="A completed run to compare with: a run name under output_uri, or 'previous' (the latest "
        "completed run under output_uri that read the same input, this run excluded). Checked before anything is "
        "scored: an unknown, unfinished or missing run, or this run itself, is refused (exit 2). Another kind of "
        "head is refused too. Adds the comparison to metrics.json.",
        json_schema_extra=affects(EVALUATION),
    )
    drift_reference: str | None = Field(
        None,
        description="A completed run to measure drift and estimate performance against: a run name under output_uri, "
        "or 'previous' (the latest completed run under output_uri scored with the same model and adapter, this run "
        "excluded). Checked before anything is scored: an unknown or unfinished run, or this run itself, is refused "
        "(exit 2), as is another kind of head. Adds drift and estimated to metrics.json (docs/drift.md).",
        json_schema_extra=affects(EVALUATION),
    )
    drift_min_psi: float = Field(
        0.1,
        ge=0,
        description="The population stability index from which a signal's shift counts as drifted (when its "
        "Holm-adjusted p is also below 0.05). docs/drift.md.",
        json_schema_extra=affects(EVALUATION),
    )
    drift_min_auc: float = Field(
        0.55,
        ge=0.5,
        le=1.0,
        description="The held-out AUC of the representation signal (a classifier telling this run's embeddings from "
        "the reference's) from which it counts as drifted (when its Holm-adjusted p is also below 0.05); in [0.5, 1]. "
        "docs/drift.md.",
        json_schema_extra=affects(EVALUATION),
    )
    embedding_rows: int = Field(
        20000,
        ge=0,
        description="Rows whose representation (the hidden state the classification head reads) is written to "
        "embeddings.parquet: a sample of about this many scored rows, drawn from the row index alone, so a replay of "
        "one input samples the same rows (docs/drift.md). 0: none.",
        json_schema_extra=affects(PREDICTIONS),  # written per range by the worker: a resume must keep it
    )
    label_budget: int = Field(
        0,
        ge=0,
        description="Rows to label: draw a labelling plan of about this many of the run's scored rows "
        "(report/label_plan.parquet, metrics.json label_plan); a rerun under the same run name with their ground "
        "truth adds prediction_powered metrics with intervals (docs/labelling.md). 0: no plan. A run's plan is "
        "pinned: a rerun with another budget is refused.",
        json_schema_extra=affects(EVALUATION),
    )
    label_sampling: Literal["active", "uniform"] = Field(
        "active",
        description="How the labelling plan draws rows: active (more often where the model is uncertain, every row "
        "keeping a chance) or uniform. A rerun of a run with a plan must keep it.",
        json_schema_extra=affects(EVALUATION),
    )
    gates: dict[str, str] = Field(
        default_factory=dict,
        description="Quality gates, checked once the report is published; a failed gate fails the run (CLI exit 4). "
        "{metric: 'OP NUMBER'} with OP >=, >, <=, <, e.g. {'accuracy': '>=0.9', 'macro_f1_drop': '<=0.01 if significant'}. "
        "The names a gate accepts: docs/metrics.md; how gates are judged: docs/gates.md.",
        json_schema_extra=affects(EVALUATION),
    )
    collective_timeout_s: float = Field(
        120.0,
        gt=0,
        description="Seconds a scoring process may be silent (no heartbeat) or wait on the others (a dead or stopped "
        "peer) before the job fails.",
        json_schema_extra=affects(NOTHING),
    )
    trust_remote_code: bool = Field(
        False,
        description="Allow model code shipped with the model folder. Off unless asked for.",
        json_schema_extra=affects(PREDICTIONS),
    )
    oversubscribe: bool = Field(
        False,
        description="Allow more scoring processes than CPU cores on a machine without a GPU (each one loads "
        "the whole model: memory runs out long before the cores are busy).",
        json_schema_extra=affects(NOTHING),
    )
    storage_block: str | None = Field(
        None,
        description="Prefect block with the object-storage credentials: NAME, aws-credentials/NAME or "
        "secret/NAME (a Secret holding the AwsCredentials fields as JSON); default: the standard AWS "
        "chain (environment incl. AWS_ENDPOINT_URL, profiles, instance roles).",
        json_schema_extra=affects(NOTHING),
    )

    # -- the kind of head (docs/contracts.md, section 7) -----------------------------------------
    head: Head = Field(
        "auto",
        description="What the model's outputs are: single_label (softmax, argmax), multi_label (a sigmoid per label, "
        "thresholded), regression (the raw values). auto follows the model's config.problem_type; a config without "
        "it is single_label with two or more outputs and is refused with one (say regression or multi_label). The "
        "kind used is recorded in request.json and metrics.json (head); docs/heads.md.",
        json_schema_extra=affects(PREDICTIONS, STAGING),  # and the form the ground truth is staged in
    )
    thresholds: float | dict[str, float] = Field(
        0.5,
        description="multi_label: a label is predicted when its probability is strictly greater than its threshold; "
        "one number for every label, or {label: number} (labels not named keep 0.5). CLI: --thresholds 0.4 or JSON. "
        "Checked up front: in [0, 1], only the model's labels, only for multi_label heads.",
        json_schema_extra=affects(PREDICTIONS),  # the predicted_labels column
    )
    label_delimiter: str = Field(
        "|",
        description="multi_label: the separator of label names in a ground-truth text cell ('spam|toxic'), as in CSV.",
        json_schema_extra=affects(STAGING, EVALUATION),
    )
    label_columns: list[str] = Field(
        default_factory=list,
        description="multi_label: the ground truth as one 0/1 column per model label, each named like its label "
        "(every label needs one; instead of label_column).",
        json_schema_extra=affects(STAGING, EVALUATION),
    )

    # -- long documents (docs/long_text.md) ----------------------------------------------------------
    # In the scoring fingerprint only when not the default (request_record.LATER_PARAMETERS), so
    # runs made before these fields existed keep their fingerprint and resume.
    long_text: LongText = Field(
        "truncate",
        description="A text longer than the window (max_length minus the tokenizer's special tokens): truncate "
        "(its first tokens), head_tail (its first head_tokens and its last tokens), or chunk (windows over the whole "
        "text, each scored, their raw outputs aggregated by chunk_aggregate). docs/long_text.md.",
        json_schema_extra=affects(PREDICTIONS),
    )
    head_tokens: int = Field(
        128,
        ge=0,
        description="head_tail: content tokens kept from the start of a long text; the rest of the window is its end. "
        "Must be below the window.",
        json_schema_extra=affects(PREDICTIONS),
    )
    chunk_overlap: int = Field(
        0,
        ge=0,
        description="chunk: content tokens each window shares with the one before it. Must be below the window.",
        json_schema_extra=affects(PREDICTIONS),
    )
    chunk_aggregate: ChunkAggregate = Field(
        "mean",
        description="chunk: how a row's windows' raw outputs (logits, regression values) become one, in float64 before "
        "the head's activation: mean, or max (multi_label: a label any window shows; regression: the largest value; "
        "refused for single_label).",
        json_schema_extra=affects(PREDICTIONS),
    )
    max_chunks: int = Field(
        64,
        ge=1,
        description="chunk: the most windows a row is scored on; a longer row is scored on its first max_chunks "
        "windows and counted (scoring.long_text.rows_capped).",
        json_schema_extra=affects(PREDICTIONS),
    )

    # -- fan-out over several machines (docs/contracts.md, section 5) ---------------------------
    fan_out: int = Field(
        0,
        ge=0,
        description="Score on several machines: split the uncommitted ranges into this many groups, each "
        "run as a flow run of the fan_out_deployment by whichever worker of its pool is free. 0 or 1: "
        "score inside this flow run. Needs a Prefect server, the deployment and workers (docs/fan-out.md).",
        json_schema_extra=affects(NOTHING),  # where the ranges are scored, never what
    )
    fan_out_deployment: str = Field(
        "scorekeeper-group/group",
        description="With fan_out > 1: the scoring-group deployment ('flow name/deployment name') that runs each group.",
        json_schema_extra=affects(NOTHING),
    )
    group_retries: int = Field(
        2,
        ge=0,
        description="With fan_out > 1: times a failed or lost group is dispatched again before the run fails.",
        json_schema_extra=affects(NOTHING),
    )
    group_start_timeout_s: float = Field(
        600.0,
        gt=0,
        description="With fan_out > 1: seconds a group's flow run may wait for a worker of its pool to start it; "
        "past them the run fails, naming the pool and the command that starts a worker (a warning at each quarter before).",
        json_schema_extra=affects(NOTHING),
    )
    group_stall_timeout_s: float = Field(
        180.0,
        gt=0,
        description="With fan_out > 1: seconds without a heartbeat from a started group (its machine or "
        "worker died) before it counts as lost and is dispatched again.",
        json_schema_extra=affects(NOTHING),
    )

    @field_validator("text_column", "text_pair_column", "id_column", "label_column")
    @classmethod
    def _column_name(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value or len(value) > 256 or _CONTROL_CHARS.search(value):
            raise ValueError(f"{value!r} is not a usable column name")
        return value

    @field_validator("slice_columns")
    @classmethod
    def _slice_columns(cls, value: list[str]) -> list[str]:
        for name in value:
            cls._column_name(name)
        return list(dict.fromkeys(value))  # a column named twice is one breakdown

    @field_validator("label_columns")
    @classmethod
    def _label_columns(cls, value: list[str]) -> list[str]:
        for name in value:
            cls._column_name(name)
        repeated = sorted({name for name in value if value.count(name) > 1})
        if repeated:
            raise ValueError(f"label_columns names {', '.join(map(repr, repeated))} more than once")
        return value

    @field_validator("thresholds", mode="before")
    @classmethod
    def _thresholds_text(cls, value):
        """The CLI's and a form's text: a number, or a JSON object of label -> number."""
        if isinstance(value, str):
            import json

            try:
                return float(value)
            except ValueError:
                pass
            try:
                return json.loads(value)
            except json.JSONDecodeError:
                raise ValueError(f"{value!r} is neither a number nor a JSON object of label -> number") from None
        return value

    @field_validator("thresholds")
    @classmethod
    def _thresholds(cls, value: float | dict[str, float]) -> float | dict[str, float]:
        values = value.values() if isinstance(value, dict) else [value]
        bad = [v for v in values if not 0.0 <= v <= 1.0]  # NaN fails both comparisons
        if bad:
            raise ValueError(f"thresholds must lie in [0, 1] (a label is predicted when its probability is above it), found {bad[0]!r}")
        if isinstance(value, dict) and not value:
            raise ValueError("thresholds {} names no label; give one number or {label: number}")
        return value

    @field_validator("label_delimiter")
    @classmethod
    def _label_delimiter(cls, value: str) -> str:
        if not value:
            raise ValueError("label_delimiter must not be empty")
        return value

    @field_validator("compare_to")
    @classmethod
    def _compare_to(cls, value: str | None) -> str | None:
        if value is not None and value != "previous" and (not RUN_NAME_PATTERN.match(value) or ".." in value):
            raise ValueError(f"compare_to {value!r} must be 'previous' or the name of a run under output_uri")
        return value

    @field_validator("drift_reference")
    @classmethod
    def _drift_reference(cls, value: str | None) -> str | None:
        if value is not None and value != "previous" and (not RUN_NAME_PATTERN.match(value) or ".." in value):
            raise ValueError(f"drift_reference {value!r} must be 'previous' or the name of a run under output_uri")
        return value

    @field_validator("gates")
    @classmethod
    def _gates(cls, value: dict[str, str]) -> dict[str, str]:
        from scorekeeper.gates import parse_gates

        parse_gates(value, head=None)  # any head's metrics here; the head's own in _consistent and when the run opens
        return value

    @field_validator("run_name")
    @classmethod
    def _run_name(cls, value: str | None) -> str | None:
        if value is None:
            return None
        # A template must make a valid name whatever the night: checked filled with two unlike moments.
        filled = [uri_template.fill(value, when) for when in _SAMPLE_MOMENTS] if uri_template.is_template(value) else [value]
        for name in filled:
            if not RUN_NAME_PATTERN.match(name) or ".." in name:
                shown = f"{value!r} (filled: {name!r})" if name != value else repr(value)
                raise ValueError(
                    f"run_name {shown} must be 1-128 letters, digits, '.', '_' or '-', start with a "
                    "letter or digit and contain no '..' (it names a folder under output_uri)"
                )
        return value

    @field_validator("input_uri", "ground_truth_uri", "output_uri")
    @classmethod
    def _uri_template(cls, value: str | None) -> str | None:
        if value is not None and uri_template.is_template(value):
            uri_template.parse(value)  # a TemplateError is a ValueError: one line naming the template
        return value

    @field_validator("as_of")
    @classmethod
    def _as_of(cls, value: str | None) -> str | None:
        return None if value is None else uri_template.as_of_text(uri_template.parse_as_of(value))

    @field_validator("fan_out_deployment")
    @classmethod
    def _deployment_name(cls, value: str) -> str:
        flow_name, _, deployment = value.partition("/")
        if not flow_name.strip() or not deployment.strip():
            raise ValueError(f"{value!r} must name a deployment as 'flow name/deployment name'")
        return value

    @field_validator("num_processes")
    @classmethod
    def _num_processes(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value < 1:
            raise ValueError("num_processes must be at least 1 (or 'auto')")
        return value

    @field_validator("input_uri", "model_uri", "output_uri")
    @classmethod
    def _required_uri(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> ScoreRequest:
        if self.text_pair_column is not None and self.text_pair_column == self.text_column:
            raise ValueError("text_pair_column must differ from text_column")
        if self.ground_truth_uri is not None:
            if self.id_column is None:
                raise ValueError("ground_truth_uri is joined on id_column: set id_column too")
            if self.label_column is None:
                raise ValueError("ground_truth_uri needs label_column (the label column in those files)")
        if (
            self.mode == "pipeline"
            and self.pipeline_stages is not None
            and isinstance(self.num_processes, int)
            and self.num_processes % self.pipeline_stages
        ):
            raise ValueError(
                f"num_processes {self.num_processes} is not a multiple of pipeline_stages {self.pipeline_stages}: "
                "pipeline mode runs num_processes / pipeline_stages pipelines"
            )
        if self.compare_to is not None and self.compare_to == self.run_name:
            raise ValueError(f"compare_to names this run ({self.run_name!r}); name another run under output_uri, or 'previous'")
        if self.drift_reference is not None and self.drift_reference == self.run_name:
            raise ValueError(f"drift_reference names this run ({self.run_name!r}); name another run under output_uri, or 'previous'")
        self._gates_consistent()
        bounded = [n for n in ("precision_max_difference", "precision_max_changed") if getattr(self, n) is not None]
        if bounded and not self.precision_check_rows:
            raise ValueError(f"{', '.join(bounded)} bound the precision check: set precision_check_rows above 0")
        if self.label_columns and self.ground_truth_uri is not None:
            raise ValueError("label_columns are read from the input rows; ground_truth_uri files hold label_column")
        overlap = [c for c in self.label_columns if c in (self.text_column, self.text_pair_column, self.id_column)]
        if overlap:
            raise ValueError(f"label_columns must differ from the text and id columns ({', '.join(overlap)})")
        if self.id_column is not None and self.id_column in (self.text_column, self.text_pair_column):
            raise ValueError("id_column must differ from the text columns")
        if (
            self.ground_truth_uri is None
            and self.label_column is not None
            and self.label_column in (self.text_column, self.text_pair_column)
        ):
            raise ValueError(
                f"label_column {self.label_column!r} is also a text column: the run would score the truth itself; "
                "name the ground-truth column, or label_column none to score only"
            )
        if self.long_text != "truncate" and self.text_pair_column is not None:
            raise ValueError(
                f"long_text {self.long_text} cuts one text into windows; a text pair (text_pair_column) is scored with long_text truncate"
            )
        if self.head != AUTO:
            from scorekeeper.long_text import check_aggregate

            check_aggregate(self.long_text, self.chunk_aggregate, self.head)
        return self

    def _gates_consistent(self) -> None:
        """Each gate's metric is one this request computes: a reference run's, a labelled plan's and a
        comparison's only with drift_reference, label_budget and compare_to; a head given as a
        parameter gates on its own metrics only."""
        if self.drift_reference is None:
            from scorekeeper.gates import MONITORING_METRICS

            needing = [name for name in self.gates if name in MONITORING_METRICS]
            if needing:
                raise ValueError(f"gates {', '.join(needing)} measure against a reference run: set drift_reference too")
        if not self.label_budget:
            from scorekeeper.gates import LABELLING_METRICS

            needing = [name for name in self.gates if name in LABELLING_METRICS]
            if needing:
                raise ValueError(f"gates {', '.join(needing)} read the labelled plan's estimates: set label_budget too")
        if self.compare_to is None:
            from scorekeeper.gates import COMPARISON_METRICS

            needing = [name for name in self.gates if name in COMPARISON_METRICS]
            if needing:
                raise ValueError(f"gates {', '.join(needing)} compare with another run: set compare_to too")
        if self.head != AUTO:
            from scorekeeper.gates import parse_gates

            parse_gates(self.gates, head=HeadKind(self.head))

    @property
    def precision_bounded(self) -> bool:
        """Whether a bound turns the precision check into a pass or fail (tasks/precision.py)."""
        return self.precision_max_difference is not None or self.precision_max_changed is not None

    def resolved_num_processes(self, visible_gpus: int, cores: int | None = None) -> int:
        """Processes to launch (see resolve_num_processes)."""
        return resolve_num_processes(self.num_processes, self.oversubscribe, visible_gpus, cores)

    def dated_templates(self) -> dict[str, str]:
        """The fields that hold placeholders, as given (filled by `filled`)."""
        return {name: value for name in uri_template.TEMPLATE_FIELDS if uri_template.is_template(value := getattr(self, name))}

    def fill_moment(self, scheduled: datetime | None = None) -> datetime:
        """The moment the templates are filled with: as_of, else the flow run's scheduled time, else now (UTC)."""
        if self.as_of is not None:
            return uri_template.parse_as_of(self.as_of)
        return uri_template.utc(scheduled or datetime.now(UTC))

    def filled(self, when: datetime) -> ScoreRequest:
        """The request with its templates filled from `when`, and `as_of` saying that moment (request.json's).
        A request without templates is itself, as_of set; filling a filled request again changes nothing."""
        updates: dict[str, object] = {name: uri_template.fill(value, when) for name, value in self.dated_templates().items()}
        updates["as_of"] = uri_template.as_of_text(when)
        return self.model_validate(self.model_dump() | updates)

    def public_dict(self) -> dict:
        """The parameters as written to request.json, job.json and the report: no secrets (a
        block's name at most; a password in a URI is replaced by ***)."""
        data = self.model_dump(mode="json")
        for name in URI_FIELDS:
            data[name] = redact_uri(data[name])
        return data


def resolve_num_processes(num_processes: int | Literal["auto"], oversubscribe: bool, visible_gpus: int, cores: int | None = None) -> int:
    """Processes to launch: the explicit count, else one per visible GPU (1 without a GPU).

    Refuses (InputError) more processes than GPUs (two ranks cannot share a device), and more
    than `cores` without a GPU unless `oversubscribe`: every process loads the whole model."""
    if num_processes == "auto":
        return max(1, visible_gpus)
    from scorekeeper.errors import InputError

    wanted = int(num_processes)
    if visible_gpus and wanted > visible_gpus:
        raise InputError(
            f"num_processes {wanted} is more than the {visible_gpus} visible GPU(s): every scoring process "
            "needs a GPU of its own (set CUDA_VISIBLE_DEVICES, or lower --num-processes)"
        )
    cores = available_cores() if cores is None else cores
    if not visible_gpus and wanted > cores and not oversubscribe:
        raise InputError(
            f"num_processes {wanted} is more than this machine's {cores} CPU core(s) and there is no GPU: "
            "every scoring process loads the whole model, so memory runs out long before the cores are busy. "
            f"Use --num-processes {cores} or fewer, or --oversubscribe to start them anyway"
        )
    return wanted


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask, e.g. a container's cpuset)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# Parameters that name a place: shown redacted, compared normalised.
URI_FIELDS = ("input_uri", "ground_truth_uri", "model_uri", "adapter_uri", "output_uri")


def parameter_effects(model: type[BaseModel] = ScoreRequest) -> dict[str, frozenset[Affects]]:
    """What each parameter changes, as its field declares; refuses a field that does not say."""
    effects, problems = {}, []
    for name, field in model.model_fields.items():
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        declared = extra.get("affects")  # `affects(...)` writes a list of Affects values
        kinds = frozenset(Affects(str(k)) for k in declared) if isinstance(declared, list) else frozenset()
        if not kinds:
            problems.append(
                f"{model.__name__}.{name} does not say what it affects: add json_schema_extra=affects(...) to its "
                "Field(...) in scorekeeper/params.py, naming what its value changes: PREDICTIONS (what a committed "
                "shard holds; a resume must keep it), STAGING (what the read step stages from the input), "
                "EVALUATION (the evaluation and report only), or NOTHING (how the run is carried out); "
                "e.g. json_schema_extra=affects(EVALUATION)"
            )
        elif NOTHING in kinds and len(kinds) > 1:
            problems.append(f"{model.__name__}.{name} says it affects NOTHING and {', '.join(sorted(kinds - {NOTHING}))}")
        effects[name] = kinds
    if problems:
        raise TypeError("; ".join(problems))
    return effects


def parameters_affecting(kind: Affects) -> frozenset[str]:
    return frozenset(name for name, kinds in PARAMETER_EFFECTS.items() if kind in kinds)


PARAMETER_EFFECTS = parameter_effects()
SCORING_PARAMETERS = parameters_affecting(PREDICTIONS)
"""In the scoring fingerprint: a commit record made under other values is stale, a resume is refused."""
STAGING_PARAMETERS = parameters_affecting(STAGING)
"""In the staging key: the staged input is reused only when these (and the input files) are the same."""
RESUMABLE_DIFFERENCES = frozenset(PARAMETER_EFFECTS) - SCORING_PARAMETERS
"""Parameters a resume may change: they change no prediction."""
