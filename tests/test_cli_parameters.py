"""One parse for every CLI option (scorekeeper/cli.py `parse_request`): the CLI builds the
ScoreRequest, every validator run, and hands the flow its JSON-mode dump; what the flow run receives
(after Prefect's own validation of the parameters against the flow's signature) is the model's
values. Every field of ScoreRequest is walked with its CLI text forms (JSON, comma lists, repeated
options, `none`); a field without a case here fails the walk, so a new field cannot be forgotten.
Bad values end in one line and exit 2, before anything starts.
"""

from __future__ import annotations

import pytest

from scorekeeper.cli import build_parser, main, parse_request
from scorekeeper.flows.score import score_dataset
from scorekeeper.params import ScoreRequest

BASE = ["run", "--input-uri", "in.csv", "--model-uri", "model", "--output-uri", "runs"]

# field: [(CLI arguments after BASE, the field's value in the request)]
FORMS: dict[str, list[tuple[list[str], object]]] = {
    "input_uri": [(["--input-uri", "data/**/*.csv"], "data/**/*.csv"), (["--input-uri", "in/{date-1d}/"], "in/{date-1d}/")],
    "text_column": [(["--text-column", "body"], "body")],
    "text_pair_column": [(["--text-pair-column", "q2"], "q2"), (["--text-pair-column", "none"], None)],
    "id_column": [(["--id-column", "review_id"], "review_id"), (["--id-column", "None"], None)],
    "label_column": [(["--label-column", "rating"], "rating"), (["--label-column", "none"], None), (["--label-column", "null"], None)],
    "ground_truth_uri": [(["--ground-truth-uri", "gt.csv", "--id-column", "rid"], "gt.csv"), (["--ground-truth-uri", "none"], None)],
    "model_uri": [(["--model-uri", "s3://models/m"], "s3://models/m")],
    "adapter_uri": [(["--adapter-uri", "lora"], "lora"), (["--adapter-uri", "none"], None)],
    "merge_adapter": [(["--no-merge-adapter"], False), (["--merge-adapter"], True)],
    "mode": [(["--mode", "pipeline"], "pipeline"), (["--mode", "replica"], "replica")],
    "num_processes": [(["--num-processes", "2"], 2), (["--num-processes", "auto"], "auto")],
    "output_uri": [
        (["--output-uri", "s3://bucket/runs"], "s3://bucket/runs"),
        (["--output-uri", "runs/{scheduled:%Y}"], "runs/{scheduled:%Y}"),
    ],
    "run_name": [
        (["--run-name", "nightly-01"], "nightly-01"),
        (["--run-name", "none"], None),
        (["--run-name", "monitor-{date}"], "monitor-{date}"),
    ],
    "as_of": [
        (["--as-of", "2026-12-01"], "2026-12-01T00:00:00Z"),
        (["--as-of", "2026-12-01T03:30+01:00"], "2026-12-01T02:30:00Z"),
        (["--as-of", "none"], None),
    ],
    "if_empty": [(["--if-empty", "skip"], "skip"), (["--if-empty", "fail"], "fail")],
    "dtype": [(["--dtype", "float16"], "float16")],
    "precision_check_rows": [(["--precision-check-rows", "0"], 0)],
    "precision_max_difference": [(["--precision-max-difference", "1e-3"], 1e-3), (["--precision-max-difference", "none"], None)],
    "precision_max_changed": [(["--precision-max-changed", "3"], 3)],
    "max_length": [(["--max-length", "128"], 128), (["--max-length", "none"], None)],
    "rows_per_range": [(["--rows-per-range", "100"], 100)],
    "tokens_per_batch": [(["--tokens-per-batch", "4096"], 4096), (["--tokens-per-batch", "none"], None)],
    "max_batch_rows": [(["--max-batch-rows", "16"], 16)],
    "null_text": [(["--null-text", "empty"], "empty")],
    "pipeline_stages": [(["--pipeline-stages", "2"], 2)],
    "microbatches": [(["--microbatches", "8"], 8)],
    "slice_columns": [
        (["--slice-columns", "source,lang", "--slice-columns", "year"], ["source", "lang", "year"]),
        (["--slice-columns", "source", "lang"], ["source", "lang"]),
        (["--slice-columns", "source,source"], ["source"]),
    ],
    "compare_to": [(["--compare-to", "previous"], "previous"), (["--compare-to", "base-01"], "base-01"), (["--compare-to", "none"], None)],
    "embedding_rows": [(["--embedding-rows", "500"], 500), (["--embedding-rows", "0"], 0)],
    "label_budget": [(["--label-budget", "300"], 300), (["--label-budget", "0"], 0)],
    "label_sampling": [(["--label-sampling", "uniform"], "uniform"), (["--label-sampling", "active"], "active")],
    "drift_reference": [
        (["--drift-reference", "previous"], "previous"),
        (["--drift-reference", "base-01"], "base-01"),
        (["--drift-reference", "none"], None),
    ],
    "drift_min_psi": [(["--drift-min-psi", "0.25"], 0.25)],
    "drift_min_auc": [(["--drift-min-auc", "0.6"], 0.6), (["--drift-min-auc", "1"], 1.0)],
    "gates": [
        (["--gates", "accuracy>=0.9", "--gates", "macro_f1 >= 0.8"], {"accuracy": ">=0.9", "macro_f1": ">= 0.8"}),
        (["--gates", '{"accuracy": ">=0.9"}'], {"accuracy": ">=0.9"}),
    ],
    "collective_timeout_s": [(["--collective-timeout-s", "30"], 30.0)],
    "trust_remote_code": [(["--trust-remote-code"], True), (["--no-trust-remote-code"], False)],
    "oversubscribe": [(["--oversubscribe"], True)],
    "storage_block": [(["--storage-block", "aws-credentials/minio"], "aws-credentials/minio"), (["--storage-block", "none"], None)],
    "head": [(["--head", "multi_label"], "multi_label"), (["--head", "regression"], "regression")],
    "thresholds": [
        (["--thresholds", "0.4"], 0.4),
        (["--thresholds", '{"spam": 0.3}'], {"spam": 0.3}),  # the README's example
        (["--thresholds", '{"spam": 0.3, "toxic": 1}'], {"spam": 0.3, "toxic": 1.0}),
    ],
    "label_delimiter": [(["--label-delimiter", ";"], ";")],
    "label_columns": [
        (["--label-columns", "spam,toxic"], ["spam", "toxic"]),
        (["--label-columns", "spam", "--label-columns", "toxic"], ["spam", "toxic"]),
    ],
    "fan_out": [(["--fan-out", "3"], 3)],
    "fan_out_deployment": [(["--fan-out-deployment", "scorekeeper-group/gpu"], "scorekeeper-group/gpu")],
    "group_retries": [(["--group-retries", "0"], 0)],
    "group_start_timeout_s": [(["--group-start-timeout-s", "5"], 5.0)],
    "group_stall_timeout_s": [(["--group-stall-timeout-s", "7.5"], 7.5)],
    "long_text": [(["--long-text", "chunk"], "chunk"), (["--long-text", "head_tail"], "head_tail")],
    "head_tokens": [(["--head-tokens", "64", "--long-text", "head_tail"], 64)],
    "chunk_overlap": [(["--chunk-overlap", "16", "--long-text", "chunk"], 16)],
    "chunk_aggregate": [(["--chunk-aggregate", "max", "--long-text", "chunk", "--head", "multi_label"], "max")],
    "max_chunks": [(["--max-chunks", "8", "--long-text", "chunk"], 8)],
}

