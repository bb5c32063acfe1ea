// SPDX-License-Identifier: GPL-2.0-only
//! The loop around our own BPF side (`src/pscx/main.bpf.c`, the default):
//! load it, read its messages from the `events` ring buffer into the host
//! model ([`OwnHost`]), and send the core's decisions back through the
//! `pscx_decide` syscall program, which puts them in the CPU's slot and kicks
//! that CPU.
//!
//! The host's main thread switches itself to `SCHED_EXT` once attached, and
//! the BPF side runs it outside the model, at once, on the CPU whose message
//! woke it (so it is never starved by the tasks it schedules, and needs no
//! kicker thread). It sleeps in `poll` on the ring buffer, which the BPF side
//! wakes only for the messages that free a CPU in the model (enqueue, a stop
//! that is not runnable, a dropped decision, an exit): that CPU is idle
//! until the host decides, so the host's own run time fills that gap.

use crate::clients::Weights;
use crate::jobs::{self, JobWeights};
use crate::own_host::OwnHost;
use crate::pscx_intf::{pscx_consts_PSCX_MAX_CPUS, pscx_decision, pscx_event};
use crate::pscx_skel::{PscxSkel, PscxSkelBuilder};
use crate::{mono_ns, own_cpu_ns, Opts};
use libbpf_rs::ProgramInput;
use scx_utils::{compat, scx_ops_attach, scx_ops_load, scx_ops_open, uei_exited, uei_report};
use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A task that waited this long for a decision is run by the BPF side's
/// safety net (the kernel's watchdog allows 5 s).
const FALLBACK_NS: u64 = 1_000_000_000;
/// Longest sleep in `poll` (the loop also checks signals, jobs and the time).
const POLL: Duration = Duration::from_millis(50);

/// Send one decision (`pid > 0`) or a kick (`pid == 0`) to the BPF side.
fn decide(skel: &PscxSkel, cpu: usize, pid: i32, slice: u64, preempt: bool) -> Result<(), String> {
    let mut d = pscx_decision { cpu: cpu as i32, pid, slice, preempt: preempt as u32, pad: 0 };
    // SAFETY: `d` is a plain C struct that lives for the whole call; the
    // kernel copies `size_of_val(&d)` bytes from it.
    let ctx = unsafe { std::slice::from_raw_parts_mut(&mut d as *mut _ as *mut u8, std::mem::size_of_val(&d)) };
    let input = ProgramInput { context_in: Some(ctx), ..Default::default() };
    match skel.progs.pscx_decide.test_run(input) {
        Ok(out) if out.return_value == 0 => Ok(()),
        Ok(out) => Err(format!("pscx_decide returned {}", out.return_value as i32)),
        Err(e) => Err(format!("pscx_decide: {e}")),
    }
}

/// Open, configure, load and attach the BPF side.
fn load(
    open_object: &mut MaybeUninit<libbpf_rs::OpenObject>,
    cpus: usize,
    partial: bool,
    quantum: u64,
    exact_slices: bool,
) -> anyhow::Result<(PscxSkel<'_>, libbpf_rs::Link)> {
    let builder = PscxSkelBuilder::default();
    let mut skel = scx_ops_open!(builder, open_object, pscx_ops, None::<libbpf_rs::libbpf_sys::bpf_object_open_opts>)?;
    let ops = skel.struct_ops.pscx_ops_mut();
    ops.flags = *compat::SCX_OPS_ENQ_LAST;
    if partial {
        ops.flags |= *compat::SCX_OPS_SWITCH_PARTIAL;
    }
    let ro = skel.maps.rodata_data.as_mut().expect("rodata");
    ro.nr_cpus = cpus as u32;
    ro.fallback_ns = FALLBACK_NS;
    ro.fallback_slice_ns = quantum;
    ro.host_tgid = std::process::id() as i32;
    ro.exact_slices = exact_slices;
    let mut skel = scx_ops_load!(skel, pscx_ops, uei)?;
    let link = scx_ops_attach!(skel, pscx_ops)?;
    Ok((skel, link))
}

