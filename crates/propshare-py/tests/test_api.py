"""The API: schedulers, scenarios (round trips, errors), simulate's tables,
the same numbers as the command line."""

import pickle
import subprocess

import pandas as pd
import pytest

import propshare
from propshare import Scenario

SMALL = """
name = "small"
schedulers = ["wfq", "gr3mp", "gdq(delta=8)"]
seed = 5
repeat = 2

[machine]
cpus = 2
quantum = "1ms"
horizon = "200ms"

[[client]]
name = "a"
weight = 1

[[client]]
name = "b"
weight = 3

[[client]]
name = "c"
weight = 2
run = { dist = "exponential", mean = "2ms" }
sleep = { dist = "exponential", mean = "5ms" }
"""

SMALL_DICT = {
    "name": "small",
    "schedulers": ["wfq", "gr3mp", "gdq(delta=8)"],
    "seed": 5,
    "repeat": 2,
    "machine": {"cpus": 2, "quantum": "1ms", "horizon": "200ms"},
    "client": [
        {"name": "a", "weight": 1},
        {"name": "b", "weight": 3},
        {
            "name": "c",
            "weight": 2,
            "run": {"dist": "exponential", "mean": "2ms"},
            "sleep": {"dist": "exponential", "mean": "5ms"},
        },
    ],
}


def test_schedulers_list_their_typed_parameters():
    by_name = {s["name"]: s for s in propshare.schedulers()}
    assert {"gr3", "gr3mp", "gdq", "wfq", "dwrr", "sfs"} <= set(by_name)
    delta = {p["name"]: p for p in by_name["gdq"]["params"]}["delta"]
    assert delta["kind"] == "int" and delta["default"] == 4 and delta["min"] == 0
    assert by_name["rr"]["params"] == []
    assert [(p["name"], p["kind"], p["default"]) for p in by_name["wfq"]["params"]] == [("readjust", "bool", False)]
    frame = propshare.scheduler_params()
    assert ((frame.scheduler == "gdq") & (frame.name == "t")).sum() == 1


def test_scenario_round_trips(root, tmp_path):
    text = Scenario.from_toml(SMALL)
    path = tmp_path / "small.toml"
    path.write_text(SMALL)
    assert Scenario.from_toml(path) == text
    assert Scenario.from_toml(str(path)) == text
    assert Scenario.from_dict(SMALL_DICT) == text
    assert Scenario.from_toml(Scenario.from_dict(SMALL_DICT).toml) == text
    assert pickle.loads(pickle.dumps(text)) == text
    paper = Scenario.from_toml(root / "scenarios/papers/gr3/s1-n32-w16384.toml")
    back = pickle.loads(pickle.dumps(paper))
    assert back == paper and back.file == paper.file and len(back.claims) == 7
    assert (text.cpus, text.quantum_ns, text.horizon_ns, text.seed, text.repeat) == (2, 10**6, 2 * 10**8, 5, 2)
    assert [c["client"] for c in text.clients()] == ["a", "b", "c"]


def test_scenario_errors_are_located_exceptions(tmp_path):
    bad = SMALL.replace('weight = 3', 'weight = 0')
    with pytest.raises(propshare.ScenarioError) as e:
        Scenario.from_toml(bad)
    line = bad.splitlines().index("weight = 0") + 1
    assert str(e.value).startswith(f"<toml>:{line}:")
    assert e.value.line == line and e.value.field == "client[1].weight"
    with pytest.raises(propshare.ScenarioError) as e:
        Scenario.from_toml(tmp_path / "missing.toml")
    assert "missing.toml" in str(e.value) and e.value.line == 0
    with pytest.raises(propshare.ScenarioError, match="unknown scheduler"):
        Scenario.from_dict({**SMALL_DICT, "schedulers": ["nope"]})
    with pytest.raises(TypeError, match=r"machine\.cpus"):
        Scenario.from_dict({**SMALL_DICT, "machine": {"cpus": object()}})
    with pytest.raises(propshare.PropshareError):
        Scenario.from_dict({**SMALL_DICT, "machine": {"cpus": 0, "quantum": "1ms", "horizon": "1s"}})


