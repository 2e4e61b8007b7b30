"""Pipeline mode: the model's layers split into stages, micro-batches flowing through them.

P = D x S processes run D pipelines of S stages (rank r is stage r % S of pipeline r // S). In
each pipeline:

* the first stage claims ranges (one counter for all pipelines, as in replica mode), reads,
  tokenises and cuts them into exactly the batches replica mode would score, and tells the other
  stages of its pipeline what is coming: one small broadcast per range carrying each batch's
  (rows, width) and its rows' positions. Nothing else needs to reach them: a stage's input shape
  is fixed by (rows, width), and the last stage reads the range's ids from the staged input itself;
* every batch is one step of a GPipe schedule over M micro-batches. Micro-batch shapes must be
  fixed per step, so the batch's rows are padded up to a multiple of M with copies of its first
  row, and the copies are cut off the last stage's logits before anything is written;
* the last stage turns logits into the range's prediction table and commits its shard.

An empty header ends the pipeline. Every stage then shares its busy and step time, and the last
stage emits one `pipeline` event with the stage boundaries and the measured bubble.
"""

from __future__ import annotations

import gc
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from scorekeeper.boundary import Job, PipelineReport
from scorekeeper.errors import InputError
from scorekeeper.long_text import LongTextCounts
from scorekeeper.representation import embedding_sample
from scorekeeper.run_folder import IndexRange, RunFolder
from scorekeeper.worker.embeddings import RangeSample, token_counts_table
from scorekeeper.worker.model import LoadedModel
from scorekeeper.worker.outputs import HeadOutputs, activate
from scorekeeper.worker.replica import PreparedRange, prepare_ranges
from scorekeeper.worker.runtime import Ranks, emit, prefetch
from scorekeeper.worker.shards import RangeCommits, StagedInput
from scorekeeper.worker.stages import DecoderStage, EncoderStage, build_stage
from scorekeeper.worker.windows import RowLengths, aggregate, with_lengths

log = logging.getLogger(__name__)

SCHEDULE = "GPipe"
# Stages and schedules kept per micro-batch shape. Each holds receive buffers for one batch's
# activations, so the cache is small; building a new one costs a two-message warm-up, not a forward.
SCHEDULE_CACHE = 4


@dataclass(frozen=True)
class Layout:
    """Where this process sits: pipeline `pipeline` of `pipelines`, stage `stage` of `stages`."""

    world: int
    stages: int
    pipeline: int
    stage: int

    @property
    def pipelines(self) -> int:
        return self.world // self.stages

    @property
    def ranks(self) -> list[int]:
        """Global ranks of this pipeline's stages, in stage order."""
        return list(range(self.pipeline * self.stages, (self.pipeline + 1) * self.stages))

    @property
    def is_first(self) -> bool:
        return self.stage == 0

    @property
    def is_last(self) -> bool:
        return self.stage == self.stages - 1


