"""Planning and gathering: ranges tile the rows exactly once, whatever happens."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from scorekeeper.errors import GatherError
from scorekeeper.run_folder import CommitRecord, RunFolder, cut_ranges
from scorekeeper.tasks.gather import gather_predictions, tiling_problems
from scorekeeper.worker.shards import commit_shard, prediction_table


@pytest.mark.parametrize("total,per", [(1, 4), (7, 3), (12, 4), (4096, 1000), (5, 5)])
def test_ranges_tile_the_rows_in_fixed_sizes(total, per):
    ranges = cut_ranges(total, per)
    assert [r.index for r in ranges] == list(range(len(ranges)))
    assert ranges[0].start == 0 and ranges[-1].end == total
    assert all(a.end == b.start for a, b in zip(ranges, ranges[1:]))
    assert all(r.rows == per for r in ranges[:-1]) and 0 < ranges[-1].rows <= per
    assert not tiling_problems([(r.start, r.end) for r in ranges], total)


def test_tiling_names_gaps_overlaps_duplicates_and_excess():
    assert tiling_problems([(0, 3), (5, 7)], 7) == ["rows [3, 5) have no prediction"]
    assert tiling_problems([(0, 4), (3, 7)], 7) == ["rows [3, 4) are predicted more than once"]
    assert tiling_problems([(0, 4), (0, 4), (4, 7)], 7) == ["rows [0, 4) are predicted more than once"]
    assert tiling_problems([(0, 4)], 7) == ["rows [4, 7) have no prediction"]
    assert tiling_problems([(0, 9)], 7) == ["rows [7, 9) are beyond the input's 7 rows"]
    assert tiling_problems([], 3) == ["rows [0, 3) have no prediction"]


def _commit(run: RunFolder, index: int, start: int, end: int, fingerprint: str = "fp") -> None:
    from scorekeeper.run_folder import IndexRange

    rows = pa.table({"row_index": pa.array(range(start, end), pa.int64()), "id": pa.array(range(start, end), pa.int64())})
    probs = np.full((end - start, 2), 0.5)
    assert commit_shard(
        run,
        IndexRange(index, start, end),
        prediction_table(rows, probs, ["a", "b"]),
        scoring_fingerprint=fingerprint,
        attempt="t",
        tokens=1,
        truncated=0,
    )


def test_gather_writes_rows_in_order_and_refuses_gaps(tmp_path):
    run = RunFolder.from_uri(str(tmp_path / "run"))
    _commit(run, 1, 3, 6)
    _commit(run, 0, 0, 3)
    with pytest.raises(GatherError, match=r"rows \[6, 8\) have no prediction"):
        gather_predictions(run, 8, "fp")
    _commit(run, 2, 6, 8)
    assert gather_predictions(run, 8, "fp").rows == 8
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "run" / "predictions.parquet")
    assert table.column("row_index").to_pylist() == list(range(8))


def test_gather_of_nothing_is_refused_with_a_message(tmp_path):
    # No range tiles zero rows: the gather has no shard to take the predictions' schema from, and
    # says so (it used to fail on closing a writer it never opened).
    run = RunFolder.from_uri(str(tmp_path / "run"))
    with pytest.raises(GatherError, match="no committed range to gather"):
        gather_predictions(run, 0, "fp")


def test_commit_is_exclusive_and_tampered_shards_are_refused(tmp_path):
    run = RunFolder.from_uri(str(tmp_path / "run"))
    _commit(run, 0, 0, 4)
    from scorekeeper.run_folder import IndexRange

    rows = pa.table({"row_index": pa.array(range(4), pa.int64()), "id": pa.array(range(4), pa.int64())})
    second = commit_shard(
        run,
        IndexRange(0, 0, 4),
        prediction_table(rows, np.full((4, 2), 0.5), ["a", "b"]),
        scoring_fingerprint="fp",
        attempt="other",
        tokens=1,
        truncated=0,
    )
    assert second is False
    assert run.list_names("work/shards") == ["range-0000000-t.parquet"]
    # A record that claims other rows than its shard holds fails the gather and names the shard.
    record = CommitRecord.from_bytes(run.read_bytes(RunFolder.commit_name(0)))
    record.end, record.rows = 5, 5
    (tmp_path / "run" / RunFolder.commit_name(0)).write_bytes(record.to_bytes())
    with pytest.raises(GatherError, match="does not hold exactly rows"):
        gather_predictions(run, 5, "fp")


def test_commits_of_other_settings_do_not_count(tmp_path):
    run = RunFolder.from_uri(str(tmp_path / "run"))
    _commit(run, 0, 0, 4, fingerprint="old")
    with pytest.raises(GatherError, match=r"rows \[0, 4\) have no prediction"):
        gather_predictions(run, 4, "new")


def test_scoring_long_text_is_every_committed_ranges_counts_summed(tmp_path):
    """An earlier attempt's ranges count too (a resume); a range committed without counts (a version
    before them) leaves the sum unknown rather than short."""
    from scorekeeper.long_text import LongTextCounts
    from scorekeeper.run_folder import IndexRange

    run = RunFolder.from_uri(str(tmp_path / "run"))
    for index, (start, end) in enumerate([(0, 3), (3, 6)]):
        rows = pa.table({"row_index": pa.array(range(start, end), pa.int64()), "id": pa.array(range(start, end), pa.int64())})
        counts = LongTextCounts(mode="chunk", max_length=8, window=6, rows_over_length=index + 1, tokens_content=10 * (index + 1),
                                tokens_scored=12 * (index + 1), tokens_dropped=index, chunks=4 + index, rows_capped=index,
                                windows_per_row={"1": 2 - index, "2": 1 + index})  # fmt: skip
        commit_shard(run, IndexRange(index, start, end), prediction_table(rows, np.full((3, 2), 0.5), ["a", "b"]),
                     scoring_fingerprint="fp", attempt=f"attempt{index}", tokens=1, truncated=0, long_text=counts)  # fmt: skip
    assert gather_predictions(run, 6, "fp").long_text.as_dict() == {
        "mode": "chunk", "max_length": 8, "window": 6, "rows_over_length": 3, "tokens_content": 30, "tokens_scored": 36,
        "tokens_dropped": 1, "chunks": 9, "rows_capped": 1, "windows_per_row": {"1": 3, "2": 3},
    }  # fmt: skip
    _commit(run, 2, 6, 8)  # without counts
    assert gather_predictions(run, 8, "fp").long_text is None


def test_a_missing_or_damaged_shard_heals_on_the_rerun(tmp_path, caplog):
    """A commit record whose shard is missing (or of another size) is withdrawn by the plan and its
    range scored again, said in one line; one whose shard fails its checksum is withdrawn by the
    gather, which says to rerun; the rerun's plan lists that range as pending."""
    from scorekeeper.tasks.plan import usable_commits

    run = RunFolder.from_uri(str(tmp_path / "run"))
    for index in range(4):
        _commit(run, index, 3 * index, 3 * index + 3)
    assert sorted(usable_commits(run, "fp")) == [0, 1, 2, 3]
    record = CommitRecord.from_bytes(run.read_bytes(RunFolder.commit_name(1)))
    assert record.shard_bytes == len(run.read_bytes(record.shard)) and record.shard_sha256
    run.remove(record.shard)  # the missing shard of the operator's report
    shard_2 = CommitRecord.from_bytes(run.read_bytes(RunFolder.commit_name(2))).shard
    run.publish_bytes(run.read_bytes(shard_2) + b"\0", shard_2)  # another size
    with caplog.at_level("WARNING"):
        assert sorted(usable_commits(run, "fp")) == [0, 3]
    lines = [r.getMessage() for r in caplog.records if "withdrawn" in r.getMessage()]
    assert len(lines) == 2 and "range 1 [3, 6) was committed but its shard work/shards/range-0000001-t.parquet is missing" in lines[0]
    assert "has " in lines[1] and "its commit record says" in lines[1]
    assert not run.exists(RunFolder.commit_name(1)) and not run.exists(RunFolder.commit_name(2))
    _commit(run, 1, 3, 6)  # the rerun scores them again: the exclusive create succeeds
    _commit(run, 2, 6, 9)
    assert gather_predictions(run, 12, "fp").rows == 12

    shard_3 = CommitRecord.from_bytes(run.read_bytes(RunFolder.commit_name(3))).shard
    data = bytearray(run.read_bytes(shard_3))
    data[len(data) // 2] ^= 0xFF  # same size, other bytes
    run.publish_bytes(bytes(data), shard_3)
    with pytest.raises(GatherError, match=r"range 3 \[9, 12\): its shard .*sha256 differs.*rerun with the same run name"):
        gather_predictions(run, 12, "fp")
    assert sorted(usable_commits(run, "fp")) == [0, 1, 2]  # range 3 is pending again


def _commit_with_parts(run: RunFolder, index: int, start: int, end: int, sampled: list[int], words: dict[int, int]) -> None:
    """A range committed as the worker commits it: its shard, its sampled rows' embeddings, its token counts."""
    from scorekeeper.representation import TOKEN_COUNTS_SCHEMA, embeddings_table
    from scorekeeper.run_folder import IndexRange

    rows = pa.table({"row_index": pa.array(range(start, end), pa.int64()), "id": pa.array([f"r{i}" for i in range(start, end)])})
    vectors = np.array([[i, -i, 0.5] for i in sampled], dtype=np.float32)
    embeddings = embeddings_table(np.array(sampled), pa.array([f"r{i}" for i in sampled]), vectors) if sampled else None
    ids = sorted(words)
    counts = pa.Table.from_arrays(
        [pa.array(ids, pa.int64()), pa.array([f"t{i}" for i in ids]), pa.array([words[i] for i in ids], pa.int64())],
        schema=TOKEN_COUNTS_SCHEMA,
    )
    assert commit_shard(
        run, IndexRange(index, start, end), prediction_table(rows, np.full((end - start, 2), 0.5), ["a", "b"]),
        scoring_fingerprint="fp", attempt="t", tokens=1, truncated=0, embeddings=embeddings, token_counts=counts,
    )  # fmt: skip


def test_the_gather_joins_the_ranges_embeddings_and_sums_their_token_counts(tmp_path):
    import pyarrow.parquet as pq

    run = RunFolder.from_uri(str(tmp_path / "run"))
    _commit_with_parts(run, 1, 4, 8, [5, 7], {2: 3, 9: 1})
    _commit_with_parts(run, 0, 0, 4, [], {2: 1, 5: 4})
    _commit_with_parts(run, 2, 8, 10, [8], {9: 2})
    gathered = gather_predictions(run, 10, "fp")
    assert (gathered.embeddings, gathered.token_counts) == (3, 3)
    embeddings = pq.read_table(tmp_path / "run" / RunFolder.EMBEDDINGS)
    assert embeddings.column("row_index").to_pylist() == [5, 7, 8] and embeddings.column("id").to_pylist() == ["r5", "r7", "r8"]
    assert embeddings.column("embedding").to_pylist() == [[5.0, -5.0, 0.5], [7.0, -7.0, 0.5], [8.0, -8.0, 0.5]]
    words = pq.read_table(tmp_path / "run" / RunFolder.TOKEN_COUNTS_WORK).to_pydict()
    assert words == {"token_id": [2, 5, 9], "token": ["t2", "t5", "t9"], "count": [4, 4, 3]}


def test_a_changed_or_missing_part_withdraws_its_range(tmp_path):
    from scorekeeper.tasks.plan import usable_commits

    run = RunFolder.from_uri(str(tmp_path / "run"))
    _commit_with_parts(run, 0, 0, 4, [1, 2], {3: 2})
    _commit_with_parts(run, 1, 4, 8, [6], {3: 1})
    record = CommitRecord.from_bytes(run.read_bytes(RunFolder.commit_name(1)))
    assert record.embeddings is not None and record.embeddings.rows == 1
    path = tmp_path / "run" / record.embeddings.name
    data = bytearray(path.read_bytes())
    data[-12] ^= 1  # same size, other bytes: only the checksum tells
    path.write_bytes(bytes(data))
    with pytest.raises(GatherError, match=r"range 1 \[4, 8\): its file .*embeddings.parquet is not the file its commit record vouches for"):
        gather_predictions(run, 8, "fp")
    assert not run.exists(RunFolder.commit_name(1))  # withdrawn: a rerun scores the range again
    first = CommitRecord.from_bytes(run.read_bytes(RunFolder.commit_name(0)))
    assert first.token_counts is not None
    (tmp_path / "run" / first.token_counts.name).unlink()
    assert usable_commits(run, "fp") == {}  # its token counts are gone: the range is scored again


def test_a_range_committed_before_the_parts_leaves_them_out(tmp_path):
    run = RunFolder.from_uri(str(tmp_path / "run"))
    _commit_with_parts(run, 0, 0, 4, [1], {3: 2})
    _commit(run, 1, 4, 8)  # as an earlier version committed: no token counts, no embeddings
    gathered = gather_predictions(run, 8, "fp")
    assert gathered.rows == 8 and gathered.embeddings is None and gathered.token_counts is None
    assert not run.exists(RunFolder.EMBEDDINGS) and not run.exists(RunFolder.TOKEN_COUNTS_WORK)