def test_cli_errors_match(cli, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(SMALL.replace('quantum = "1ms"', 'quantum = "1 parsec"'))
    run = subprocess.run([cli, "simulate", str(bad), "--quiet"], capture_output=True, text=True)
    assert run.returncode == 2
    with pytest.raises(propshare.ScenarioError) as e:
        Scenario.from_toml(bad)
    assert str(e.value) in run.stderr


def test_simulate_tables():
    r = propshare.simulate(Scenario.from_toml(SMALL), trace=True)
    assert list(r.runs.scheduler) == ["wfq", "wfq", "gr3mp", "gr3mp", "gdq(delta=8)", "gdq(delta=8)"]
    assert list(r.runs.seed) == [5, 6] * 3
    assert len(r.clients) == 6 * 3
    # The lag series: every client, every scheduler, first repeat only.
    assert set(r.lag.client) == {"a", "b", "c"} and set(r.lag.seed) == {5}
    assert (r.lag.lag * 10**6 - r.lag.lag_ns).abs().max() < 1e-6
    # The trace accounts for every ns each client received in the first repeat.
    runs = r.trace[r.trace.ev == "run"]
    got = (runs.end - runs.start).astype("int64").groupby([runs.scheduler, runs.client]).sum()
    first = r.clients[r.clients.seed == 5].set_index(["scheduler", "client"]).received_ns
    pd.testing.assert_series_equal(got.sort_index(), first.sort_index(), check_names=False)
    # Overrides.
    one = propshare.simulate(Scenario.from_toml(SMALL), schedulers=["wf2q"], seed=9, repeat=1, lag=False)
    assert list(one.runs.scheduler) == ["wf2q"] and list(one.runs.seed) == [9] and one.lag.empty


def test_simulate_errors():
    scn = Scenario.from_toml(SMALL)
    with pytest.raises(propshare.SchedulerError, match="unknown scheduler"):
        propshare.simulate(scn, schedulers=["nope"])
    with pytest.raises(propshare.SchedulerError, match="delta"):
        propshare.simulate(scn, schedulers=["gdq(delta=-1)"])
    with pytest.raises(ValueError, match="lag_clients"):
        propshare.simulate(scn, lag_clients=["zz"])
    with pytest.raises(propshare.SimulationError, match="max-memory|memory"):
        propshare.simulate(scn, max_memory=1000)


def test_same_numbers_as_the_cli(cli, root, tmp_path):
    path = root / "scenarios/examples/mixed.toml"
    out = tmp_path / "out"
    subprocess.run([cli, "simulate", str(path), "--no-traces", "--quiet", "--out", str(out)], check=True,
                   capture_output=True)
    theirs = pd.read_csv(out / "mixed-example.metrics.csv", engine="python")
    ours = propshare.simulate(path).clients
    columns = ["scheduler", "seed", "client", "weight", "received_ns", "ideal_ns", "share", "max_lag", "min_lag",
               "mean_abs_lag", "runs", "migrations"]
    pd.testing.assert_frame_equal(ours[columns], theirs[columns], check_dtype=False)
    assert len(ours) > 20


def test_claims_as_the_cli_judges_them(root):
    r = propshare.simulate(root / "scenarios/papers/gr3/s1-n32-w16384.toml", lag=False)
    assert len(r.claims) == 7 and r.claims.as_pinned.all()
    gr3 = r.claims[r.claims.scheduler == "gr3"].iloc[0]
    runs = r.runs[r.runs.scheduler == "gr3"]
    assert gr3.ours_min == runs.service_error_min.min() and gr3.ours_max == runs.service_error_max.max()
    assert gr3.metric == "service_error" and gr3["min"] == -2.5


def test_trace_events_iterate(root):
    events = propshare.trace_events(Scenario.from_toml(SMALL), "gr3mp")
    first = next(events)
    assert first["ev"] == "join" and first["scheduler"] == "gr3mp"
    assert sum(1 for e in events if e["ev"] == "run") > 100
