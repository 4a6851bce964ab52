"""Ranks on a real Dask cluster on loopback: `--cluster local:N`, and a scheduler with two `dask worker`
processes standing for two hosts, each seeing only its own ranks' folders (ACCUSCOPE_ROOT_MAP maps
the shared dump root to that host's folder): placement, a worker killed mid-run, resume."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

distributed = pytest.importorskip("distributed")

from accuscope.engine.demo.ranktree import write_rank_tree
from accuscope.engine.tasks.task import load_task
from support.narrow import present


def accuscope(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accuscope", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def test_local_cluster_compares_every_rank_on_its_worker_processes(tmp_path):
    npu, golden = write_rank_tree(tmp_path, ranks=4, tensors=4, faulty=(1,))
    r = accuscope("compare", "--npu", npu, "--golden", golden, "--out", tmp_path / "t", "--cluster", "local:2")
    assert r.returncode == 0, r.stderr
    assert "4 ranks of" in r.stdout and "on local:2" in r.stdout and "failing 4" in r.stdout
    doc = json.loads((tmp_path / "t" / "task.json").read_text())
    workers = {rec["worker"].split(" ")[0] for rec in doc["ranks"].values()}
    assert workers <= {"0", "1"} and doc["cluster"] == "local:2"
    assert len(present(load_task(tmp_path / "t").table)) == 16


def test_local_cluster_runs_custom_algorithms_on_its_daemonic_workers(tmp_path):
    """A Dask worker is a daemonic process; the plugin host starts there all the same."""
    npu, golden = write_rank_tree(tmp_path, ranks=2, tensors=2)
    (tmp_path / "plugins" / "algorithm").mkdir(parents=True)
    (tmp_path / "plugins" / "algorithm" / "alg_MaxDiff.py").write_text(
        "import numpy as np\n"
        "def compare(my_output_dump_data, ground_truth_dump_data, args):\n"
        "    return f'{float(np.max(np.abs(my_output_dump_data - ground_truth_dump_data))):.6f}', ''\n")
    r = accuscope("compare", "--npu", npu, "--golden", golden, "--out", tmp_path / "t", "--cluster", "local:2",
                  "--custom-algorithms", tmp_path / "plugins")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ranks 2 · compared 2" in r.stdout and "failed" not in r.stdout
    values = present(load_task(tmp_path / "t").table).columns["MaxDiff"]
    assert len(values) == 4 and all(float(v) > 0 for v in values)


def test_cluster_address_that_answers_nothing_is_one_line(tmp_path):
    npu, golden = write_rank_tree(tmp_path, ranks=1, tensors=1)
    r = accuscope("compare", "--npu", npu, "--golden", golden, "--out", tmp_path / "t", "--cluster", "local:many")
    assert r.returncode == 2 and "give tcp://HOST:PORT or local:N" in r.stderr and "Traceback" not in r.stderr


@pytest.fixture
def scheduler():
    cluster = distributed.LocalCluster(n_workers=0, processes=True, host="127.0.0.1", dashboard_address="127.0.0.1:0")
    yield cluster
    cluster.close()


def start_worker(address: str, name: str, root_map: str, **env) -> subprocess.Popen:
    """A `dask worker` process as on another host: it reads the shared root at its own folder."""
    return subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--name", name,
                             "--nthreads", "1", "--no-nanny", "--no-dashboard"],
                            env={**os.environ, "ACCUSCOPE_ROOT_MAP": root_map, **env},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_workers(cluster, names: set[str]) -> None:
    with distributed.Client(cluster) as client:
        deadline = time.monotonic() + 120
        while {str(w["name"]) for w in client.scheduler_info(n_workers=-1)["workers"].values()} != names:
            assert time.monotonic() < deadline, "workers did not join"
            time.sleep(0.1)


def test_two_hosts_each_rank_on_the_host_holding_it_a_killed_host_loses_its_ranks_and_a_rerun_resumes(
        tmp_path, scheduler):
    shared = tmp_path / "common-root"  # the dump root as every host names it; absent on this (the client's) host
    for host, ranks in (("hostA", (0, 1)), ("hostB", (2, 3))):
        npu, golden = write_rank_tree(tmp_path / "all", ranks=4, tensors=3, faulty=(3,))
        for side in (npu, golden):
            for rank in range(4):
                if rank not in ranks:  # a host holds only its own ranks
                    for f in (side / "step0" / f"rank{rank}").iterdir():
                        f.unlink()
                    (side / "step0" / f"rank{rank}").rmdir()
        (tmp_path / "all").rename(tmp_path / host)
    marker = tmp_path / "hostB-comparing"
    address = scheduler.scheduler_address
    workers = [start_worker(address, "hostA", f"{shared}={tmp_path / 'hostA'}"),
               start_worker(address, "hostB", f"{shared}={tmp_path / 'hostB'}",
                            ACCUSCOPE_FAULT=f"pause pair {marker}")]
    try:
        wait_workers(scheduler, {"hostA", "hostB"})
        out = tmp_path / "task"
        args = [sys.executable, "-m", "accuscope", "compare", "--npu", shared / "npu", "--golden", shared / "golden",
                "--out", out, "--cluster", address]
        run = subprocess.Popen(list(map(str, args)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while not marker.exists():  # hostB is inside its first rank
            assert time.monotonic() < deadline and run.poll() is None, run.communicate()
            time.sleep(0.05)
        workers[1].kill()
        stdout, stderr = run.communicate(timeout=120)
        assert run.returncode == 0, stderr
        assert "4 ranks of" in stdout and "2 ranks not compared: re-run" in " ".join(stdout.split())
        ranks = json.loads((out / "task.json").read_text())["ranks"]
        state = {rec["rank"]: (rec["state"], rec["worker"].split(" ")[0]) for rec in ranks.values()}
        assert state[0] == state[1] == ("done", "hostA")  # placed where their folders are
        assert state[2][0] == state[3][0] == "lost" and "left the cluster" in ranks["step0_rank2"]["error"]
        assert sorted(p.name for p in (out / "ranks").iterdir()) == ["step0_rank0.npz", "step0_rank1.npz"]
        assert len(present(load_task(out).table)) == 6

        workers.append(start_worker(address, "hostB2", f"{shared}={tmp_path / 'hostB'}"))  # hostB back
        wait_workers(scheduler, {"hostA", "hostB2"})
        again = subprocess.run(list(map(str, args)), capture_output=True, text=True, timeout=120)
        assert again.returncode == 0, again.stderr
        assert "2 already compared (resumed)" in again.stdout
        ranks = json.loads((out / "task.json").read_text())["ranks"]
        state = {rec["rank"]: (rec["state"], rec["worker"].split(" ")[0]) for rec in ranks.values()}
        assert state == {0: ("done", "hostA"), 1: ("done", "hostA"), 2: ("done", "hostB2"), 3: ("done", "hostB2")}
        task = load_task(out)
        assert task.table is not None
        assert len(task.table) == 12 and set(task.table.columns["rank"][task.table.columns["fail"]].tolist()) == {3}
    finally:
        for w in workers:
            w.kill()
            w.wait()
