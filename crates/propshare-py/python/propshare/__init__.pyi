import os
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Union

import pandas as pd

from ._propshare import (
    EventError as EventError,
    Fluid as Fluid,
    PropshareError as PropshareError,
    Scenario as Scenario,
    ScenarioError as ScenarioError,
    Scheduler as Scheduler,
    SchedulerError as SchedulerError,
    SchedulerInfo,
    SimulationError as SimulationError,
    __version__ as __version__,
    check_scheduler as check_scheduler,
    parse_duration as parse_duration,
)

ScenarioLike = Union[Scenario, str, "os.PathLike[str]"]
Task = Dict[str, Any]

def schedulers() -> List[SchedulerInfo]: ...
def scheduler_params() -> pd.DataFrame: ...

class SimResult:
    @property
    def scenario(self) -> str: ...
    @property
    def runs(self) -> pd.DataFrame: ...
    @property
    def clients(self) -> pd.DataFrame: ...
    @property
    def lag(self) -> pd.DataFrame: ...
    @property
    def claims(self) -> pd.DataFrame: ...
    @property
    def window_lag(self) -> pd.DataFrame: ...
    @property
    def trace(self) -> Optional[pd.DataFrame]: ...

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
) -> SimResult: ...
def trace_events(scenario: ScenarioLike, scheduler: str, seed: Optional[int] = None) -> Iterator[Dict[str, Any]]: ...
def tasks_of(grid: Union[Mapping[str, Sequence[Any]], Sequence[Task]]) -> List[Task]: ...
def run_task(task: Task) -> pd.DataFrame: ...
def sweep(
    grid: Union[Mapping[str, Sequence[Any]], Sequence[Task]],
    run: Optional[Callable[[Task], Any]] = None,
    backend: str = "local",
    *,
    workers: Optional[int] = None,
    address: Optional[str] = None,
    progress: bool = True,
) -> pd.DataFrame: ...
