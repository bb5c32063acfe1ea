"""Sweeps: the local backends and Ray give the numbers of single runs."""

import pandas as pd
import pytest

import propshare
from propshare import Scenario

SCN = {
    "name": "sweepable",
    "schedulers": ["wfq"],
    "machine": {"cpus": 2, "quantum": "1ms", "horizon": "100ms"},
    "class": [{"prefix": "c", "count": 6, "weight": {"dist": "uniform", "min": 1, "max": 9}}],
}


def grid():
    return {"scenario": [Scenario.from_dict(SCN)], "scheduler": ["wfq", "gr3mp", "sfq"], "seed": [1, 2], "tag": ["x"]}


def expected():
    rows = [propshare.simulate(Scenario.from_dict(SCN), schedulers=[s], seed=k, lag=False).runs
            for s in ["wfq", "gr3mp", "sfq"] for k in [1, 2]]
    return pd.concat(rows, ignore_index=True)


def check(frame):
    want = expected()
    assert list(frame.tag) == ["x"] * 6
    pd.testing.assert_frame_equal(frame[want.columns], want)


def test_grid_expands_in_order():
    tasks = propshare.tasks_of({"a": [1, 2], "b": ["x", "y"]})
    assert tasks == [{"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "x"}, {"a": 2, "b": "y"}]
    with pytest.raises(TypeError, match="list of values"):
        propshare.sweep({"scenario": "not a list"})
    with pytest.raises(ValueError, match="backend"):
        propshare.sweep([], backend="cloud")


def test_local_sweep_gives_the_numbers_of_single_runs():
    check(propshare.sweep(grid(), progress=False))


def test_process_sweep():
    check(propshare.sweep(grid(), backend="process", workers=2, progress=False))


def summarise(task):
    r = propshare.simulate(task["scenario"], schedulers=[task["scheduler"]], seed=task["seed"], lag=False)
    return {"worst": r.runs.max_lag.max(), "clients": len(r.clients)}


def test_custom_run_gets_task_labels():
    frame = propshare.sweep(grid(), run=summarise, progress=False)
    assert list(frame.columns) == ["scenario", "scheduler", "seed", "tag", "worst", "clients"]
    assert list(frame.scenario) == ["sweepable"] * 6 and (frame.clients == 6).all()


def test_errors_in_a_task_reach_the_caller():
    with pytest.raises(propshare.SchedulerError, match="unknown scheduler"):
        propshare.sweep({"scenario": [Scenario.from_dict(SCN)], "scheduler": ["nope"]}, progress=False)


def test_ray_sweep():
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'propshare[ray]')")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        check(propshare.sweep(grid(), backend="ray", progress=False))
    finally:
        ray.shutdown()
