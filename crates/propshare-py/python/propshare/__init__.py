"""propshare: proportional-share CPU schedulers on multiprocessors, from Python.

The native module (``propshare._propshare``, Rust, built by maturin) runs the
schedulers and the simulator; this package turns what it returns into pandas
DataFrames and runs sweeps.

* :func:`schedulers`: the registered schedulers and their typed parameters.
* :class:`Scenario`: a scenario from a TOML file or text (``from_toml``) or
  from dicts laid out like the file (``from_dict``); docs/SCENARIOS.md.
* :func:`simulate`: run a scenario exactly as ``propshare simulate`` does;
  per-run and per-client metrics, lag over time, claims and the trace as
  DataFrames (:class:`SimResult`).
* :class:`Scheduler`: drive one scheduler event by event from your own host.
* :class:`Fluid`: the exact fluid reference, on its own.
* :func:`sweep`: many simulations over a grid, on all local cores or on Ray.

Errors are exceptions deriving from :class:`PropshareError`, carrying the
command line's messages (a scenario's as ``file:line:column: field: message``).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import tempfile
from functools import cached_property
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence, Union

from ._propshare import (
    EventError,
    Fluid,
    PropshareError,
    RunResult,
    Scenario,
    ScenarioError,
    Scheduler,
    SchedulerError,
    SimulationError,
    __version__,
    check_scheduler,
    parse_duration,
)
from ._propshare import schedulers as _schedulers
from ._propshare import simulate as _simulate
from ._sweep import Task, run_task, sweep, tasks_of

if TYPE_CHECKING:
    import pandas as pd

    from ._propshare import SchedulerInfo

__all__ = [
    "EventError",
    "Fluid",
    "PropshareError",
    "Scenario",
    "ScenarioError",
    "ScenarioLike",
    "Scheduler",
    "SchedulerError",
    "SimResult",
    "SimulationError",
    "Task",
    "__version__",
    "check_scheduler",
    "parse_duration",
    "scheduler_params",
    "schedulers",
    "simulate",
    "run_task",
    "sweep",
    "tasks_of",
    "trace_events",
]

ScenarioLike = Union[Scenario, str, "os.PathLike[str]"]


def schedulers() -> List[SchedulerInfo]:
    """Every registered scheduler: ``name``, ``summary`` and ``params`` (each
    with ``name``, ``kind`` ("int", "bool" or "choice"), ``min``, ``max``, ``default``,
    ``doc``), as ``propshare list --params`` prints them."""
    return _schedulers()


def scheduler_params() -> pd.DataFrame:
    """The parameters of every scheduler as one DataFrame (one row per parameter)."""
    import pandas as pd

    rows = [dict(scheduler=s["name"], **p) for s in _schedulers() for p in s["params"]]
    return pd.DataFrame(rows, columns=["scheduler", "name", "kind", "min", "max", "default", "doc"])


def _scenario(s: ScenarioLike) -> Scenario:
    return s if isinstance(s, Scenario) else Scenario.from_toml(s)


def _ns(v: Union[int, str, None]) -> Optional[int]:
    return parse_duration(v) if isinstance(v, str) else v


class SimResult:
    """What :func:`simulate` produced; each table is a pandas DataFrame,
    built the first time it is read.

    * ``runs``: one row per run (scheduler x seed): decisions, lag range,
      service error range (static sets), idle fraction...
    * ``clients``: one row per client of every run (lags in quanta).
    * ``lag``: lag over time of the sampled clients, first repeat of each
      scheduler (``t_ns``, ``lag_ns``, ``lag`` in quanta).
    * ``claims``: one row per claim judged, with ``ours_min``, ``ours_max``,
      ``matches`` and ``as_pinned``.
    * ``window_lag``: windowed lag per run and window length, when measured.
    * ``trace``: the first repeat's events (``simulate(..., trace=True)``), else None.
    """

    def __init__(self, native: RunResult, trace: Optional[List[Dict[str, Any]]] = None):
        self._native = native
        self._trace = trace

    @property
    def scenario(self) -> str:
        return self._native.scenario

    @cached_property
    def runs(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self._native.runs())

    @cached_property
    def clients(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self._native.clients())

    @cached_property
    def lag(self) -> pd.DataFrame:
        import numpy as np
        import pandas as pd

        series = self._native.lag()
        times = [np.frombuffer(t, dtype="<u8").astype(np.int64) for _, _, _, t, _ in series]
        lags = [np.frombuffer(lag, dtype="<f8") for _, _, _, _, lag in series]
        counts = [len(t) for t in times]
        lag_ns = np.concatenate(lags) if lags else np.zeros(0)
        return pd.DataFrame({
            "scheduler": np.repeat(np.array([s[0] for s in series], dtype=object), counts),
            "seed": np.repeat(np.array([s[1] for s in series], dtype=np.int64), counts),
            "client": np.repeat(np.array([s[2] for s in series], dtype=object), counts),
            "t_ns": np.concatenate(times) if times else np.zeros(0, dtype=np.int64),
            "lag_ns": lag_ns,
            "lag": lag_ns / self._native.quantum_ns,
        })

    @cached_property
    def claims(self) -> pd.DataFrame:
        import pandas as pd

        columns = ["scheduler", "metric", "client", "clients", "paper", "source", "min", "max", "reach", "bounds",
                   "expect", "at", "ours_min", "ours_max", "matches", "as_pinned"]
        return pd.DataFrame(self._native.claims(), columns=columns)

    @cached_property
    def window_lag(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self._native.window_lag())

    @cached_property
    def trace(self) -> Optional[pd.DataFrame]:
        if self._trace is None:
            return None
        import pandas as pd

        columns = ["scheduler", "ev", "t", "cpu", "client", "start", "end", "weight"]
        return pd.DataFrame(self._trace, columns=columns)

    def __repr__(self) -> str:
        return f"SimResult({self.scenario!r}: {len(self._native.runs()['seed'])} runs)"


def _read_traces(folder: str) -> Iterator[Dict[str, Any]]:
    for path in sorted(glob.glob(os.path.join(folder, "*.trace.jsonl"))):
        with open(path, encoding="utf-8") as f:
            scheduler = None
            for line in f:
                event = json.loads(line)
                if event["ev"] == "meta":
                    scheduler = event["scheduler"]
                    continue
                event["scheduler"] = scheduler
                yield event


def simulate(
    scenario: ScenarioLike,
    schedulers: Optional[Sequence[str]] = None,
    seed: Optional[int] = None,
    repeat: Optional[int] = None,
    *,
    lag: bool = True,
    lag_clients: Optional[Sequence[str]] = None,
    lag_every: Union[int, str, None] = None,
    trace: bool = False,
    max_memory: Optional[int] = None,
    max_events: Optional[int] = None,
) -> SimResult:
    """Run ``scenario`` (a :class:`Scenario`, or a path to a scenario file)
    as ``propshare simulate`` does: every scheduler (or ``schedulers``,
    names or specs such as ``"gdq(delta=8)"``) on every repeat, with the
    same numbers. ``seed`` and ``repeat`` override the scenario's.

    ``lag``: sample the lag over time of ``lag_clients`` (default: the
    scenario's ``[report] lag_clients``, else the first eight) every
    ``lag_every`` (ns, or a duration such as ``"10ms"``) in the first repeat.
    ``trace``: also record the first repeat's events (``SimResult.trace``).
    Runs estimated above ``max_memory`` bytes (default 4 GiB) or
    ``max_events`` are refused with :class:`SimulationError`, as by the CLI.
    The GIL is released while it runs: threads run simulations in parallel.
    """
    scn = _scenario(scenario)
    kwargs = dict(
        schedulers=None if schedulers is None else list(schedulers),
        seed=seed,
        repeat=repeat,
        lag=lag,
        lag_clients=None if lag_clients is None else list(lag_clients),
        lag_every_ns=_ns(lag_every),
        max_memory=max_memory,
        max_events=max_events,
    )
    if not trace:
        return SimResult(_simulate(scn, **kwargs))
    folder = tempfile.mkdtemp(prefix="propshare-trace-")
    try:
        native = _simulate(scn, trace_dir=folder, **kwargs)
        return SimResult(native, list(_read_traces(folder)))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def trace_events(
    scenario: ScenarioLike, scheduler: str, seed: Optional[int] = None
) -> Iterator[Dict[str, Any]]:
    """The events of one run of ``scheduler`` on ``scenario`` (its first
    repeat), one dict at a time: ``{"ev": "run", "cpu", "client", "start",
    "end"}``, ``{"ev": "join", "t", "client", "weight"}``, ``leave``,
    ``block``, ``wake``, ``weight``. The run is simulated first (into a
    temporary file, removed when the iterator is exhausted or closed)."""
    scn = _scenario(scenario)
    folder = tempfile.mkdtemp(prefix="propshare-trace-")
    try:
        _simulate(scn, schedulers=[scheduler], seed=seed, repeat=1, lag=False, trace_dir=folder)
        yield from _read_traces(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
