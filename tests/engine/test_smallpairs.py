"""Small pairs compared as a group (pairjob.run_small: one kernel call for the group, the cells as
columns by metrics.fused_columns) give exactly the cells of the per-pair path (run_job), bit for
bit, whatever the data: NaN/inf, zeros on either side, scalars, empty and mismatched tensors, every
dtype (those the group takes and those it leaves to run_job), any --algorithms, either loops."""
from __future__ import annotations

import math

import numpy as np
import pytest

import accuscope.engine.compare.metrics as M
from accuscope.engine.compare import comparison as engine
from accuscope.engine.compare import pairjob, runners
from accuscope.engine.compare.columns import ALGORITHMS
from accuscope.engine.compare.pairjob import Job, run_job, run_small
from accuscope.engine.compare.results import ResultTable
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.sources.npyfile import held_data, npy_file_tensor, read_npy_file
from accuscope.engine.sources.tensor import Tensor
from support.kernel import needs_kernel

DTYPES = ("float32", "float16", "int8", "uint8", "int16", "uint16", ">f4", "float64", "int32", "bool")


def tensor(name: str, data: np.ndarray) -> Tensor:
    return Tensor(op=name, io="output", index=0, dtype=data.dtype, shape=data.shape, source=f"{name}.npy",
                  dtype_name=data.dtype.name, reader=lambda: data)


