"""Why two network inputs disagree: test the usual preprocessing mistakes on the two tensors.

When the NPU side and the golden side were not fed the same data, the cause is nearly always a
preprocessing step done differently: channel order (RGB vs BGR), memory layout (HWC data in a
CHW tensor), the mean/std normalization applied twice or not at all, 0-255 versus 0-1 scale, a
different resize. Each hypothesis is a transform of the NPU tensor; the one that makes the two
tensors agree (cosine and relative Euclidean distance within the thresholds) is the diagnosis,
the simplest first (fewest steps), then the best cosine. A per-channel scale/offset is fitted by
least squares and then named (0-255 scale, missing normalization, normalization applied twice).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from accuscope.engine.compare.judgement import WHOLE_LIMITS

# (title, what to do) per step id; affine steps get their title from the fitted numbers
STEPS = {
    "channels": ("channel order reversed (RGB vs BGR)",
                 "feed the NPU the channel order the model was trained with (cv2.imread gives BGR; "
                 "check AIPP's rbuv_swap_switch)"),
    "hwc_in_chw": ("the NPU input holds HWC data in a CHW tensor",
                   "transpose the NPU input HWC -> CHW before feeding it"),
    "chw_in_hwc": ("the golden input holds HWC data in a CHW tensor",
                   "transpose the golden-side input HWC -> CHW before running the framework model"),
    "resize_nearest": ("the NPU input has another size; a nearest-neighbour resize of it matches",
                       "resize on both sides to the model's input size with the same interpolation"),
    "resize_bilinear": ("the NPU input has another size; a bilinear resize of it matches",
                        "resize on both sides to the model's input size with the same interpolation"),
    "smoother_golden": ("the golden input is smoother (bilinear/antialiased vs nearest resize)",
                        "use the same resize interpolation and antialias setting on both sides"),
    "smoother_npu": ("the NPU input is smoother (bilinear/antialiased vs nearest resize)",
                     "use the same resize interpolation and antialias setting on both sides"),
    "scale_255": ("the NPU input is in 0-255, the golden input in 0-1",
                  "divide the NPU input by 255 (or scale the golden side the same way)"),
    "scale_1/255": ("the NPU input is in 0-1, the golden input in 0-255",
                    "multiply the NPU input by 255 (or bring both sides to the same range)"),
    "scale": ("the two inputs differ by a constant factor",
              "use the same value range on both sides"),
    "norm_missing": ("mean/std normalization is missing on the NPU side",
                     "apply (x - mean) / std to the NPU input once (in the application or AIPP, not both)"),
    "norm_twice": ("mean/std normalization is applied twice on the NPU side (or missing on the golden side)",
                   "normalize once: the application and AIPP both normalizing is the usual cause"),
    "affine": ("per-channel scale and offset differ",
               "use the same scaling and mean/std on both sides"),
}


@dataclass
class Diagnosis:
    steps: list[str]  # step ids, in the order they are applied to the NPU tensor
    title: str
    advice: str
    cos_before: float
    cos_after: float
    red_before: float
    red_after: float
    agrees: bool  # within the thresholds after the transform
    details: dict = field(default_factory=dict)  # fitted numbers (mean/std/scale)

    @property
    def transform(self) -> str:
        return "+".join(self.steps)


def _channel_axis(shape: tuple) -> int | None:
    if len(shape) == 4:
        if shape[1] in (1, 3, 4):
            return 1
        if shape[3] in (1, 3, 4):
            return 3
    if len(shape) == 3:
        if shape[0] in (1, 3, 4):
            return 0
        if shape[2] in (1, 3, 4):
            return 2
    return None


def _to_nchw(a: np.ndarray, axis: int) -> np.ndarray:
    """View as (N, C, H, W) with the channel axis second."""
    if a.ndim == 3:
        a = a[None]
        axis += 1
    return np.moveaxis(a, axis, 1)


def _score(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(cosine, relative Euclidean distance) in float64; NaN when undefined."""
    xf, yf = x.reshape(-1), y.reshape(-1)
    ok = np.isfinite(xf) & np.isfinite(yf)
    if not ok.all():
        xf, yf = xf[ok], yf[ok]
    nx, ny = float(np.linalg.norm(xf)), float(np.linalg.norm(yf))
    cos = min(float(xf @ yf) / (nx * ny), 1.0) if nx > 0 and ny > 0 else math.nan
    red = float(np.linalg.norm(xf - yf)) / ny if ny > 0 else math.nan
    return cos, red


def _swap(x: np.ndarray) -> np.ndarray:
    c = x.shape[1]
    order = [2, 1, 0] + list(range(3, c))
    return x[:, order]