CASES = [(name, args, value) for name, forms in FORMS.items() for args, value in forms]


def _flow_run_parameters(parameters: dict) -> dict:
    """What the flow run receives: Prefect validates the parameters against the flow's signature."""
    return score_dataset.validate_parameters(parameters)


def test_every_field_has_its_cli_forms_here():
    assert set(FORMS) == set(ScoreRequest.model_fields), "give each ScoreRequest field its CLI forms in FORMS"


@pytest.mark.parametrize(("name", "args", "value"), CASES, ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(CASES)])
def test_the_flow_run_receives_the_models_values(name, args, value):
    options = vars(build_parser().parse_args(BASE + args))
    options.pop("command")
    request, parameters = parse_request(options)
    assert getattr(request, name) == value and type(getattr(request, name)) is type(value)
    received = _flow_run_parameters(parameters)
    assert ScoreRequest(**received) == request
    assert received[name] == value and type(received[name]) is type(value)


def test_a_field_left_out_arrives_as_its_default():
    options = vars(build_parser().parse_args(BASE))
    options.pop("command")
    request, parameters = parse_request(options)
    assert (
        ScoreRequest(**_flow_run_parameters(parameters))
        == request
        == ScoreRequest(input_uri="in.csv", model_uri="model", output_uri="runs")
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--thresholds", '{"spam": 0.3'], "--thresholds: '{\"spam\": 0.3' is neither a number nor a JSON object"),
        (["--thresholds", '{"spam": 1.5}'], "thresholds must lie in [0, 1]"),
        (["--num-processes", "two"], "--num-processes"),
        (["--rows-per-range", "0"], "--rows-per-range"),
        (["--gates", "accuracy=0.9"], "--gates: 'accuracy=0.9' is not METRIC OP NUMBER"),
        (["--ground-truth-uri", "gt.csv"], "ground_truth_uri is joined on id_column"),
        (["--run-name", "a/b"], "run_name 'a/b' must be"),
        (["--label-budget", "-5"], "--label-budget"),
        (["--embedding-rows", "-1"], "--embedding-rows"),
        (["--label-sampling", "stratified"], "--label-sampling"),
        (["--gates", "pp_accuracy>=0.9"], "set label_budget too"),
        (["--drift-min-auc", "0.4"], "--drift-min-auc: Input should be greater than or equal to 0.5"),
        (["--drift-min-auc", "1.5"], "--drift-min-auc: Input should be less than or equal to 1"),
        (["--text-column", "label"], "label_column 'label' is also a text column: the run would score the truth itself"),
        (["--text-pair-column", "verdict", "--label-column", "verdict"], "label_column 'verdict' is also a text column"),
    ],
)
def test_a_bad_value_is_one_line_and_exit_2_before_anything_starts(args, said, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(BASE + args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("scorekeeper: error: ") and said in err, err
    assert "Traceback" not in err and list(tmp_path.iterdir()) == []  # nothing written, no run folder
