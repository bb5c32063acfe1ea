"""The stepping API and the fluid reference, driven from a Python host."""

import pytest

import propshare
from propshare import EventError, Fluid, Scheduler, SchedulerError

MS = 1_000_000


def test_the_core_example_from_python():
    # The crate's doc example: WFQ, weights 3 and 1, eight quanta: 6 and 2.
    s = Scheduler("wfq", cpus=1, quantum=10 * MS)
    s.join(0, 0, 3)
    s.join(0, 1, 1)
    runs, now = [0, 0], 0
    for _ in range(8):
        client, slice_ = s.pick(now, 0)
        now += slice_
        s.stopped(now, 0, client, slice_)
        runs[client] += 1
    assert runs == [6, 2]


def test_a_python_host_stays_within_a_few_quanta_of_the_fluid_reference():
    cpus, q = 2, MS
    s, fluid = Scheduler("gr3mp", cpus=cpus, quantum=q), Fluid(cpus)
    weights = {0: 5, 1: 3, 2: 1, 3: 1, 4: 2}
    for c, w in weights.items():
        s.join(0, c, w)
        fluid.join(0, c, w)
    received = dict.fromkeys(weights, 0)
    for k in range(2000):
        now = k * q
        picked = [s.pick(now, cpu) for cpu in range(cpus)]
        for cpu, p in enumerate(picked):
            assert p is not None
            client, slice_ = p
            s.stopped(now + q, cpu, client, q)
            received[client] += q
        s.check_invariants()
        for c in weights:
            assert abs(fluid.ideal(now + q, c) - received[c]) < 3 * q
    assert fluid.rate(0) == (5, 6)  # 5/12 of 2 CPUs


def test_refused_events_raise_and_change_nothing():
    s = Scheduler("gdq(delta=8)", cpus=2, quantum=MS)
    assert s.name == "gdq(delta=8)" and s.cpus == 2
    s.join(0, 0, 1)
    with pytest.raises(EventError, match="already joined"):
        s.join(0, 0, 1)
    with pytest.raises(EventError, match="weight"):
        s.join(0, 1, 0)
    with pytest.raises(EventError, match="does not exist"):
        s.pick(0, 5)
    assert s.pick(10, 0)[0] == 0
    with pytest.raises(EventError, match="backwards"):
        s.pick(5, 1)
    with pytest.raises(EventError, match="running"):
        s.block(10, 0)
    with pytest.raises(ValueError, match="reason"):
        s.stopped(11, 0, 0, 1, "sleepy")
    s.stopped(11, 0, 0, 1, "blocked")
    assert s.pick(11, 0) is None
    s.wake(12, 0)
    assert s.pick(12, 1)[0] == 0
    with pytest.raises(SchedulerError, match="unknown scheduler"):
        Scheduler("nope")
    with pytest.raises(SchedulerError, match="CPUs"):
        Scheduler("wfq", cpus=0)


def test_fluid_reference_on_its_own():
    f = Fluid(2)
    f.join(0, 0, 1)
    f.join(0, 1, 1)
    f.join(0, 2, 2)
    # Weight 2 of 4 on 2 CPUs is one whole CPU, capped; the others share the other.
    assert f.rate(2) == (1, 1) and f.rate(0) == (1, 2)
    assert f.ideal(1000, 2) == 1000 and f.ideal(1000, 0) == 500
    f.block(1000, 2)
    assert f.rate(0) == (1, 1)
    assert f.ideal(2000, 0) == 1500
    f.set_weight(2000, 0, 3)
    f.wake(2000, 2)
    # From 2000: weights 3, 1, 2 on 2 CPUs: client 1 gets 1/3 of a CPU.
    assert f.leave(3000, 1) == pytest.approx(1500 + 1000 / 3, abs=1e-6)
    assert f.clients == [0, 2]
    with pytest.raises(EventError, match="not present"):
        f.ideal(3000, 1)
    with pytest.raises(EventError, match="already joined"):
        f.join(3000, 0, 1)
    with pytest.raises(EventError, match="backwards"):
        f.ideal(10, 0)
    with pytest.raises(EventError, match="cannot wake"):
        f.wake(3000, 0)
    with pytest.raises(ValueError):
        Fluid(0)
