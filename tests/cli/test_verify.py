"""Headlines verified by replaying the conversion (`advise --verify`, engine/diagnose/replay.py), judged
by outcome: the ops it names are kept out of int8 again here, independently, with onnxruntime's own
quantizer, and the output is measured.

PP-OCRv4 det (a real model from the rapidocr-onnxruntime wheel), quantized by onnxruntime's dynamic
quantizer, run by `accuscope run` on a Pillow text image: the advisor's estimate finds no single op
that explains the output; the replay names the op whose exclusion helps most, and its top three
kept in fp32 remove at least half of the output error (the issue's check). A candidate quantized
with other settings (7-bit weights, reduce_range) cannot be replayed: the ranking says it is estimated, and why."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest

from accuscope.engine.precision.convert import prepare
from support.data import text_image_nchw


def accuscope(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-P", "-m", "accuscope", *map(str, args)], capture_output=True, text=True)



def quantized(ref, dst, **options) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic
    quantize_dynamic(str(ref), str(dst), weight_type=QuantType.QInt8, **options)


def output_cos(model_path, x: np.ndarray, reference: np.ndarray) -> float:
    import onnxruntime as ort
    out = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    a, b = out.ravel().astype(np.float64), reference.ravel().astype(np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


@pytest.fixture(scope="module")
def det(det_model, tmp_path_factory):
    d = tmp_path_factory.mktemp("verify")
    onnx.save(prepare(det_model), str(d / "det.onnx"))  # node names as the dumps give them
    quantized(d / "det.onnx", d / "det8.onnx")
    np.save(d / "x.npy", text_image_nchw())
    r = accuscope("run", d / "det.onnx", d / "det8.onnx", "--input", f"x={d / 'x.npy'}", "--out", d / "task")
    assert r.returncode in (0, 1), r.stderr
    import onnxruntime as ort
    reference = ort.InferenceSession(str(d / "det.onnx"), providers=["CPUExecutionProvider"]).run(
        None, {"x": np.load(d / "x.npy")})[0]
    return d, reference


def introduced(advice: dict) -> dict:
    return next(f for f in advice["findings"] if f["rule"] == "introduced")


def test_verified_headline_and_top_three_kept_out_help_when_converted_again(det):
    d, reference = det
    x = np.load(d / "x.npy")
    estimated = introduced(json.loads(accuscope("advise", d / "task", "--json").stdout))
    assert estimated["evidence"]["ranking"] == "estimated"
    assert "--verify" in estimated["text"]

    r = accuscope("advise", d / "task", "--verify", "--json")
    assert r.returncode == 0, r.stderr
    advice = json.loads(r.stdout)
    found = introduced(advice)
    assert found["evidence"]["ranking"] == "verified"
    # the third side: the reference converted again gives the candidate's outputs, so int8 itself is the cause
    assert advice["verdict"]["evidence"]["cause"] == "precision"
    assert "The precision itself" in advice["verdict"]["text"]
    v = found["evidence"]["verified"]
    assert v["replayed"] and v["reproduces_cos"] >= 0.99999 and len(v["kept"]) == 8
    full = output_cos(d / "det8.onnx", x, reference)
    assert v["full_cos"] == pytest.approx(full, abs=1e-5)

    best = v["kept"][0]
    assert found["op"] == best["op"] and "(verified)" in found["title"]
    quantized(d / "det.onnx", d / "best.onnx", nodes_to_exclude=[best["golden_op"]])
    kept_best = output_cos(d / "best.onnx", x, reference)
    assert kept_best == pytest.approx(best["output_cos"], abs=1e-5)
    assert kept_best > full
    assert all(best["output_cos"] >= k["output_cos"] for k in v["kept"])  # evidence keeps 6 digits

    top3 = [k["golden_op"] for k in v["kept"][:3]]
    quantized(d / "det.onnx", d / "top3.onnx", nodes_to_exclude=top3)
    assert 1 - output_cos(d / "top3.onnx", x, reference) <= 0.5 * (1 - full)

    again = introduced(json.loads(accuscope("advise", d / "task", "--verify", "--json").stdout))
    assert again["evidence"]["verified"]["cached"] >= 9  # the full replay, the 8 ops, the three together
    assert again["op"] == found["op"]


def test_a_candidate_made_with_other_settings_is_not_replayed_and_says_estimated(det, tmp_path):
    d, _ = det
    quantized(d / "det.onnx", tmp_path / "reduced.onnx", reduce_range=True)
    r = accuscope("run", d / "det.onnx", tmp_path / "reduced.onnx", "--input", f"x={d / 'x.npy'}",
                  "--out", tmp_path / "task")
    assert r.returncode in (0, 1), r.stderr
    advice = json.loads(accuscope("advise", tmp_path / "task", "--verify", "2", "--json").stdout)
    assert advice["verdict"]["severity"] == "error"  # 7-bit weights fail too
    found = introduced(advice)
    assert any("headline not verified" in n and "other settings" in n for n in advice["notes"])
    assert found["evidence"]["ranking"] == "estimated" and "other settings" in found["text"]
    assert "verified" not in found["evidence"]
    # the settings branch: here 7-bit weights do better than the default 8-bit (cos 0.943 against 0.888 on
    # this image), so the settings are not what to fix
    assert advice["verdict"]["evidence"]["cause"] == "settings"
    assert "Not the conversion's settings" in advice["verdict"]["text"]


def test_rec_int8_verified_headline_kept_out_of_int8_helps(rapidocr_models, tmp_path):
    """PP-OCRv4 rec, int8 by onnxruntime: where quantization errors interact, keeping some top-estimated
    ops out makes the output worse; the verified headline, quantized again without it here, helps."""
    from PIL import Image, ImageDraw, ImageFont
    onnx.save(prepare(rapidocr_models / "ch_PP-OCRv4_rec_infer.onnx"), str(tmp_path / "rec.onnx"))
    quantized(tmp_path / "rec.onnx", tmp_path / "rec8.onnx")
    img = Image.new("RGB", (320, 48), (255, 255, 255))
    ImageDraw.Draw(img).text((6, 16), "accuracy 42 hello world", fill=(0, 0, 0), font=ImageFont.load_default())
    x = ((np.asarray(img, np.float32) / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)[None].astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = accuscope("run", tmp_path / "rec.onnx", tmp_path / "rec8.onnx", "--input", f"x={tmp_path / 'x.npy'}",
                  "--out", tmp_path / "task")
    assert r.returncode in (0, 1), r.stderr
    found = introduced(json.loads(accuscope("advise", tmp_path / "task", "--verify", "--json").stdout))
    v = found["evidence"]["verified"]
    assert found["evidence"]["ranking"] == "verified" and found["op"] == v["kept"][0]["op"]
    import onnxruntime as ort
    reference = ort.InferenceSession(str(tmp_path / "rec.onnx"), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    quantized(tmp_path / "rec.onnx", tmp_path / "best.onnx", nodes_to_exclude=[v["kept"][0]["golden_op"]])
    assert output_cos(tmp_path / "best.onnx", x, reference) > output_cos(tmp_path / "rec8.onnx", x, reference)