/// Run the jobs (or every SCHED_EXT task) under our own BPF side.
pub fn run(opts: Opts) -> anyhow::Result<ExitCode> {
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
    if cpus > pscx_consts_PSCX_MAX_CPUS as usize {
        anyhow::bail!("{cpus} CPUs online; this build handles at most {pscx_consts_PSCX_MAX_CPUS}");
    }
    let sched = propshare::registry::build(&opts.scheduler, propshare::scheduler::SchedConfig::new(cpus, opts.quantum))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let job_mode = !opts.jobs.is_empty();
    let mut host = OwnHost::new(sched, cpus, if job_mode { Weights::Fixed } else { Weights::Kernel });
    if opts.cgroups {
        host = host.with_cgroups();
    }
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        ctrlc::set_handler(move || stop.store(true, Ordering::Relaxed))
            .map_err(|e| anyhow::anyhow!("cannot install the SIGINT/SIGTERM handler: {e}"))?;
    }
    let (mut jobs, release_fd) =
        if job_mode { jobs::spawn_jobs(&opts.jobs).map_err(anyhow::Error::msg)? } else { (Vec::new(), -1) };
    let job_weight = JobWeights::new(&jobs);

    let t_attach = mono_ns();
    let partial = !opts.all_tasks;
    let mut open_object = MaybeUninit::uninit();
    let loaded = load(&mut open_object, cpus, partial, opts.quantum, opts.exact_slices);
    let (skel, link) = match loaded {
        Ok(x) => x,
        Err(e) => {
            jobs::kill_all(&jobs);
            return Err(e.context("cannot load our sched_ext BPF scheduler"));
        }
    };
    let inbox: Rc<RefCell<Vec<pscx_event>>> = Rc::new(RefCell::new(Vec::with_capacity(4096)));
    let ring = {
        let inbox = inbox.clone();
        let mut rbb = libbpf_rs::RingBufferBuilder::new();
        rbb.add(&skel.maps.events, move |data: &[u8]| {
            if data.len() >= std::mem::size_of::<pscx_event>() {
                // SAFETY: the BPF side writes whole `pscx_event`s; read_unaligned
                // copies one without assuming the ring's alignment.
                let e = unsafe { std::ptr::read_unaligned(data.as_ptr() as *const pscx_event) };
                inbox.borrow_mut().push(e);
            }
            0
        })?;
        rbb.build()?
    };
    opts.say_attached(cpus, t_attach, mono_ns(), " (own BPF side)", false);
    // The host joins the sched_ext class (partial mode switches only tasks
    // that ask): the BPF side runs it at once on the CPU whose message woke
    // it, which is idle until the host decides.
    if partial {
        let param = libc::sched_param { sched_priority: 0 };
        if unsafe { libc::sched_setscheduler(0, crate::SCHED_EXT, &param) } != 0 {
            eprintln!(
                "propshare-scx: warning: cannot switch the host to SCHED_EXT ({}); it stays in the fair class",
                std::io::Error::last_os_error()
            );
        }
    }
    if release_fd >= 0 {
        unsafe { libc::close(release_fd) };
    }
    let start = mono_ns();
    let cpu0 = own_cpu_ns();
    let sys0 = crate::own_sys_ns();
    let mut error: Option<String> = None;
    let mut loops: u64 = 0;
    let mut batch: Vec<pscx_event> = Vec::with_capacity(4096);
    let mut kicks: Vec<usize> = Vec::new();
    let mut event_time = start;

    while !stop.load(Ordering::Relaxed) && !uei_exited!(&skel, uei) {
        loops += 1;
        if opts.duration.is_some_and(|d| mono_ns() - start >= d) {
            break;
        }
        if opts.panic_after.is_some_and(|p| mono_ns() - start >= p) {
            panic!("propshare-scx: panic requested by --panic-after (a test of the hand-back)");
        }
        if let Err(e) = ring.poll(POLL) {
            if e.kind() != libbpf_rs::ErrorKind::Interrupted {
                error = Some(format!("reading the BPF ring buffer failed: {e}"));
                break;
            }
        }
        let now = mono_ns();
        std::mem::swap(&mut batch, &mut *inbox.borrow_mut());
        for e in batch.drain(..) {
            // Each message is handed to the core at the kernel's time of the
            // event (BPF's clock is CLOCK_MONOTONIC too), kept monotonic
            // across CPUs: the model records a block, an expiry or a wake-up
            // when it happened, not when this process got to read it.
            event_time = e.ts.clamp(event_time, now);
            let r = host.on_event(event_time, &e, |pid| job_weight.of(pid, e.weight as u64));
            match r {
                Ok(k) => kicks.extend(k),
                Err(err) => {
                    error = Some(err.to_string());
                    break;
                }
            }
        }
        if error.is_some() {
            break;
        }
        // Reap jobs (their EXIT message may come later: `exit` is idempotent).
        if job_mode {
            if let Err(e) = jobs::reap(&mut jobs, |pid, _| host.exit(now, pid, 0)) {
                error = Some(e.to_string());
            }
            if jobs::all_done(&jobs) {
                break;
            }
        }
        // Wake-up preemption the core asked for: end the slice of the task
        // decided for that CPU (it comes back as an ENQUEUE, charged what it ran).
        for k in kicks.drain(..) {
            if let Some(phys) = host.phys_of(k) {
                if decide(&skel, phys, 0, 0, true).is_ok() {
                    host.stats.kicks += 1;
                }
            }
        }
        // One decided task per free CPU, on a CPU it may use.
        match host.fill(now) {
            Ok(ds) => {
                for (k, phys, pid, slice) in ds {
                    if decide(&skel, phys, pid, slice, false).is_err() {
                        if let Err(e) = host.undo(now, k, pid) {
                            error = Some(e.to_string());
                        }
                    }
                }
            }
            Err(e) => error = Some(e.to_string()),
        }
        if error.is_some() {
            break;
        }
    }

    let wall = mono_ns() - start;
    let own = own_cpu_ns().saturating_sub(cpu0);
    let bss = skel.maps.bss_data.as_ref().expect("bss");
    let counters = serde_json::json!({
        "events": bss.nr_events,
        "lost": bss.nr_lost,
        "decided": bss.nr_decided,
        "moved": bss.nr_moved,
        "missed": bss.nr_missed,
        "fallback": bss.nr_fallback,
        "watch_kicks": bss.nr_watch_kicks,
        "slice_ends": bss.nr_slice_ends,
        "changes": bss.nr_changes,
        "kept": bss.nr_kept,
        "entered_running": bss.nr_entered_running,
    });
    drop(ring);
    drop(link);
    let (mut code, ejected) = crate::ending(uei_report!(&skel, uei).and_then(|info| info.report()), &error);
    if error.is_some() {
        jobs::kill_all(&jobs);
    }
    if opts.stats || job_mode {
        let s = serde_json::json!({
            "scheduler": opts.scheduler,
            "bpf_side": "own",
            "cpus": cpus,
            "quantum_ns": opts.quantum,
            "wall_ns": wall,
            "ejected": ejected,
            "own_cpu_ns": own,
            "own_sys_ns": crate::own_sys_ns().saturating_sub(sys0),
            "loops": loops,
            "host": host.stats,
            "bpf": counters,
            "jobs": jobs::json(&jobs),
        });
        eprintln!("PSCX_STATS {s}");
    }
    if job_mode && error.is_none() && ejected.is_none() {
        code = jobs::failed_status(&jobs).unwrap_or(code);
    }
    Ok(code)
}
