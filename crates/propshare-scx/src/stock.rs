// SPDX-License-Identifier: GPL-2.0-only
//! The loop around the stock `scx_rustland_core` BPF side (`--bpf stock`),
//! kept for comparison with our own (docs/KERNEL.md): it feeds the
//! enqueue-only messages and `/proc` probes to the inference in `host.rs`,
//! dispatches one decided task per CPU, and sleeps until shortly before the
//! earliest slice end in the model. Jobs are handled by `jobs.rs`, as in
//! `own.rs`.

use crate::bpf::{BpfScheduler, DispatchedTask, QueuedTask};
use crate::clients::Weights;
use crate::host::{Host, Msg, Probe};
use crate::jobs::{self, JobWeights};
use crate::{mono_ns, own_cpu_ns, proc_state, sum_exec, Opts};
use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::process::ExitCode;

/// Wake this long before the earliest slice end in the model.
const SLEEP_MARGIN: u64 = 500_000;
/// Never sleep less than this between loops.
const MIN_SLEEP: u64 = 100_000;
/// Period of the kicker thread.
const KICK_PERIOD: u64 = 50_000_000;

pub fn run(opts: Opts) -> anyhow::Result<ExitCode> {
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
    let sched = propshare::registry::build(&opts.scheduler, propshare::scheduler::SchedConfig::new(cpus, opts.quantum))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let job_mode = !opts.jobs.is_empty();
    let mut host = Host::new(sched, cpus, if job_mode { Weights::Fixed } else { Weights::Kernel });
    let (mut jobs, release_fd) =
        if job_mode { jobs::spawn_jobs(&opts.jobs).map_err(anyhow::Error::msg)? } else { (Vec::new(), -1) };
    let job_weight = JobWeights::new(&jobs);
    // Everything that allocates a lot or starts threads happens before init,
    // which locks memory and forbids mmap.
    let mut latest: HashMap<i32, QueuedTask> = HashMap::with_capacity(4096);
    // The kicker: a normal-class (EEVDF) thread, started before init, that
    // wakes every 50 ms. When our timer wakes this (SCHED_EXT) process, the
    // stock BPF side queues it without waking an idle CPU, so with every CPU
    // idle nothing ran it (or drained our decisions) until the 1 s heartbeat,
    // and the watchdog once ejected us at start-up. Any scheduling event on an
    // idle CPU makes it call ops.dispatch, which drains our decisions and runs
    // us; the kicker's wake-ups are those events. It stays on the fair class:
    // partial mode switches only the calling thread to SCHED_EXT. 50 ms keeps
    // such a stall far below the 5 s watchdog; a 2 ms period cost up to 20
    // points of fairness (each wake-up preempts a running task).
    // Only needed with the stock BPF side.
    let kicker_stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let kicker = {
        let stop = kicker_stop.clone();
        std::thread::Builder::new()
            .name("pscx-kicker".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                let ts = libc::timespec { tv_sec: 0, tv_nsec: KICK_PERIOD as libc::c_long };
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
                }
            })
            .map_err(|e| anyhow::anyhow!("cannot start the kicker thread: {e}"))?
    };
    let mut open_object = MaybeUninit::uninit();
    let t_attach = mono_ns();
    let partial = !opts.all_tasks;
    let mut bpf =
        match BpfScheduler::init(&mut open_object, None, 0, partial, false, false, false, opts.quantum, "propshare") {
            Ok(b) => b,
            Err(e) => {
                jobs::kill_all(&jobs);
                return Err(e.context("cannot load the sched_ext BPF scheduler"));
            }
        };
    opts.say_attached(cpus, t_attach, mono_ns(), "", true);
    if release_fd >= 0 {
        unsafe { libc::close(release_fd) };
    }
    let start = mono_ns();
    let cpu0 = own_cpu_ns();
    let mut seq: u64 = 0;
    let mut last_sweep = start;
    let mut error: Option<String> = None;
    let mut loops: u64 = 0;

    while !bpf.exited() {
        loops += 1;
        let now = mono_ns();
        if let Some(d) = opts.duration {
            if now - start >= d {
                break;
            }
        }
        if let Some(p) = opts.panic_after {
            if now - start >= p {
                panic!("propshare-scx: panic requested by --panic-after (a test of the hand-back)");
            }
        }
        loop {
            match bpf.dequeue_task() {
                Ok(Some(t)) => {
                    let m = Msg {
                        pid: t.pid,
                        flags: t.flags,
                        start_ts: t.start_ts,
                        stop_ts: t.stop_ts,
                        exec_runtime: t.exec_runtime,
                        weight: t.weight,
                    };
                    let r = host.on_msg(now, &m, |pid| job_weight.of(pid, t.weight));
                    if let Err(e) = r {
                        error = Some(format!("scheduler refused an event: {e}"));
                    }
                    latest.insert(t.pid, t);
                }
                Ok(None) => break,
                Err(e) => {
                    error = Some(format!("reading the BPF ring buffer failed: {e}"));
                    break;
                }
            }
        }
        if error.is_some() {
            break;
        }
        // Probe decided tasks that may have blocked or exited.
        // Probe eagerly only when fewer tasks run in the kernel than the model
        // has decided (one blocked, exited, or has not started yet).
        let occupied = host.slots().iter().flatten().count() as u64;
        let eager = *bpf.nr_running_mut() < occupied;
        for (k, pid) in host.due_probes(now, eager) {
            let base = host.slots()[k].and_then(|s| s.sum_at_dispatch);
            let since = host.slots()[k].map(|s| s.since).unwrap_or(now);
            let p = match proc_state(pid) {
                None | Some(b'Z') | Some(b'X') => Probe::Gone { ran: (now - since).min(opts.quantum) },
                Some(b'R') => Probe::Runnable,
                Some(_) => {
                    let ran = match (base, sum_exec(pid)) {
                        (Some(b), Some(s)) => s.saturating_sub(b),
                        _ => (now - since).min(opts.quantum),
                    };
                    Probe::Sleeping { ran }
                }
            };
            if let Err(e) = host.on_probe(now, k, pid, p) {
                error = Some(format!("scheduler refused an event: {e}"));
            }
        }
        // Reap jobs.
        if job_mode {
            let reaped = jobs::reap(&mut jobs, |pid, cpu| {
                let ran = host
                    .slots()
                    .iter()
                    .flatten()
                    .find(|s| s.pid == pid)
                    .and_then(|s| s.sum_at_dispatch)
                    .map(|b| cpu.saturating_sub(b))
                    .unwrap_or(0);
                latest.remove(&pid);
                host.on_exit(now, pid, ran)
            });
            if let Err(e) = reaped {
                error = Some(format!("scheduler refused an event: {e}"));
            }
            if jobs::all_done(&jobs) {
                break;
            }
        }
        // Sweep blocked tasks that exited without telling us.
        if now - last_sweep >= 1_000_000_000 {
            last_sweep = now;
            for pid in host.blocked() {
                if matches!(proc_state(pid), None | Some(b'Z') | Some(b'X'))
                    && !jobs.iter().any(|j| j.pid == pid && !j.done)
                {
                    let _ = host.on_exit(now, pid, 0);
                    latest.remove(&pid);
                }
            }
        }
        // One decided task per free CPU.
        match host.fill(now, sum_exec) {
            Ok(ds) => {
                for (k, pid, slice) in ds {
                    let Some(t) = latest.get(&pid) else { continue };
                    let mut d = DispatchedTask::new(t);
                    d.cpu = k as i32;
                    d.slice_ns = slice;
                    seq += 1;
                    d.vtime = seq;
                    if bpf.dispatch_task(&d).is_err() {
                        let _ = host.undo_dispatch(now, k, pid);
                    }
                }
            }
            Err(e) => error = Some(format!("scheduler refused an event: {e}")),
        }
        if error.is_some() {
            break;
        }
        // Tell the BPF side how many tasks wait for a CPU, then sleep (never
        // `sched_yield`, which would put this process back in the BPF side's
        // queue ahead of the task just decided for this CPU) until shortly
        // before the earliest slice in the model ends. While we sleep, CPUs
        // run their decided tasks; once we wake we are queued, and the BPF side
        // runs us at the next slice end (with a non-zero count), so the expired
        // task is enqueued to us instead of having its slice refilled.
        let pending = host.pending();
        // Never 0: when our timer wakes us we are queued in the BPF side, and
        // only a non-zero count makes it run us (a 0 would leave us queued
        // while CPUs refill their tasks' slices or idle).
        *bpf.nr_scheduled_mut() = pending.max(1);
        let now2 = mono_ns();
        let free = host.slots().iter().any(|s| s.is_none());
        let sleep = match host.slots().iter().flatten().map(|s| s.since + s.slice).min() {
            _ if free && pending > 0 => 1_000_000,
            Some(end) => end.saturating_sub(now2).saturating_sub(SLEEP_MARGIN),
            None => opts.quantum,
        }
        .clamp(MIN_SLEEP, opts.quantum);
        let ts = libc::timespec {
            tv_sec: (sleep / 1_000_000_000) as libc::time_t,
            tv_nsec: (sleep % 1_000_000_000) as libc::c_long,
        };
        unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
    }

    kicker_stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let wall = mono_ns() - start;
    let own = own_cpu_ns().saturating_sub(cpu0);
    let kernel_counters = (
        *bpf.nr_user_dispatches_mut(),
        *bpf.nr_kernel_dispatches_mut(),
        *bpf.nr_cancel_dispatches_mut(),
        *bpf.nr_bounce_dispatches_mut(),
        *bpf.nr_failed_dispatches_mut(),
        *bpf.nr_sched_congested_mut(),
    );
    let exit = bpf.shutdown_and_report();
    // An exit kind above UNREG_KERN (an error, a stall caught by the watchdog)
    // is an ejection; our own unload on a signal or at the end is not.
    let (mut code, ejected) = crate::ending(exit.and_then(|info| info.report()), &error);
    if opts.stats || job_mode {
        let s = serde_json::json!({
            "scheduler": opts.scheduler,
            "cpus": cpus,
            "quantum_ns": opts.quantum,
            "wall_ns": wall,
            "ejected": ejected,
            "own_cpu_ns": own,
            "loops": loops,
            "host": host.stats,
            "bpf": {
                "user_dispatches": kernel_counters.0,
                "kernel_dispatches": kernel_counters.1,
                "cancel_dispatches": kernel_counters.2,
                "bounce_dispatches": kernel_counters.3,
                "failed_dispatches": kernel_counters.4,
                "congested": kernel_counters.5,
            },
            "jobs": jobs::json(&jobs),
        });
        eprintln!("PSCX_STATS {s}");
    }
    let _ = kicker.join();
    if job_mode && error.is_none() && ejected.is_none() {
        code = jobs::failed_status(&jobs).unwrap_or(code);
    }
    Ok(code)
}
