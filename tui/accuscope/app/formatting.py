"""Cell text for the operator table: numbers, names, tensor slots, dtypes; no styling.

Everything here works on one value at a time: the table formats only the rows on screen, so a
frame costs a few hundred calls whatever the size of the result.
"""
from __future__ import annotations

import math

from rich.cells import cell_len, chop_cells

from ..engine.sources.names import parse_tensor_name, printable

ELLIPSIS = "…"


def shown(text: object) -> str:
    """Text from data (names, paths, errors) for a markup string: control characters as `?`, every
    `[` escaped (textual's markup reads `[2J` as a tag, which rich's escape() leaves alone), and a
    trailing backslash kept from escaping the markup that follows (a zero-width space after it)."""
    text = printable(str(text)).replace("[", "\\[")
    return text + "\u200b" if text.endswith("\\") else text


def number(value: float, width: int = 9, toward: int = 0) -> str:
    """A metric value in at most `width` cells with as many significant digits as fit (up to 6).

    Small and large values switch to scientific notation (3e-06, 1.5e+07), never to 0.00;
    NaN and infinities stay visible as nan, inf and -inf. `toward` -1 / +1 rounds down / up
    instead of to nearest: a failing cos of 0.98999996 shows 0.989999, not 0.99 (which would
    seem to pass a cos < 0.99 threshold).
    """
    if value != value:
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value == 0:
        return "0"
    for digits in (6, 5, 4, 3, 2, 1):
        text = f"{value:.{digits}g}"
        if toward:
            text = _directed(value, text, digits, toward)
        if len(text) <= width:
            return text
    return text


def _directed(value: float, text: str, digits: int, toward: int) -> str:
    shown = float(text)
    if (toward < 0 and shown <= value) or (toward > 0 and shown >= value):
        return text
    step = 10.0 ** (math.floor(math.log10(abs(value))) - digits + 1)
    bound = (math.floor if toward < 0 else math.ceil)(value / step) * step
    return f"{bound:.{digits}g}"


def integer(value: int) -> str:
    """An integer cell; -1 (unknown op sequence / count) is shown empty."""
    return "" if value < 0 else str(value)


def count(value: int) -> str:
    """A row count with thousands separators: 18,204."""
    return f"{value:,}"


def fit(text: str, width: int, keep: str = "start") -> str:
    """`text` cut to `width` cells with an ellipsis where it was cut.

    keep="start" cuts the end (reasons, shapes); keep="end" cuts the beginning, for operator names
    whose last path component is the part that tells them apart (…/attention/query/MatMul).
    Control characters show as `?` (names come from data: never send their escapes to a terminal).
    """
    if width <= 0:
        return ""
    text = printable(text)
    if text.isascii():
        if len(text) <= width:
            return text
        if width == 1:
            return ELLIPSIS
        return text[: width - 1] + ELLIPSIS if keep == "start" else ELLIPSIS + text[len(text) - width + 1:]
    if cell_len(text) <= width:
        return text
    if width == 1:
        return ELLIPSIS
    if keep == "start":
        return chop_cells(text, width - 1)[0] + ELLIPSIS
    tail = chop_cells(text[::-1], width - 1)[0][::-1]
    return ELLIPSIS + tail


def pad(text: str, width: int, right: bool = False) -> str:
    """`text` fitted to exactly `width` cells, aligned left or right; control characters as `?`."""
    text = printable(text)
    if text.isascii() or cell_len(text) == len(text):
        n = len(text)
        if n > width:
            return fit(text, width)
        return " " * (width - n) + text if right else text + " " * (width - n)
    text = fit(text, width)
    gap = " " * (width - cell_len(text))
    return gap + text if right else text + gap


def slot(tensor: str, io: str, param: str = "") -> str:
    """Which tensor of its operator a row compares: conv1:output:0 -> out:0, x:input:1 -> in:1; a module
    parameter or its gradient by the parameter's name (weight, bias)."""
    if param:
        return param
    named = parse_tensor_name(tensor)
    if named:
        return f"{'in' if named.io == 'input' else 'out'}:{named.index}"
    if io == "input":
        return "in"
    if io == "output":
        return "out"
    return ""


_DTYPES = {"float16": "fp16", "float32": "fp32", "float64": "fp64", "bfloat16": "bf16",
           "float": "fp32", "double": "fp64", "half": "fp16", "bool": "bool"}


def dtype(name: str) -> str:
    """Short dtype: DT_FLOAT16 / float16 -> fp16, DT_INT8 -> int8."""
    if not name or name == "NaN":
        return ""
    low = name.lower()
    if low.startswith("dt_"):
        low = low[3:]
    return _DTYPES.get(low, low)


def dtypes(npu: str, golden: str) -> str:
    """One cell for both sides: fp16 when they agree, fp16/fp32 when they differ."""
    a, b = dtype(npu), dtype(golden)
    if not b or a == b:
        return a
    if not a:
        return "/" + b
    return f"{a}/{b}"


def shape(text: str) -> str:
    """Shapes without blanks: [1, 64, 56, 56] -> [1,64,56,56]."""
    return text.replace(" ", "")