def plan_layout(world: int, rank: int, requested_stages: int | None) -> Layout:
    """Stages per pipeline (default: all processes, one pipeline) and this rank's place."""
    stages = requested_stages or world
    if stages > world:
        raise InputError(f"pipeline_stages={stages} needs at least {stages} processes, but {world} were launched")
    if world % stages:
        raise InputError(
            f"{world} processes cannot form pipelines of {stages} stages: num_processes must be a multiple "
            f"of pipeline_stages (e.g. {stages * max(1, world // stages)} or {stages * (world // stages + 1)})"
        )
    return Layout(world=world, stages=stages, pipeline=rank // stages, stage=rank % stages)


def pipeline_groups(layout: Layout) -> dist.ProcessGroup | None:
    """This pipeline's process group. Every rank creates every group, in the same order, as
    new_group requires; with one pipeline the default group is the pipeline's, and a one-stage
    pipeline talks to no one."""
    if layout.pipelines == 1 or layout.stages == 1:
        return None
    mine = None
    for d in range(layout.pipelines):
        group = dist.new_group(list(range(d * layout.stages, (d + 1) * layout.stages)))
        if d == layout.pipeline:
            mine = group
    return mine


# -- what the first stage tells the others about a range ---------------------------------------


@dataclass
class RangeWork:
    """A range as every stage of a pipeline sees it: its batches' shapes and windows' positions,
    and its rows' lengths (the last stage aggregates each row's windows and writes the lengths).

    The first stage also has the collated batches (`prepared`); the others have only the shapes.
    """

    range: IndexRange
    truncated: int
    useful_tokens: int
    padded_tokens: int
    shapes: list[tuple[int, int]]  # (rows, width) per batch
    positions: list[np.ndarray]  # window positions inside the range, per batch
    lengths: RowLengths
    prepared: PreparedRange | None = None

    @property
    def windows(self) -> int:
        return int(self.lengths.chunks.sum())

    @classmethod
    def from_prepared(cls, prepared: PreparedRange) -> RangeWork:
        batches = prepared.batches
        return cls(
            range=prepared.range,
            truncated=prepared.truncated,
            useful_tokens=sum(b.useful_tokens for b in batches),
            padded_tokens=sum(b.padded_tokens for b in batches),
            shapes=[(len(b.positions), int(b.input_ids.shape[1])) for b in batches],
            positions=[np.asarray(b.positions, dtype=np.int64) for b in batches],
            lengths=prepared.rows_lengths,
            prepared=prepared,
        )

    def header(self) -> np.ndarray:
        r, counts = self.range, self.lengths.counts
        fixed = [r.index, r.start, r.end, self.truncated, self.useful_tokens, self.padded_tokens, len(self.shapes)]
        rows = [s[0] for s in self.shapes]
        widths = [s[1] for s in self.shapes]
        per_row = [self.lengths.tokens, self.lengths.unknown, self.lengths.chunks]
        words = [np.asarray([len(self.lengths.token_ids)], dtype=np.int64), self.lengths.token_ids, self.lengths.token_counts]
        return np.concatenate(
            [np.asarray(fixed + rows + widths, dtype=np.int64), *self.positions, *(a.astype(np.int64) for a in per_row + words)]
            + [np.frombuffer(counts.model_dump_json().encode(), dtype=np.uint8).astype(np.int64)]
        )

    @classmethod
    def from_header(cls, header: np.ndarray) -> RangeWork:
        index, start, end, truncated, useful, padded, count = (int(x) for x in header[:7])
        rows = header[7 : 7 + count].tolist()
        widths = header[7 + count : 7 + 2 * count].tolist()
        cuts = np.cumsum([0, *rows])
        flat = header[7 + 2 * count :]
        n = end - start
        per_row = flat[cuts[-1] :]
        tokens, unknown, chunks = (per_row[k * n : (k + 1) * n].copy() for k in range(3))
        m = int(per_row[3 * n])  # distinct content tokens of the range, then their ids and counts
        token_ids, token_counts = per_row[3 * n + 1 : 3 * n + 1 + m].copy(), per_row[3 * n + 1 + m : 3 * n + 1 + 2 * m].copy()
        counts = LongTextCounts.model_validate_json(per_row[3 * n + 1 + 2 * m :].astype(np.uint8).tobytes())
        return cls(
            range=IndexRange(index, start, end),
            truncated=truncated,
            useful_tokens=useful,
            padded_tokens=padded,
            shapes=list(zip(rows, widths)),
            positions=[flat[cuts[k] : cuts[k + 1]].copy() for k in range(count)],
            lengths=RowLengths(tokens, unknown, chunks, counts, token_ids, token_counts),
        )


def send_header(header: np.ndarray | None, layout: Layout, group, device: torch.device) -> None:
    """First stage: broadcast a range's header to its pipeline; None (length 0) means no more."""
    payload = torch.from_numpy(header if header is not None else np.zeros(0, dtype=np.int64)).to(device)
    size = torch.tensor([payload.numel()], dtype=torch.int64, device=device)
    dist.broadcast(size, src=layout.ranks[0], group=group)
    if payload.numel():
        dist.broadcast(payload, src=layout.ranks[0], group=group)


def receive_header(layout: Layout, group, device: torch.device) -> np.ndarray | None:
    size = torch.zeros(1, dtype=torch.int64, device=device)
    dist.broadcast(size, src=layout.ranks[0], group=group)
    if int(size.item()) == 0:
        return None
    payload = torch.empty(int(size.item()), dtype=torch.int64, device=device)
    dist.broadcast(payload, src=layout.ranks[0], group=group)
    return payload.cpu().numpy()


def pipeline_ranges(job: Job, ranks: Ranks, layout: Layout, group, loaded: LoadedModel, staged: StagedInput | None) -> Iterator[RangeWork]:
    """The ranges this pipeline scores, on every stage of it, ending on every stage together."""
    if not layout.is_first:
        while (header := receive_header(layout, group, ranks.device)) is not None:
            yield RangeWork.from_header(header)
        return
    assert staged is not None, "the first stage reads the staged input"
    for prepared in prefetch(prepare_ranges(job, ranks, staged, loaded), depth=2):
        work = RangeWork.from_prepared(prepared)
        if layout.stages > 1:
            send_header(work.header(), layout, group, ranks.device)
        yield work
    # Only a normal end says so: after a failure the launcher stops the whole job instead.
    if layout.stages > 1:
        send_header(None, layout, group, ranks.device)


# -- running a batch through the schedule ------------------------------------------------------


class TimedStage(nn.Module):
    """The stage module, timing its own forward calls: the busy time the bubble is measured against."""

    def __init__(self, inner: nn.Module, device: torch.device):
        super().__init__()
        self.inner = inner
        self.on_cuda = device.type == "cuda"  # not `cuda`: that is nn.Module's method moving it to a GPU
        self.busy = 0.0
        self._events: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []

    def forward(self, *inputs):
        if self.on_cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = self.inner(*inputs)
            end.record()
            self._events.append((start, end))
            return out
        began = time.perf_counter()
        out = self.inner(*inputs)
        self.busy += time.perf_counter() - began
        return out

    def settle(self) -> None:
        """Fold recorded CUDA event pairs into `busy` (call after a synchronize)."""
        self.busy += sum(s.elapsed_time(e) for s, e in self._events) / 1000.0
        self._events.clear()


@dataclass
class StepStats:
    steps: int = 0
    wall: float = 0.0
    dummy_rows: int = 0
    short_steps: int = 0  # batches with fewer rows than micro-batches, run with fewer micro-batches
    schedules_built: int = 0  # stage + schedule objects made (the rest came from the shape cache)


class StageRunner:
    """This process's stage of one pipeline: runs each batch as one schedule step."""

    def __init__(
        self, module: EncoderStage | DecoderStage, layout: Layout, group, device: torch.device, dtype: torch.dtype, microbatches: int
    ):
        self.timed = TimedStage(module, device)
        self.module = module
        self.layout = layout
        self.group = group
        self.device = device
        self.dtype = dtype
        self.microbatches = microbatches
        self.stats = StepStats()
        self._schedules: OrderedDict[tuple, object] = OrderedDict()

    def _schedule(self, count: int, rows: int, width: int, first_inputs: int):
        """A stage + GPipe schedule for `count` micro-batches of (rows, width). Every stage of the
        pipeline asks for the same keys in the same order, so caches and warm-ups stay in step."""
        from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

        key = (count, rows, width, first_inputs)
        schedule = self._schedules.get(key)
        if schedule is not None:
            self._schedules.move_to_end(key)
            return schedule
        meta = lambda shape, dtype: torch.empty(shape, dtype=dtype, device="meta")  # noqa: E731
        if self.layout.is_first:
            inputs = tuple(meta((rows, width), torch.int64) for _ in range(first_inputs))
        else:  # what the previous stage sends: every non-last stage of a family sends the same kinds
            inputs = tuple(meta(s, d) for s, d in self.module.sent(rows, width, self.dtype))
        if self.layout.is_last:  # the logits, and the head's input beside them when the representation is kept
            columns = self.num_labels + (self.module.hidden_size if self.module.with_representation else 0)
            outputs: tuple[torch.Tensor, ...] = (meta((rows, columns), self.dtype),)
        else:
            outputs = tuple(meta(s, d) for s, d in self.module.sent(rows, width, self.dtype))
        stage = PipelineStage(
            self.timed, self.layout.stage, self.layout.stages, self.device,
            input_args=inputs, output_args=outputs, group=self.group,
        )  # fmt: skip
        schedule = ScheduleGPipe(stage, n_microbatches=count)
        self.stats.schedules_built += 1
        self._schedules[key] = schedule
        if len(self._schedules) > SCHEDULE_CACHE:
            self._schedules.popitem(last=False)
        return schedule

    @property
    def num_labels(self) -> int:
        return int(self.module.config.num_labels)

    @torch.inference_mode()
    def run(self, rows: int, width: int, inputs: tuple[torch.Tensor, ...] | None) -> torch.Tensor | None:
        """One batch through the pipeline; the last stage gets its logits (padding rows removed)."""
        count = min(self.microbatches, rows)
        per_micro = math.ceil(rows / count)
        padded = count * per_micro
        args: tuple[torch.Tensor, ...] = ()
        if inputs is not None:
            args = tuple(t.to(self.device, non_blocking=True) for t in inputs)
            if padded > rows:  # copies of the first row: fixed micro-batch shapes, dropped below
                fill = torch.cat([torch.arange(rows), torch.zeros(padded - rows, dtype=torch.int64)]).to(self.device)
                args = tuple(t.index_select(0, fill) for t in args)
        began = time.perf_counter()
        if self.layout.stages == 1:  # GPipe without peers: the micro-batches in turn, no process group needed
            out = torch.cat([self.timed(*chunk) for chunk in zip(*(t.tensor_split(count) for t in args))])
        else:
            out = self._schedule(count, per_micro, width, len(args)).step(*args)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.timed.settle()
        self.stats.wall += time.perf_counter() - began
        self.stats.steps += 1
        self.stats.dummy_rows += padded - rows
        self.stats.short_steps += count < self.microbatches
        return out[:rows] if self.layout.is_last else None


# -- the runner --------------------------------------------------------------------------------


def stage_of(loaded: LoadedModel, stage: int, stages: int) -> tuple[EncoderStage | DecoderStage, list[tuple[int, int]]]:
    """The loaded model's pipeline stage `stage` of `stages` (stages.build_stage), and every stage's
    layer range. A decoder without a pad id of its own reads each row's last position, as replica
    mode's LastPositionLogits does; the stages find it themselves, so that hook is removed."""
    module, bounds = build_stage(loaded.model, stage, stages)
    if isinstance(module, DecoderStage):
        module.pad_token_id = loaded.model_pad_token_id
    if loaded.last_position is not None:
        loaded.last_position.remove()
        loaded.last_position = None
    return module, bounds


def run_pipeline(job: Job, ranks: Ranks, run: RunFolder, loaded: LoadedModel) -> None:
    settings = job.scoring
    layout = plan_layout(ranks.world, ranks.rank, settings.pipeline_stages)
    dtype = next(loaded.model.parameters()).dtype
    module, bounds = stage_of(loaded, layout.stage, layout.stages)
    # Keep only this stage's modules. The whole model was loaded first (simple, but the peak
    # memory of each process is the whole model's); dropping it here frees the other stages'.
    del loaded.model
    gc.collect()
    if ranks.device.type == "cuda":
        torch.cuda.empty_cache()
    if ranks.is_main:
        log.info(
            "pipeline mode: %d pipeline(s) of %d stages, layers %s, %d micro-batches",
            layout.pipelines,
            layout.stages,
            bounds,
            settings.microbatches,
        )
    module.with_representation = layout.is_last and settings.embedding_rows > 0
    group = pipeline_groups(layout)
    runner = StageRunner(module, layout, group, ranks.device, dtype, settings.microbatches)
    staged = StagedInput(run) if layout.is_first or layout.is_last else None
    outputs = HeadOutputs.of(loaded.head, loaded.labels, settings.thresholds)
    with RangeCommits(run, job, ranks.rank, attempt=f"{job.attempt}-p{layout.pipeline}") as commits:
        for work in pipeline_ranges(job, ranks, layout, group, loaded, staged):
            batches = work.prepared.batches if work.prepared is not None else None
            windowed = work.windows != work.range.rows  # a row of several windows: raw outputs, aggregated below
            probabilities = np.empty((work.windows, len(loaded.labels)), dtype=np.float64) if layout.is_last else None
            sample = representation_sample(work, settings.embedding_rows, job.total_rows) if module.with_representation else None
            for k, (rows, width) in enumerate(work.shapes):
                inputs = tuple(batches[k].model_inputs().values()) if batches is not None else None
                logits = runner.run(rows, width, inputs)
                if probabilities is not None:
                    assert logits is not None, "the last stage gets the logits"
                    if sample is not None:  # the head's input, after the logits' columns
                        logits, pooled = logits[:, : len(loaded.labels)], logits[:, len(loaded.labels) :]
                        keep = sample.keep(work.positions[k])
                        sample.add(work.positions[k][keep], pooled[torch.from_numpy(keep)].float().cpu().numpy())
                    values = logits.double() if windowed else activate(loaded.head, logits)
                    probabilities[work.positions[k]] = values.cpu().numpy()
            if layout.is_last:
                assert probabilities is not None and staged is not None, "the last stage made both"
                if windowed:
                    how = settings.chunk_aggregate
                    probabilities = activate(loaded.head, torch.from_numpy(aggregate(probabilities, work.lengths.chunks, how))).numpy()
                rows_table = work.prepared.rows if work.prepared is not None else staged.read(work.range)
                commits.submit(
                    work.range,
                    with_lengths(outputs.table(rows_table, probabilities), work.lengths, loaded.windows),
                    tokens=work.useful_tokens,
                    padded_tokens=work.padded_tokens,
                    truncated=work.truncated,
                    long_text=work.lengths.counts,
                    embeddings=sample.table(rows_table) if sample is not None else None,
                    token_counts=token_counts_table(loaded.tokenizer, work.lengths.token_ids, work.lengths.token_counts),
                )
    report_pipeline(runner, layout, group, ranks.device, bounds, settings.microbatches)


def representation_sample(work: RangeWork, embedding_rows: int, total_rows: int) -> RangeSample:
    """The range's rows whose representation is kept (the last stage reads them off its output)."""
    row_index = np.arange(work.range.start, work.range.end, dtype=np.int64)
    return RangeSample.of(embedding_sample(row_index, embedding_rows, total_rows), work.lengths.chunks)


def bubble_theoretical(stages: int, microbatches: int) -> float:
    """GPipe's idle share with equal stages: (S - 1) / (M + S - 1)."""
    return (stages - 1) / (microbatches + stages - 1)


def report_pipeline(runner: StageRunner, layout: Layout, group, device: torch.device, bounds, microbatches: int) -> None:
    """Gather every stage's busy and step time; the last stage emits the pipeline's one event.

    The measured bubble is the share of step time the stages spent not computing, pooled over
    stages: 1 - sum(busy) / sum(step time). It includes communication and stage imbalance.
    """
    mine = torch.tensor([runner.timed.busy, runner.stats.wall], dtype=torch.float64, device=device)
    if layout.stages > 1:
        gathered = [torch.zeros_like(mine) for _ in range(layout.stages)]
        dist.all_gather(gathered, mine, group=group)
    else:
        gathered = [mine]
    if not layout.is_last:
        return
    busy = [float(t[0]) for t in gathered]
    wall = [float(t[1]) for t in gathered]
    measured = 1.0 - sum(busy) / sum(wall) if sum(wall) > 0 else None
    emit(
        PipelineReport(
            pipeline=layout.pipeline,
            ranks=layout.ranks,
            stages=[list(b) for b in bounds],
            microbatches=microbatches,
            schedule=SCHEDULE,
            steps=runner.stats.steps,
            short_steps=runner.stats.short_steps,
            dummy_rows=runner.stats.dummy_rows,
            schedules_built=runner.stats.schedules_built,
            stage_busy_s=[round(b, 6) for b in busy],
            stage_step_s=[round(w, 6) for w in wall],
            bubble_measured=None if measured is None else round(measured, 6),
            bubble_theoretical=round(bubble_theoretical(layout.stages, microbatches), 6),
        )
    )