def _hwc_in_chw(x: np.ndarray) -> np.ndarray:
    """The NPU tensor's memory held HWC data: read it as (N, H, W, C) and make it NCHW."""
    n, c, h, w = x.shape
    return np.ascontiguousarray(x).reshape(n, h, w, c).transpose(0, 3, 1, 2)


def _chw_in_hwc(x: np.ndarray) -> np.ndarray:
    """What a CHW tensor looks like when its HWC transpose is stored in a CHW-shaped tensor."""
    n, c, h, w = x.shape
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1)).reshape(n, c, h, w)


def _blur(x: np.ndarray) -> np.ndarray:
    """[1 2 1]/4 separable smoothing over H and W (edges repeated)."""
    p = np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)], mode="edge")
    v = (p[:, :, :-2] + 2 * p[:, :, 1:-1] + p[:, :, 2:]) / 4
    return (v[:, :, :, :-2] + 2 * v[:, :, :, 1:-1] + v[:, :, :, 2:]) / 4


def resize(x: np.ndarray, size: tuple[int, int], method: str) -> np.ndarray:
    """NCHW resize to (H, W), half-pixel centres (OpenCV / PyTorch align_corners=False), no antialias."""
    n, c, h, w = x.shape
    oh, ow = size

    def coords(out: int, inp: int):
        s = (np.arange(out) + 0.5) * inp / out - 0.5
        if method == "nearest":
            return np.clip(np.floor((np.arange(out) + 0.5) * inp / out), 0, inp - 1).astype(int), None, None
        s = np.clip(s, 0, inp - 1)
        lo = np.floor(s).astype(int)
        hi = np.minimum(lo + 1, inp - 1)
        return lo, hi, s - lo

    ylo, yhi, fy = coords(oh, h)
    xlo, xhi, fx = coords(ow, w)
    if method == "nearest":
        return x[:, :, ylo][:, :, :, xlo]
    top = x[:, :, ylo][:, :, :, xlo] * (1 - fx) + x[:, :, ylo][:, :, :, xhi] * fx
    bottom = x[:, :, yhi][:, :, :, xlo] * (1 - fx) + x[:, :, yhi][:, :, :, xhi] * fx
    return top * (1 - fy[:, None]) + bottom * fy[:, None]


