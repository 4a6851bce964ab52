"""Helpers of test_metrictable.py that other tests use too."""
from __future__ import annotations

import numpy as np

from accuscope.engine.compare import expected, pairjob, polytol, statistics
from accuscope.engine.compare.columns import ALGORITHMS
from accuscope.engine.compare.metrics import compare_arrays
from accuscope.engine.sources.tensor import Tensor


def every_cell(x, y) -> dict:
    """A row holding every metric: computed from the tensors, and the recorded statistics, checksums and
    non-tensor values of a statistics dump (msprobe's), the third side's and Polygraphy's rule's (compare/polytol.py),
    and a dump tool's own figures (RKNN's "single": Tensor.reported), as a comparison of each kind fills them."""
    def recorded(v, crc):
        return Tensor("op", "output", 0, None, (), "dump.json", stats=(v.max(), v.min(), v.mean(), float(np.linalg.norm(v))),
                      checksum=crc)
    cells = pairjob.metric_cells(compare_arrays(x, y), tuple(ALGORITHMS))
    third = expected.excess_cells(cells, compare_arrays(x * 0.999, y).values)  # an expected side beside them
    return {**cells, **statistics.compare(recorded(x, "0a1b2c3d"), recorded(y, "0a1b2c3e")),
            **statistics.value_cells("1", "int", "2", "int"), **third,
            **polytol.cells(np.asarray(x), np.asarray(y), polytol.Rule(polytol.ATOL, polytol.RTOL, polytol.STAT)),
            **polytol.own_cells(polytol.Rule(1e-3, 1e-3, "max")),  # an output given values of its own
            **dict(Tensor("op", "output", 0, None, (), "snapshot", reported=(("rknn_single_cos", 0.999),
                                                                          ("rknn_single_euc", 0.1))).reported)}
