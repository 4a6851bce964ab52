"""No code from the folder accuscope is started in runs in any process accuscope starts: the
installed `accuscope` script run in a folder holding struct.py, socket.py and numpy.py (see
test_lifetime.plant) for each command that starts Python processes: the process pool (its workers
start plugin hosts through the fork server), a Dask LocalCluster, `serve` and the app it starts per
browser tab, `precision` and `run`. The commands still succeed; the user's own `--check` command
keeps its normal environment."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from accuscope.engine.demo.ranktree import write_rank_tree
from support.lifetime import plant, sprung

SCRIPT = Path(sys.executable).parent / "accuscope"
pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="no installed accuscope script beside this Python")


def accuscope(cwd: Path, *args, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def trap(tmp_path) -> tuple[Path, Path]:
    return plant(tmp_path / "trap")


@pytest.fixture
def plugin_dir(tmp_path) -> Path:
    folder = tmp_path / "plugins" / "algorithm"
    folder.mkdir(parents=True)
    (folder / "alg_MaxDiff.py").write_text(textwrap.dedent("""
        import numpy as np
        def compare(my_output_dump_data, ground_truth_dump_data, args):
            return f"{float(np.max(np.abs(my_output_dump_data - ground_truth_dump_data))):.6f}", ""
        """))
    return folder.parent


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> tuple[Path, Path]:
    import onnx

    from accuscope.engine.demo.workspace import build_model, float16_model
    root = tmp_path_factory.mktemp("models")
    model = build_model("cnn", 0)
    onnx.save(model, str(root / "ref.onnx"))
    onnx.save(float16_model(model), str(root / "cand.onnx"))
    return root / "ref.onnx", root / "cand.onnx"


def test_compare_on_the_process_pool_with_plugins(trap, plugin_dir, tmp_path):
    cwd, markers = trap
    npu, golden = write_rank_tree(tmp_path, ranks=2, tensors=2)
    r = accuscope(cwd, "compare", "--npu", npu, "--golden", golden, "--out", tmp_path / "t", "--workers", "2",
                  "--custom-algorithms", plugin_dir)
    assert r.returncode == 0, r.stderr
    assert "ranks 2 · compared 2" in r.stdout
    assert sprung(markers) == []


def test_compare_on_a_local_dask_cluster(trap, tmp_path):
    pytest.importorskip("distributed")
    cwd, markers = trap
    npu, golden = write_rank_tree(tmp_path, ranks=2, tensors=2)
    r = accuscope(cwd, "compare", "--npu", npu, "--golden", golden, "--out", tmp_path / "t", "--cluster", "local:2")
    assert r.returncode == 0, r.stderr
    assert "ranks 2 · compared 2" in r.stdout
    assert sprung(markers) == []


def test_run_with_workers(trap, models, tmp_path):
    cwd, markers = trap
    ref, cand = models
    r = accuscope(cwd, "run", ref, cand, "--random-inputs", "--workers", "2", "--out", tmp_path / "t")
    assert r.returncode in (0, 1), r.stderr
    assert "rows " in r.stdout
    assert sprung(markers) == []


def test_precision_and_the_users_check_command_keeps_its_environment(trap, models, tmp_path):
    cwd, markers = trap
    ref, _ = models
    seen = tmp_path / "check.json"
    check = tmp_path / "check.py"
    check.write_text(textwrap.dedent(f"""
        import json, os, sys
        json.dump({{"env": dict(os.environ), "safe_path": sys.flags.safe_path if sys.version_info >= (3, 11) else 0,
                   "path0": sys.path[0]}}, open({str(seen)!r}, "w"))
        """))
    r = accuscope(cwd, "precision", ref, "--to", "int8", "--random-inputs", "--target", "cos=0.9",
                  "--check", f"{sys.executable} {check}", "--out", tmp_path / "p")
    assert r.returncode == 0, r.stdout + r.stderr
    assert sprung(markers) == []
    record = json.loads(seen.read_text())
    assert record["safe_path"] == 0 and record["path0"] == str(tmp_path)  # a normal `python script.py`
    assert record["env"].get("PYTHONSAFEPATH") == os.environ.get("PYTHONSAFEPATH")
    assert record["env"].get("PYTHONPATH") == os.environ.get("PYTHONPATH")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_and_the_app_it_starts_for_a_browser_tab(trap, tmp_path):
    pytest.importorskip("textual_serve")
    import aiohttp
    cwd, markers = trap
    port = free_port()
    server = subprocess.Popen([str(SCRIPT), "serve", "--port", str(port), "--workspace", str(tmp_path / "ws")],
                              cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert server.stdout is not None
    token = server.stdout.readline().partition("?token=")[2].split()[0]  # the secret in the address it prints

    async def session() -> bytes:
        """What the app a tab gets draws, until it draws its title (or the socket closes)."""
        received = b""
        async with aiohttp.ClientSession() as client:
            async with client.ws_connect(f"http://127.0.0.1:{port}/ws/{token}?width=120&height=40",
                                         origin=f"http://127.0.0.1:{port}") as ws:
                while b"accuscope" not in received:
                    message = await ws.receive(timeout=120)
                    if message.type == aiohttp.WSMsgType.BINARY:
                        received += message.data
                    elif message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED,
                                          aiohttp.WSMsgType.ERROR):
                        break
        return received
    try:
        deadline = time.monotonic() + 60
        while server.poll() is None and time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        assert server.poll() is None, server.communicate()
        drawn = asyncio.run(session())
    finally:
        server.send_signal(signal.SIGINT)
        try:
            _, err = server.communicate(timeout=30)
        finally:
            if server.poll() is None:
                server.kill()
    assert b"accuscope" in drawn, err
    assert sprung(markers) == []
    assert server.returncode == 0, err
