"""Length-aware batching: a pure function of the range, under the token budget."""

from __future__ import annotations

import numpy as np
import pytest

from scorekeeper.worker.batching import Encoded, collate, cut_batches


@pytest.mark.parametrize("seed", range(5))
def test_batches_cover_each_position_once_within_budget(seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 200, size=rng.integers(1, 300))
    batches = cut_batches(lengths, tokens_per_batch=1000, max_rows=64)
    positions = np.concatenate(batches)
    assert sorted(positions.tolist()) == list(range(len(lengths)))
    for b in batches:
        assert len(b) <= 64
        assert len(b) == 1 or len(b) * lengths[b].max() <= 1000
        assert lengths[b].tolist() == sorted(lengths[b].tolist(), reverse=True)
    assert [b.tolist() for b in batches] == [b.tolist() for b in cut_batches(lengths.copy(), 1000, 64)]


@pytest.mark.parametrize("seed", range(5))
def test_grouped_batches_never_mix_keys_and_one_key_is_no_key(seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 200, size=rng.integers(1, 300))
    groups = rng.choice([1, 1, 1, 1, 2, 3], size=len(lengths))  # most rows one key (eos counts: mostly 1)
    batches = cut_batches(lengths, tokens_per_batch=1000, max_rows=64, groups=groups)
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(lengths)))
    for b in batches:
        assert len(set(groups[b].tolist())) == 1
        assert len(b) <= 64 and (len(b) == 1 or len(b) * lengths[b].max() <= 1000)
        assert lengths[b].tolist() == sorted(lengths[b].tolist(), reverse=True)
    for key in set(groups.tolist()):  # each key's rows are cut as they would be alone
        mine = np.flatnonzero(groups == key)
        alone = [mine[b].tolist() for b in cut_batches(lengths[mine], 1000, 64)]
        assert [b.tolist() for b in batches if groups[b[0]] == key] == alone
    same = [b.tolist() for b in cut_batches(lengths, 1000, 64, groups=np.ones(len(lengths), np.int64))]
    assert same == [b.tolist() for b in cut_batches(lengths, 1000, 64)]


def test_a_row_longer_than_the_budget_gets_a_batch_of_its_own():
    batches = cut_batches(np.array([5, 600, 5]), tokens_per_batch=100, max_rows=8)
    assert [b.tolist() for b in batches] == [[1], [0, 2]]


def test_collate_pads_right_to_the_longest_row_and_masks_pads():
    encoded = Encoded(ids=[[1, 2, 3], [4], [5, 6]], type_ids=[[0, 0, 1], [0], [0, 1]], lengths=np.array([3, 1, 2]), truncated=0)
    batch = collate(encoded, np.array([1, 2]), pad_token_id=9)
    assert batch.input_ids.tolist() == [[4, 9], [5, 6]]
    assert batch.attention_mask.tolist() == [[1, 0], [1, 1]]
    assert batch.token_type_ids.tolist() == [[0, 0], [0, 1]]
    assert (batch.useful_tokens, batch.padded_tokens) == (3, 4)