def _fit_affine(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Per channel: golden ~ a * npu + b by least squares; None when a channel is constant."""
    c = x.shape[1]
    xs = np.moveaxis(x, 1, 0).reshape(c, -1)
    ys = np.moveaxis(y, 1, 0).reshape(c, -1)
    mx, my = xs.mean(axis=1), ys.mean(axis=1)
    vx = ((xs - mx[:, None]) ** 2).mean(axis=1)
    if np.any(vx <= 1e-24):
        return None
    a = ((xs - mx[:, None]) * (ys - my[:, None])).mean(axis=1) / vx
    if np.any(np.abs(a) < 1e-12):
        return None
    return a, my - a * mx


def _name_affine(a: np.ndarray, b: np.ndarray, y: np.ndarray) -> tuple[str, dict]:
    """Put a name on a fitted golden ~ a * npu + b."""
    spread = float(np.std(y)) or 1.0
    details = {"scale": [round(float(v), 6) for v in a], "offset": [round(float(v), 6) for v in b]}
    if np.all(np.abs(b) <= 0.02 * spread):
        s = float(np.median(a))
        if np.all(np.abs(a / s - 1) < 0.05):
            if abs(s * 255 - 1) < 0.05:
                return "scale_255", details
            if abs(s / 255 - 1) < 0.05:
                return "scale_1/255", details
            return "scale", {**details, "factor": round(s, 6)}
    std, mean = 1 / a, -b / a  # golden ~ (npu - mean) / std
    if np.all(((std >= 0.1) & (std <= 0.5)) | ((std >= 0.1 * 255) & (std <= 0.5 * 255))):
        return "norm_missing", {"mean": [round(float(v), 4) for v in mean], "std": [round(float(v), 4) for v in std]}
    if np.all((a >= 0.1) & (a <= 0.5)):  # npu ~ (golden - b) / a: one normalization more
        return "norm_twice", {"mean": [round(float(v), 4) for v in b], "std": [round(float(v), 4) for v in a]}
    return "affine", details


def diagnose(npu: np.ndarray, golden: np.ndarray, cos_min: float = WHOLE_LIMITS["cos"],
             red_max: float = WHOLE_LIMITS["red"]) -> Diagnosis | None:
    """The preprocessing difference that makes the NPU input agree with the golden one.

    Both arrays are network inputs (NCHW, NHWC, CHW or HWC; any numeric dtype). Returns the
    simplest agreeing transform, else the best improvement (agrees=False), else None when no
    hypothesis helps or the tensors cannot be tested (no channel axis and equal sizes...).
    """
    x = np.asarray(npu, dtype=np.float64)
    y = np.asarray(golden, dtype=np.float64)
    axis = _channel_axis(y.shape)
    if axis is None:
        if x.size != y.size or y.ndim == 0 or np.asarray(golden).dtype.kind in "biu":
            return None  # not an image; ids and masks have no scale or offset to fit
        y4 = y.reshape(1, 1, 1, -1)
        x4 = x.reshape(y4.shape)
    else:
        y4 = _to_nchw(y, axis)
        if x.shape == y.shape:
            x4 = _to_nchw(x, axis)
        elif x.ndim == y.ndim and x.shape[axis] == y.shape[axis]:
            x4 = _to_nchw(x, axis)
        elif x.size == y.size:
            x4 = _to_nchw(x.reshape(y.shape), axis)
        else:
            return None
    same = x4.shape == y4.shape
    before = _score(x4, y4) if same else (math.nan, math.nan)
    if same and before[0] >= cos_min and before[1] <= red_max:
        return None  # they agree already
    bases: list[tuple[list[str], np.ndarray]] = []
    if same:
        bases.append(([], x4))
    elif x4.shape[:2] == y4.shape[:2]:
        for method in ("nearest", "bilinear"):
            bases.append(([f"resize_{method}"], resize(x4, y4.shape[2:], method)))
    else:
        return None
    image_like = axis is not None and y4.shape[1] in (3, 4)
    candidates: list = []
    for steps, base in bases:
        layouts: list[tuple[list[str], np.ndarray]] = [([], base)]
        if axis is not None and y4.shape[1] > 1 and y4.shape[2] * y4.shape[3] > 1:
            layouts += [(["hwc_in_chw"], _hwc_in_chw(base)), (["chw_in_hwc"], _chw_in_hwc(base))]
        for (lay, arr), swap in itertools.product(layouts, (False, True) if image_like else (False,)):
            cur = _swap(arr) if swap else arr
            chosen = steps + lay + (["channels"] if swap else [])
            candidates.append((chosen, cur, y4, {}))
            fit = _fit_affine(cur, y4)
            if fit is not None:
                a, b = fit
                name, details = _name_affine(a, b, y4)
                shape = (1, -1, 1, 1)
                candidates.append((chosen + [name], cur * a.reshape(shape) + b.reshape(shape), y4, details))
        if same and min(y4.shape[2:]) >= 3:
            candidates.append((steps + ["smoother_golden"], _blur(base), y4, {}))
            candidates.append((steps + ["smoother_npu"], base, _blur(y4), {}))
    scored = []
    for steps, xt, yt, details in candidates:
        if not steps:
            continue
        cos, red = _score(xt, yt)
        if math.isnan(cos):
            continue
        agrees = cos >= cos_min and (math.isnan(red) or red <= red_max)
        scored.append((steps, cos, red, agrees, details))
    if not scored:
        return None
    agreeing = [s for s in scored if s[3]]
    if agreeing:
        best = min(agreeing, key=lambda s: (len(s[0]), -s[1], s[2]))
    else:
        best = max(scored, key=lambda s: s[1])
        gain = best[1] - (before[0] if not math.isnan(before[0]) else -1.0)
        if gain < 0.05:
            return None
    steps, cos, red, agrees, details = best
    return Diagnosis(steps, _title(steps, details), _advice(steps), before[0], cos, before[1], red, agrees,
                     details)


def _title(steps: list[str], details: dict) -> str:
    parts: list[str] = []
    for k, s in enumerate(steps):
        if s == "affine" and k and steps[k - 1] == "channels":
            parts[-1] += ", normalized with the other order's mean/std"
            continue
        text = STEPS[s][0]
        if s in ("norm_missing", "norm_twice") and "mean" in details:
            text += f" (mean {_fmt(details['mean'])}, std {_fmt(details['std'])})"
        elif s == "scale" and "factor" in details:
            text += f" ({details['factor']:.4g})"
        parts.append(text)
    return "; ".join(parts)


def _advice(steps: list[str]) -> str:
    kept = [s for k, s in enumerate(steps) if not (s == "affine" and k and steps[k - 1] == "channels")]
    return "; ".join(dict.fromkeys(STEPS[s][1] for s in kept))


def _fmt(values) -> str:
    return "(" + ", ".join(f"{v:.3g}" for v in values) + ")"
