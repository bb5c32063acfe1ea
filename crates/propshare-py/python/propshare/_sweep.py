"""Sweeps (`propshare.sweep`): one simulation per point of a grid, on every local core or on Ray.

A *grid* is a dict of lists (every combination is one task) or a list of
task dicts. A *task* is a dict; the default ``run`` (:func:`run_task`)
reads ``scenario`` (a :class:`propshare.Scenario` or a path), and optionally
``scheduler`` (a name or spec), ``seed`` and ``repeat``, and returns the
runs table of :func:`propshare.simulate`. Any other key is a label, copied
into the result's columns. A custom ``run(task)`` returns a DataFrame, a
dict (one row) or a list of dicts; task labels are added to its rows
unless it has columns of those names.

Backends:

* ``"local"`` (default): a thread pool over all cores. The simulator
  releases the GIL, so simulations run in parallel; a ``run`` that spends
  its time in Python code does not, and wants ``"process"``.
* ``"process"``: a process pool (``run`` and the tasks must pickle;
  a :class:`propshare.Scenario` pickles as its TOML text).
* ``"ray"``: Ray tasks, one per grid point, on ``ray.init(address)`` (a
  local Ray when ``address`` is None) unless Ray is already initialised.
  Needs ``pip install 'propshare[ray]'``.
"""

from __future__ import annotations

import itertools
import os
from concurrent.futures import FIRST_COMPLETED, Executor, ProcessPoolExecutor, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

if TYPE_CHECKING:
    import pandas as pd

Task = Dict[str, Any]
Grid = Union[Mapping[str, Sequence[Any]], Sequence[Task]]

BACKENDS = ("local", "process", "ray")


def tasks_of(grid: Grid) -> List[Task]:
    """The tasks of ``grid``: every combination of a dict of lists, in
    order (the last key varies fastest), or the list of dicts as given."""
    if isinstance(grid, Mapping):
        keys = list(grid)
        for k in keys:
            if isinstance(grid[k], (str, bytes)) or not hasattr(grid[k], "__iter__"):
                raise TypeError(f"grid[{k!r}] must be a list of values, got {type(grid[k]).__name__}")
        return [dict(zip(keys, values)) for values in itertools.product(*(list(grid[k]) for k in keys))]
    tasks = list(grid)
    for i, t in enumerate(tasks):
        if not isinstance(t, Mapping):
            raise TypeError(f"grid[{i}] must be a dict (a task), got {type(t).__name__}")
    return [dict(t) for t in tasks]


def run_task(task: Task) -> pd.DataFrame:
    """The default run: simulate ``task["scenario"]`` with ``scheduler``,
    ``seed`` and ``repeat`` when given; the runs table, without lag series."""
    from . import simulate

    if "scenario" not in task:
        raise KeyError("a task of the default run needs a 'scenario' (a Scenario or a path)")
    scheduler = task.get("scheduler")
    result = simulate(
        task["scenario"],
        schedulers=None if scheduler is None else [scheduler],
        seed=task.get("seed"),
        repeat=task.get("repeat"),
        lag=False,
    )
    return result.runs


def _label(v: Any) -> Any:
    from . import Scenario

    return v.name if isinstance(v, Scenario) else v


def _frame(task: Task, out: Any):
    import pandas as pd

    if isinstance(out, pd.DataFrame):
        frame = out.copy()
    elif isinstance(out, pd.Series):
        frame = out.to_frame().T
    elif isinstance(out, Mapping):
        frame = pd.DataFrame([out])
    else:
        frame = pd.DataFrame(list(out))
    labels = {k: _label(v) for k, v in task.items() if k not in frame.columns}
    for i, (k, v) in enumerate(labels.items()):
        frame.insert(i, k, [v] * len(frame))
    return frame


def _call(run: Callable[[Task], Any], task: Task):
    return _frame(task, run(task))


def _bar(total: int, progress: bool, desc: str):
    from tqdm.auto import tqdm

    return tqdm(total=total, disable=not progress, desc=desc, unit="run")


def _pool(executor: Executor, run, tasks: List[Task], bar) -> List[Any]:
    out: List[Any] = [None] * len(tasks)
    with executor:
        pending = {executor.submit(_call, run, t): i for i, t in enumerate(tasks)}
        try:
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for f in done:
                    out[pending.pop(f)] = f.result()
                    bar.update(1)
        except BaseException:
            for f in pending:
                f.cancel()
            raise
    return out


def _ray(run, tasks: List[Task], bar, address: Optional[str]) -> List[Any]:
    try:
        import ray
    except ImportError as e:
        raise ImportError("backend='ray' needs Ray: pip install 'propshare[ray]'") from e
    if not ray.is_initialized():
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    remote = ray.remote(_call)
    refs = [remote.remote(run, t) for t in tasks]
    index = {r: i for i, r in enumerate(refs)}
    out: List[Any] = [None] * len(tasks)
    pending = list(refs)
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for r in done:
                out[index[r]] = ray.get(r)
                bar.update(1)
    except BaseException:
        for r in pending:
            ray.cancel(r)
        raise
    return out


def sweep(
    grid: Grid,
    run: Optional[Callable[[Task], Any]] = None,
    backend: str = "local",
    *,
    workers: Optional[int] = None,
    address: Optional[str] = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Run ``run`` (default :func:`run_task`) on every task of ``grid`` and
    return one DataFrame, the tasks' rows in grid order, with a progress bar
    (tqdm). ``workers``: threads or processes of the local backends (default:
    every core); ``address``: the Ray cluster (``backend="ray"``)."""
    import pandas as pd

    if backend not in BACKENDS:
        raise ValueError(f"backend {backend!r}: one of {', '.join(BACKENDS)}")
    if workers is not None and workers < 1:
        raise ValueError(f"workers = {workers}: at least 1")
    tasks = tasks_of(grid)
    run = run or run_task
    workers = workers or os.cpu_count() or 1
    with _bar(len(tasks), progress, f"sweep ({backend})") as bar:
        if backend == "local":
            frames = _pool(ThreadPoolExecutor(max_workers=workers), run, tasks, bar)
        elif backend == "process":
            frames = _pool(ProcessPoolExecutor(max_workers=workers), run, tasks, bar)
        else:
            frames = _ray(run, tasks, bar, address)
    if not frames:
        return pd.DataFrame()
    return pd.concat(frames, ignore_index=True)