def values(rng: np.random.Generator, kind: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A golden side and an NPU side of n elements, in one of the shapes data take."""
    y = rng.standard_normal(n) * 10 ** rng.uniform(-3, 3)
    x = y + rng.standard_normal(n) * 10 ** rng.uniform(-6, 0)
    if kind == 1:  # a ReLU output: zeros on both sides
        x, y = np.maximum(x, 0), np.maximum(y, 0)
    elif kind == 2:  # one side all zero
        (x if rng.random() < 0.5 else y)[:] = 0
    elif kind == 3:  # both sides zero
        x[:], y[:] = 0, 0
    elif kind == 4 and n:  # NaN/inf, at the same places or not
        at = rng.integers(0, n, 2)
        x[at] = rng.choice([np.nan, np.inf, -np.inf])
        if rng.random() < 0.5:
            y[at] = x[at]
    elif kind == 5:  # identical
        x = y.copy()
    elif kind == 6:  # constant sides
        x[:], y[:] = 3.0, 3.0
    elif kind == 7:  # close: within allclose's rtol 1e-3
        x = y * (1 + 1e-5)
    return x, y


def random_pairs(seed: int, count: int) -> list[tuple[Tensor, Tensor]]:
    rng = np.random.default_rng(seed)
    pairs = []
    for k in range(count):
        n = int(rng.choice([0, 1, 2, 3, 16, 17, 100, 1000]))
        x, y = values(rng, int(rng.integers(0, 8)), n)
        dx = dy = str(rng.choice(DTYPES[:7])) if rng.random() < 0.8 else None
        if dx is None:
            dx, dy = rng.choice(DTYPES, 2)
        shape_x: tuple[int, ...] = (n,)
        shape_y = shape_x
        if n == 16 and rng.random() < 0.3:
            shape_x, shape_y = (4, 4), (2, 8)  # the same size, other shapes: compared flat
        if n and rng.random() < 0.05:
            y = y[:-1]  # sizes differ
            shape_y = (n - 1,)
        with np.errstate(invalid="ignore", over="ignore"):  # NaN/inf cast to ints: whatever they become
            cast_x = np.asarray(x * (100 if np.dtype(dx).kind in "iu" else 1)).astype(dx)
            cast_y = np.asarray(y * (100 if np.dtype(dy).kind in "iu" else 1)).astype(dy)
        pairs.append((tensor(f"op{k}", cast_x.reshape(shape_x)), tensor(f"op{k}", cast_y.reshape(shape_y))))
    return pairs


def same_cells(fast: list[tuple[int, dict]], slow: list[tuple[int, dict]]) -> None:
    assert [r for r, _ in fast] == [r for r, _ in slow]
    for (row, a), (_, b) in zip(fast, slow):
        assert list(a) == list(b), row
        for key, value in b.items():
            got = a[key]
            assert type(got) is type(value), (row, key)
            if isinstance(value, float):  # bit for bit, NaN included
                assert got == value or (math.isnan(got) and math.isnan(value)), (row, key, got, value)
            else:
                assert got == value, (row, key, got, value)


@needs_kernel
@pytest.mark.parametrize("metrics", [tuple(ALGORITHMS), ("cos", "red"), ("kl", "max_abs"), ("std",)])
def test_a_group_gives_the_cells_of_the_per_pair_path(loops, metrics, monkeypatch):
    grouped: list[int] = []

    def fused_columns(sums, n, kl):
        grouped.append(len(n))
        return M.fused_columns(sums, n, kl)
    monkeypatch.setattr(pairjob, "fused_columns", fused_columns)
    for seed in range(2):
        jobs = [Job(k, x, y, metrics) for k, (x, y) in enumerate(random_pairs(seed, 250))]
        same_cells(run_small(jobs), [run_job(j) for j in jobs])
    assert sum(grouped) > 250  # most pairs went through the group


@needs_kernel
def test_tiny_npy_files_are_grouped_from_the_bytes_their_listing_read(tmp_path):
    rng = np.random.default_rng(5)
    jobs = []
    for k in range(200):
        n = int(rng.choice([1, 5, 16, 64]))
        x, y = values(rng, k % 8, n)
        sides = []
        for side, data in (("npu", x), ("golden", y)):
            path = tmp_path / f"{side}{k}.npy"
            np.save(path, np.asarray(data, dtype="float32" if k % 5 else "float16"))
            meta, offset, held = read_npy_file(str(path), keep=True)
            sides.append(npy_file_tensor(f"op{k}", str(path), meta, offset, held))
        assert held_data(sides[0]) is not None
        jobs.append(Job(k, sides[0], sides[1], tuple(ALGORITHMS)))
    same_cells(run_small(jobs), [run_job(j) for j in jobs])


@needs_kernel
def test_a_comparison_of_small_pairs_makes_the_table_of_the_per_pair_path(tmp_path, monkeypatch):
    rng = np.random.default_rng(7)
    for side in ("npu", "golden"):
        (tmp_path / side).mkdir()
    for k in range(400):
        x, y = values(rng, k % 8, int(rng.choice([1, 16, 50])))
        name = f"op_{k:04d}.0.{1700000000000000 + k}.npy"
        np.save(tmp_path / "npu" / name, x.astype(np.float32))
        if k % 50 == 7:  # a broken golden file: the row says so
            (tmp_path / "golden" / name).write_bytes(b"\x93NUMPY broken")
        elif k % 50 != 9:  # (9: no golden file at all)
            np.save(tmp_path / "golden" / name, y.astype(np.float32 if k % 3 else np.float16))
    spec = CompareSpec(str(tmp_path / "npu"), str(tmp_path / "golden"))
    tables = {}
    for how in ("group", "per pair"):
        if how == "per pair":  # run_job a pair, the table from merged_row's rows
            monkeypatch.setattr(runners, "run_small", lambda jobs: [run_job(j) for j in jobs])
            monkeypatch.setattr(engine, "_table", lambda plan, computed, third: ResultTable.from_rows(
                [{**engine.merged_row(plan, i, c), **third.get(i, {})} for i, c in enumerate(computed)],
                custom=[p.name for p in plan.plugins]))
        tables[how] = engine.execute(engine.plan(spec), workers=2)
    group, per_pair = tables["group"], tables["per pair"]
    assert group is not None
    assert per_pair is not None
    assert list(group.columns) == list(per_pair.columns) and group.present == per_pair.present
    assert any(r.startswith("golden ") for r in group.columns["reason"].tolist())
    assert per_pair is not None
    for key, column in per_pair.columns.items():
        got = group.columns[key]
        if column.dtype.kind == "f":
            assert np.array_equal(got.view(np.int64), column.view(np.int64)), key
        else:
            assert got.tolist() == column.tolist(), key


def test_the_objects_of_a_row_built_without_setattr_are_the_dataclasses_own():
    """A row's Tensor (tensor.file_tensor, recorded_tensor), Pair and Job are made without the frozen
    dataclass's __init__: the same fields, defaults, equality, replace(), pickling and frozenness."""
    import dataclasses
    import pickle

    from accuscope.engine.compare.pair import Pair
    from accuscope.engine.sources.oprecord import OpRecord
    from accuscope.engine.sources.tensor import file_tensor, recorded_tensor

    def fields(t: Tensor) -> list:  # (a Tensor is equal to itself alone: eq=False)
        return [getattr(t, f.name) for f in dataclasses.fields(Tensor)]

    f32 = np.dtype(np.float32)
    built = file_tensor("op", "output", 1, f32, (2, 3), "op.npy", "float32", None, None, 7)  # type: ignore[arg-type]  # no reader: fields only
    assert fields(built) == fields(Tensor(op="op", io="output", index=1, dtype=f32, shape=(2, 3), source="op.npy",
                                          dtype_name="float32", timestamp=7))
    stats = (1.0, 0.0, 0.5, None)
    recorded = recorded_tensor("op", "input", 0, (4,), "dump.json", "Add", "float16", "t", stats, "ab", "why")
    assert fields(recorded) == fields(Tensor(op="op", io="input", index=0, dtype=None, shape=(4,), source="dump.json",
                                             op_type="Add", dtype_name="float16", tensor_name="t", stats=stats,
                                             checksum="ab", problem="why"))
    op = OpRecord(path="op.npy", name=None, op_name="op")
    for cls, given in ((Pair, (built, recorded, op, "op", "name")), (Job, (3, built, recorded, ("cos",)))):
        made = cls(*given)
        names = [f.name for f in dataclasses.fields(cls)]
        assert vars(made) == {**{f.name: f.default for f in dataclasses.fields(cls)}, **dict(zip(names, given))}
        assert made == cls(*given) and repr(made).startswith(cls.__name__)
        assert repr(pickle.loads(pickle.dumps(made))) == repr(made)  # (new tensors: equal to themselves alone)
        changed = dataclasses.replace(made, **{names[-1]: made})  # type: ignore[arg-type]  # any value: identity is checked
        assert getattr(changed, names[-1]) is made and changed != made
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.npu = recorded


def test_a_pair_larger_than_a_group_runs_through_run_job(monkeypatch):
    """A pair over GROUP_ELEMENTS is a group of its own: run_job's chunked reads compare it, not the group's
    whole load (a mapped file, faulted in 4 KB at a time where the kernel maps no more around a fault:
    250k page faults and 10x the system time on 1 GB of such pairs)."""
    rng = np.random.default_rng(5)
    big = rng.standard_normal(pairjob.GROUP_ELEMENTS + 1).astype(np.float32)
    small = big[:16].copy()
    jobs = [Job(0, tensor("a", small), tensor("a", small + 1), tuple(ALGORITHMS)),
            Job(1, tensor("b", big), tensor("b", big + 1), tuple(ALGORITHMS))]
    ran: list[int] = []
    real = pairjob.run_job

    def run_job(job):
        ran.append(job.row)
        return real(job)
    monkeypatch.setattr(pairjob, "run_job", run_job)
    cells = dict(run_small(jobs))
    assert ran == [1] and set(cells) == {0, 1} and cells[1] == real(jobs[1])[1]
