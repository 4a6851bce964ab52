"""`accuscope report`: HTML with inline SVG charts (rendered by headless Chromium) and Markdown with
SVG files beside it, through the real entry point; the charts' numbers are the app's."""
from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import numpy as np
from PIL import Image

from accuscope.engine.demo.workspace import MAIN
from accuscope.engine.diagnose.advice import load_advice
from accuscope.engine.diagnose.chartdata import metric_series
from accuscope.engine.report.document import CHART_POINTS, build_report
from accuscope.engine.report.svg import metric_svg, text
from accuscope.engine.tasks.task import load_task
from browser import chromium
from support.narrow import present

SVG = re.compile(r"<svg\b.*?</svg>", re.S)


def accuscope(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accuscope", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


class Text(HTMLParser):
    """The page's text, as a reader sees it (inside <svg> too)."""

    def __init__(self):
        super().__init__()
        self.parts: list[str] = []
        self.refs: list[str] = []

    def handle_data(self, data):
        self.parts.append(data)

    def handle_starttag(self, tag, attrs):
        self.refs += [v for k, v in attrs if k in ("src", "href") and v]

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.parts).split())


def test_html_report_has_verdict_findings_and_well_formed_charts(ws, tmp_path):
    task = ws / MAIN.name
    out = tmp_path / "report.html"
    r = accuscope("report", task, "--out", out)
    assert r.returncode == 0, r.stderr
    assert "wrote" in r.stdout and "the model fails: output cos 0.9523 < 0.99" in r.stdout
    page = out.read_text(encoding="utf-8")
    reader = Text()
    reader.feed(page)
    assert reader.refs == [], "the report must not load anything"  # no <link>, <script src>, <img src>
    words = reader.text
    assert "Verdict ✗ the model fails: output cos 0.9523 < 0.99" in words
    assert "60/68 rows fail · first: #5 Conv2D: cos 0.9562 < 0.99" in words
    assert "paired 64 of 64 NPU tensors" in words and "network outputs compared 1 of 1" in words
    advice = load_advice(task)
    assert advice is not None
    for finding in advice.findings:  # every finding of the advisor, title and text
        assert finding.title in words and " ".join(finding.text.split()) in words
    assert "/attn/norm/Pow introduced the error" in words
    svgs = SVG.findall(page)
    assert len(svgs) == 4  # the metric chart and the error curves of the 3 worst ops
    for svg in svgs:
        root = ET.fromstring(svg)
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
    titles = [ET.fromstring(s).findtext("{http://www.w3.org/2000/svg}title") for s in svgs]
    assert present(titles[0]).startswith("CosineSimilarity by row index · • pass x fail · ─ threshold < 0.99")
    assert titles[1:3] == ["#5 /block1/conv1/Conv/block1/relu1/Relu", "#25 /attn/norm/Pow"]  # what the advisor names
    assert "have an absolute error greater than 0.001" in words

    png = tmp_path / "report.png"
    shot = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           f"--screenshot={png}", "--window-size=860,1800", out.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert png.is_file(), shot.stderr
    image = Image.open(png).convert("RGB")
    assert image.size == (860, 1800)
    colors = image.getcolors(1 << 16)
    assert colors is None or len(colors) > 50, "the page is blank"  # text, frames and charts: many shades
    red = np.asarray(image)[..., 0].astype(int) - np.asarray(image)[..., 1]
    assert (red > 120).sum() > 200  # the failing rows' red crosses and the verdict's red bar were drawn


def test_markdown_report_has_the_same_text_and_svg_files_beside_it(ws, tmp_path):
    out = tmp_path / "notes" / "report.md"
    out.parent.mkdir()
    r = accuscope("report", ws / MAIN.name, "--out", out, "--worst", "1")
    assert r.returncode == 0, r.stderr
    md = out.read_text(encoding="utf-8")
    assert "**✗ the model fails: output cos 0.9523 &lt; 0.99**" in md
    assert "/attn/norm/Pow introduced the error" in md
    linked = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert linked == ["report-metric.svg", "report-op1.svg"]
    for name in linked:
        ET.parse(out.parent / name)  # well-formed


def test_metric_chart_draws_the_apps_points():
    """The report's metric chart draws exactly the points the app's chart gets from chartdata."""
    from accuscope.engine.compare import judgement
    from accuscope.engine.compare.results import ResultTable
    from accuscope.engine.compare.thresholds import Thresholds
    n = 50
    cos = np.linspace(0.9, 1.0, n)
    rows = [{"index": i, "npu_op": f"op\x1b[31m<{i}>", "tensor": f"t{i}:output:0", "io": "output", "type": "Conv",
             "cos": float(cos[i])} for i in range(n)]
    table = ResultTable.from_rows(rows)
    thresholds = Thresholds()
    judgement.apply(table, thresholds)
    series = metric_series(table, np.arange(n), thresholds, "cos", 10)
    svg = metric_svg(series)
    root = ET.fromstring(svg)
    assert len(root.findall(".//{http://www.w3.org/2000/svg}circle")) == len(series.passing[0]) > 0
    assert len(root.findall(".//{http://www.w3.org/2000/svg}path")) == len(series.failing[0]) > 0
    assert len(series.passing[0]) + len(series.failing[0]) <= 4 * 10  # downsampled like the app's
    assert text("a\x1b[31m<b>&") == "a?[31m&lt;b&gt;&amp;"  # names from data: printable, escaped


def test_report_of_the_demo_task_without_advice_has_the_account_as_verdict(demo_ws):
    task = load_task(demo_ws / MAIN.name)
    report = build_report(task, None, worst=0)
    assert report.verdict.startswith("fail: 1 of 1 network output breaks") and report.severity == "error"
    assert "60/68 rows fail" in report.account
    assert report.findings == [] and [c.name for c in report.charts] == ["metric"]
    assert task.table is not None
    assert CHART_POINTS >= 2 * len(task.table)  # a small network: every row drawn


def test_the_report_draws_the_worst_ops_from_the_opened_task_not_a_second_read(ws):
    """The worst ops' error curves come from the task the command opened (its rows and plan): its result
    files deleted after opening, the report still has every curve (each op read the folder again)."""
    task = load_task(ws / MAIN.name)
    for f in (ws / MAIN.name).glob("result*"):
        f.unlink()
    report = build_report(task, None, worst=3)
    assert [c.name for c in report.charts] == ["metric", "op1", "op2", "op3"]
    assert not [n for n in report.notes if "no error curve" in n]


def test_report_rejects_an_unknown_suffix_and_a_missing_task(ws, tmp_path):
    r = accuscope("report", ws / MAIN.name, "--out", tmp_path / "report.pdf")
    assert r.returncode == 2 and "--out must end in .html or .md" in r.stderr
    r = accuscope("report", tmp_path / "nowhere", "--out", tmp_path / "report.html")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    r = accuscope("report", ws / MAIN.name, "--out", tmp_path / "report.html", "--metric", "nope")
    assert r.returncode == 2 and "--metric nope: not a metric" in r.stderr
