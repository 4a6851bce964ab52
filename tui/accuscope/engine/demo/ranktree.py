"""A multi-rank pair of npy trees (ROOT/step{N}/rank{M}/*.npy on both sides) for tests and benchmarks:
the same tensors per rank, the NPU side with small noise, and large noise from tensor `bad_from` on
in the ranks of `faulty`."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def write_rank_tree(root: str | Path, ranks: int = 4, steps: int = 1, tensors: int = 8, size: int = 1000,
                    faulty: tuple[int, ...] = (), bad_from: int = 0, seed: int = 0) -> tuple[Path, Path]:
    """Returns (npu root, golden root)."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    for step in range(steps):
        for rank in range(ranks):
            folders = [root / side / f"step{step}" / f"rank{rank}" for side in ("npu", "golden")]
            for folder in folders:
                folder.mkdir(parents=True, exist_ok=True)
            for k in range(tensors):
                golden = rng.standard_normal(size).astype(np.float32)
                noise = 0.5 if rank in faulty and k >= bad_from else 1e-4
                npu = golden + noise * rng.standard_normal(size).astype(np.float32)
                name = f"Functional.linear.{k}.forward.output.0.npy"
                np.save(folders[0] / name, npu)
                np.save(folders[1] / name, golden)
    return root / "npu", root / "golden"
