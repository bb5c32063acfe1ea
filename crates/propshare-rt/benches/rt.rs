//! propshare-rt benchmark (issue 19 item 4), three parts in one run:
//!
//! 1. per-task overhead: N empty / small closures submitted from one thread
//!    to 2 workers, against a crossbeam-channel pool, rayon and tokio;
//! 2. CPU shares and lag of CPU-bound weighted groups (1:2:3 and 10:1:1 on
//!    2 workers, 17 equal groups on 16 workers) against the readjusted ideal,
//!    GR3MP with both charges (`charge=runtime`: by the slice time measured);
//! 3. scaling from 1 to 16 workers, GR3MP (one central lock) against DWRR
//!    (one lock per worker) and GDQ (a global lock per step, one lock per
//!    run queue): ns per stop-and-pick (lock waits included) and decisions
//!    per second, in all and per worker.
//!
//! `cargo bench -p propshare-rt --bench rt` (about 5 minutes), or with
//! `-- --quick` (a few seconds, tiny sizes: keeps it working, proves
//! nothing); `-- --part 1` (or 2, 3) runs one part only; `-- --reps N`
//! repeats part 1's runs N times (default 3; its figures are medians).
//! Prints Markdown tables; docs/EXECUTOR.md has a run.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use propshare_rt::{JoinHandle, Runtime, Snapshot};

struct Sizes {
    tasks: u64,
    reps: usize,
    share_run: Duration,
    scale_run: Duration,
    scale_workers: &'static [usize],
}

const FULL: Sizes = Sizes {
    tasks: 1_000_000,
    reps: 3,
    share_run: Duration::from_secs(3),
    scale_run: Duration::from_secs(1),
    scale_workers: &[1, 2, 4, 8, 16],
};
const QUICK: Sizes = Sizes {
    tasks: 20_000,
    reps: 1,
    share_run: Duration::from_millis(200),
    scale_run: Duration::from_millis(100),
    scale_workers: &[1, 2],
};

/// A small task: about 1 µs of arithmetic.
fn small() -> u64 {
    let mut x = 0u64;
    for i in 0..400u64 {
        x = black_box(x.wrapping_mul(31).wrapping_add(i));
    }
    x
}

fn empty() -> u64 {
    black_box(1)
}

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// CPU-bound groups `g0`, `g1`, ... of these weights, one task each that
/// spins `work` and yields, again and again, until [`Spinners::stop`].
struct Spinners {
    stop: Arc<AtomicBool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Spinners {
    fn start(rt: &Runtime, weights: impl Iterator<Item = u64>, work: Duration) -> Spinners {
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = weights
            .enumerate()
            .map(|(i, w)| {
                let stop = stop.clone();
                rt.group(&format!("g{i}"), w)
                    .unwrap()
                    .spawn_future(async move {
                        while !stop.load(Ordering::Relaxed) {
                            spin(work);
                            propshare_rt::yield_now().await;
                        }
                    })
                    .unwrap()
            })
            .collect();
        Spinners { stop, tasks }
    }

    /// Ends every task and waits for it.
    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.tasks {
            h.join().unwrap();
        }
    }
}

// ----- 1. per-task overhead -----

fn crossbeam_pool(n: u64, work: fn() -> u64) -> Duration {
    let (tx, rx) = crossbeam_channel::unbounded::<Box<dyn FnOnce() + Send>>();
    let t = Instant::now();
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let rx = rx.clone();
            std::thread::spawn(move || {
                while let Ok(f) = rx.recv() {
                    f();
                }
            })
        })
        .collect();
    for _ in 0..n {
        tx.send(Box::new(move || {
            black_box(work());
        }))
        .unwrap();
    }
    drop(tx);
    for th in threads {
        th.join().unwrap();
    }
    t.elapsed()
}

fn rayon_scope(n: u64, work: fn() -> u64) -> Duration {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let t = Instant::now();
    pool.scope(|s| {
        for _ in 0..n {
            s.spawn(move |_| {
                black_box(work());
            });
        }
    });
    t.elapsed()
}

fn tokio_spawn(n: u64, work: fn() -> u64) -> Duration {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    let t = Instant::now();
    rt.block_on(async {
        let hs: Vec<_> = (0..n).map(|_| tokio::spawn(async move { work() })).collect();
        for h in hs {
            black_box(h.await.unwrap());
        }
    });
    t.elapsed()
}

/// `groups` groups served round-robin by the submitter; handles dropped
/// (detached); timed until `shutdown_drain` has run them all and stopped
/// the workers (as the crossbeam pool's row is timed until its threads
/// are joined), so the tasks carry nothing the other rows' do not.
fn propshare(spec: &str, groups: usize, n: u64, work: fn() -> u64) -> Duration {
    let rt = Runtime::builder().workers(2).scheduler(spec).track_lag(false).build().unwrap();
    let gs: Vec<_> = (0..groups).map(|i| rt.group(&format!("g{i}"), 1).unwrap()).collect();
    let t = Instant::now();
    for i in 0..n {
        drop(gs[i as usize % groups].spawn(move || black_box(work())));
    }
    let snap = rt.shutdown_drain();
    let e = t.elapsed();
    assert_eq!(snap.totals.completed, n, "{spec}: tasks lost");
    e
}

/// The same with every handle kept and joined (as tokio's row does).
fn propshare_joined(n: u64, work: fn() -> u64) -> Duration {
    let rt = Runtime::builder().workers(2).scheduler("gr3mp").track_lag(false).build().unwrap();
    let g = rt.group("g", 1).unwrap();
    let t = Instant::now();
    let hs: Vec<_> = (0..n).map(|_| g.spawn(work).unwrap()).collect();
    for h in hs {
        black_box(h.join().unwrap());
    }
    let e = t.elapsed();
    rt.shutdown_drain();
    e
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// Every row `reps` times, the rows interleaved within each repetition (so
/// a change of machine load falls on all of them alike); each figure is
/// the median over the repetitions, and the ratio the median of each
/// repetition's own ratio to the crossbeam pool.
fn overhead(s: &Sizes, reps: usize) -> f64 {
    println!(
        "## 1. Per-task overhead: {} tasks from one thread, 2 workers (ns per task, median of {reps} interleaved runs)\n",
        s.tasks
    );
    println!(
        "Wall: submit to done. CPU: this process's CPU time over the same run (all threads, an idle \
         worker's spinning included) per task, which a loaded machine disturbs less.\n"
    );
    println!("| executor | empty task | ratio to crossbeam | empty, CPU | small task (~1 µs) |");
    println!("|---|---:|---:|---:|---:|");
    let n = s.tasks;
    let per = |ns: u64| ns as f64 / n as f64;
    type Row = (&'static str, Box<dyn Fn(fn() -> u64) -> Duration>);
    let rows: Vec<Row> = vec![
        ("crossbeam-channel pool", Box::new(move |w| crossbeam_pool(n, w))),
        ("rayon scope.spawn", Box::new(move |w| rayon_scope(n, w))),
        ("tokio spawn + await", Box::new(move |w| tokio_spawn(n, w))),
        ("propshare-rt gr3mp, 1 group", Box::new(move |w| propshare("gr3mp", 1, n, w))),
        ("propshare-rt gr3mp, 1 group, join every handle", Box::new(move |w| propshare_joined(n, w))),
        ("propshare-rt gr3mp, 100 groups round-robin", Box::new(move |w| propshare("gr3mp", 100, n, w))),
        ("propshare-rt dwrr, 1 group", Box::new(move |w| propshare("dwrr", 1, n, w))),
        ("propshare-rt dwrr, 100 groups round-robin", Box::new(move |w| propshare("dwrr", 100, n, w))),
    ];
    // [row][rep]: (empty wall, empty CPU, small wall)
    let mut runs = vec![Vec::new(); rows.len()];
    for _ in 0..reps {
        for (i, (_, f)) in rows.iter().enumerate() {
            let cpu0 = process_cpu_ns();
            let e = f(empty);
            let cpu = process_cpu_ns() - cpu0;
            let sm = f(small);
            runs[i].push((per(e.as_nanos() as u64), per(cpu), per(sm.as_nanos() as u64)));
        }
    }
    let ratio_of = |i: usize| median(runs[i].iter().zip(&runs[0]).map(|(r, b)| r.0 / b.0).collect());
    for (i, (name, _)) in rows.iter().enumerate() {
        let col = |f: fn(&(f64, f64, f64)) -> f64| median(runs[i].iter().map(f).collect());
        println!("| {name} | {:.0} | {:.2} | {:.0} | {:.0} |", col(|r| r.0), ratio_of(i), col(|r| r.1), col(|r| r.2));
    }
    println!();
    ratio_of(3)
}

// ----- 2. shares and lag -----

/// CPU-bound groups (one future each: 100 µs of work, then yield) for
/// `run`: the snapshot, and each worker's share of the CPU the workers got.
fn shares_run(spec: &str, workers: usize, weights: &[u64], run: Duration) -> (Snapshot, Vec<f64>) {
    let rt = Runtime::builder().workers(workers).scheduler(spec).slice(Duration::from_millis(1)).build().unwrap();
    let spinners = Spinners::start(&rt, weights.iter().copied(), Duration::from_micros(100));
    std::thread::sleep(run);
    let snap = rt.snapshot();
    let cpu: Vec<u64> = rt.worker_stats().iter().map(|w| w.cpu_ns).collect();
    let total = cpu.iter().sum::<u64>().max(1) as f64;
    spinners.stop();
    rt.shutdown_drain();
    (snap, cpu.iter().map(|&c| c as f64 / total).collect())
}

/// The scheduler's proven lag bound for these weights, in slices (open
/// interval): GR3MP Theorem 2 (feasible weights after readjustment; g
/// groups of weights by floor(log2 w), taking the lower bound's
/// `phi_C/Phi_T` at its largest, 1), DWRR Theorem 1 (feasible weights,
/// fixed set; B = 3 slices, the registry's default). `None`: no bound stated.
fn bound(spec: &str, weights: &[u64], workers: usize) -> Option<(f64, f64)> {
    let mut orders: Vec<u32> = weights.iter().map(|w| w.ilog2()).collect();
    orders.sort_unstable();
    orders.dedup();
    let g = orders.len() as f64;
    let w_max = *weights.iter().max()? as f64;
    match spec.split('(').next()? {
        "gr3mp" => Some((-((g - 1.0) * (g - 2.0) / 2.0).max(0.0) - 4.0, 2.0 * g + 10.0 + (g - 1.0) / workers as f64)),
        "dwrr" => Some((-3.0 * w_max * 3.0, 2.0 * w_max * 3.0)),
        _ => None,
    }
}

/// (worst share error in points, (min, max) lag in slices, shares, ideal shares).
fn share_error(snap: &Snapshot) -> (f64, (f64, f64), Vec<f64>, Vec<f64>) {
    let total: u64 = snap.groups.iter().map(|g| g.cpu_ns).sum();
    let rates: Vec<f64> = snap.groups.iter().map(|g| g.ideal_rate.0 as f64 / g.ideal_rate.1 as f64).collect();
    let rate_sum: f64 = rates.iter().sum();
    let shares: Vec<f64> = snap.groups.iter().map(|g| g.cpu_ns as f64 / total.max(1) as f64).collect();
    let ideal: Vec<f64> = rates.iter().map(|r| r / rate_sum).collect();
    let worst = shares.iter().zip(&ideal).map(|(s, i)| (s - i).abs() * 100.0).fold(0.0, f64::max);
    let q = snap.slice_ns as f64;
    let lo = snap.groups.iter().map(|g| g.min_lag_ns).min().unwrap_or(0) as f64 / q;
    let hi = snap.groups.iter().map(|g| g.max_lag_ns).max().unwrap_or(0) as f64 / q;
    (worst, (lo, hi), shares, ideal)
}

fn shares(s: &Sizes) -> (f64, Vec<String>) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("## 2. Shares and lag of CPU-bound groups, 1 ms slices, {:?} each\n", s.share_run);
    println!(
        "Shares are of the thread CPU time the workers received; the ideal is the readjusted \
         fluid share; lag is against the fluid reference on the runtime's CPU clock \
         (propshare_rt::lag), in slices. This machine has {cores} CPUs: 16 workers on it are \
         oversubscribed (the OS time-slices them), which the CPU clock takes out of the lag \
         but not out of the wait times. The worker CPU split is each worker thread's share \
         of the CPU the workers got from the OS: the model has P equal CPUs, and a capped \
         group (one worker at a time) gets what its worker delivers.\n"
    );
    println!(
        "| scheduler | workers | weights | shares % | ideal % | worst error (points) | lag min..max (slices) | proven bound (slices) | worker CPU split % |"
    );
    println!("|---|---:|---|---|---|---:|---|---|---|");
    let equal17 = [1u64; 17];
    let cases: [(&str, usize, &[u64]); 3] =
        [("1:2:3", 2, &[1, 2, 3]), ("10:1:1", 2, &[10, 1, 1]), ("17 x 1", 16, &equal17)];
    let mut worst_two = 0.0f64;
    let mut outside = Vec::new();
    for spec in ["gr3mp", "gr3mp(charge=runtime)", "dwrr", "gdq", "sfs"] {
        for (label, workers, weights) in cases {
            let (snap, split) = shares_run(spec, workers, weights, s.share_run);
            let (worst, lag, sh, id) = share_error(&snap);
            let fmt = |v: &[f64]| {
                if v.len() > 4 {
                    let (lo, hi) = v.iter().fold((f64::MAX, 0.0f64), |(a, b), &x| (a.min(x), b.max(x)));
                    format!("{:.2}..{:.2}", lo * 100.0, hi * 100.0)
                } else {
                    v.iter().map(|x| format!("{:.2}", x * 100.0)).collect::<Vec<_>>().join(" / ")
                }
            };
            let feasible = weights.iter().all(|&w| w * workers as u64 <= weights.iter().sum::<u64>());
            let b = bound(spec, weights, workers).filter(|_| feasible || spec.starts_with("gr3mp"));
            let bound_text = b.map_or("none stated".to_string(), |(lo, hi)| format!("({lo:.1}, {hi:.1})"));
            println!(
                "| {spec} | {workers} | {label} | {} | {} | {worst:.2} | {:.1}..{:.1} | {bound_text} | {} |",
                fmt(&sh),
                fmt(&id),
                lag.0,
                lag.1,
                fmt(&split)
            );
            if workers == 2 && matches!(spec, "gr3mp" | "sfs") {
                worst_two = worst_two.max(worst);
            }
            if let Some((lo, hi)) = b {
                if lag.0 < lo - 1.0 || lag.1 > hi + 1.0 {
                    outside.push(format!("{spec} {label}"));
                }
            }
        }
    }
    println!();
    (worst_two, outside)
}

// ----- 3. scaling -----

struct Scale {
    workers: usize,
    picks: u64,
    pick_ns: f64,
    per_sec: f64,
    per_cpu_sec: f64,
}

/// This process's CPU time (all threads), ns.
fn process_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid, writable timespec and a clock every Linux has.
    if unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// 2 groups per worker, each with one future of ~2 µs steps, 20 µs slices.
fn scale_run(spec: &str, workers: usize, run: Duration) -> Scale {
    let rt = Runtime::builder()
        .workers(workers)
        .scheduler(spec)
        .slice(Duration::from_micros(20))
        .track_lag(false)
        .build()
        .unwrap();
    let spinners = Spinners::start(&rt, (0..2 * workers).map(|i| 1 + (i % 3) as u64), Duration::from_micros(2));
    let before: u64 = rt.worker_stats().iter().map(|w| w.picks).sum();
    let before_ns: u64 = rt.worker_stats().iter().map(|w| w.pick_ns).sum();
    let (t, cpu0) = (Instant::now(), process_cpu_ns());
    std::thread::sleep(run);
    let ws = rt.worker_stats();
    let (e, cpu) = (t.elapsed(), process_cpu_ns() - cpu0);
    spinners.stop();
    rt.shutdown_drain();
    let picks = ws.iter().map(|w| w.picks).sum::<u64>() - before;
    let pick_ns = ws.iter().map(|w| w.pick_ns).sum::<u64>() - before_ns;
    Scale {
        workers,
        picks,
        pick_ns: pick_ns as f64 / picks.max(1) as f64,
        per_sec: picks as f64 / e.as_secs_f64(),
        per_cpu_sec: picks as f64 * 1e9 / cpu.max(1) as f64,
    }
}

/// Max/min decisions per CPU-second over the worker counts: (DWRR, GDQ).
fn scaling(s: &Sizes) -> (f64, f64) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("## 3. Scaling: 2 groups per worker, ~2 µs task steps, 20 µs slices, {:?} each\n", s.scale_run);
    println!(
        "ns per pick is the wall time of one stop-and-pick, lock waits included. This machine \
         has {cores} CPUs: beyond {cores} workers the threads share them, so per-worker \
         throughput falls for that reason alone, and on a loaded machine so does the total: \
         decisions per CPU-second (this process's CPU time, all threads) and ns per pick \
         (contention) are the figures to compare.\n"
    );
    println!(
        "| scheduler | locking | workers | decisions | ns per pick | decisions/s | decisions/s per worker | decisions per CPU-s |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    let mut dwrr_per_worker = Vec::new();
    let mut gdq_per_worker = Vec::new();
    for (spec, locking) in [("gr3mp", "central"), ("dwrr", "distributed"), ("gdq", "distributed")] {
        for &w in s.scale_workers {
            let r = scale_run(spec, w, s.scale_run);
            let per_worker = r.per_sec / r.workers as f64;
            println!(
                "| {spec} | {locking} | {} | {} | {:.0} | {:.0} | {:.0} | {:.0} |",
                r.workers, r.picks, r.pick_ns, r.per_sec, per_worker, r.per_cpu_sec
            );
            match spec {
                "dwrr" => dwrr_per_worker.push(r.per_cpu_sec),
                "gdq" => gdq_per_worker.push(r.per_cpu_sec),
                _ => {}
            }
        }
    }
    println!();
    let spread = |v: &[f64]| {
        let (lo, hi) = v.iter().fold((f64::MAX, 0.0f64), |(a, b), &x| (a.min(x), b.max(x)));
        hi / lo.max(1.0)
    };
    (spread(&dwrr_per_worker), spread(&gdq_per_worker))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let part = match args.iter().position(|a| a == "--part").map(|i| args.get(i + 1).map(|p| p.parse::<u8>())) {
        None => None,
        Some(Some(Ok(p @ 1..=3))) => Some(p),
        Some(_) => {
            eprintln!("rt bench: --part takes 1, 2 or 3");
            std::process::exit(2);
        }
    };
    let runs = |p: u8| part.is_none_or(|q| q == p);
    let s = if quick { &QUICK } else { &FULL };
    let reps = match args.iter().position(|a| a == "--reps").map(|i| args.get(i + 1).map(|r| r.parse::<usize>())) {
        None => s.reps,
        Some(Some(Ok(r))) if r > 0 => r,
        Some(_) => {
            eprintln!("rt bench: --reps takes a count of at least 1");
            std::process::exit(2);
        }
    };
    println!("# propshare-rt benchmark{}\n", if quick { " (--quick: tiny sizes, figures mean nothing)" } else { "" });
    let ratio = runs(1).then(|| overhead(s, reps));
    let shares = runs(2).then(|| shares(s));
    let flat = runs(3).then(|| scaling(s));
    println!("## Targets (issue 19 item 5)\n");
    if let Some(ratio) = ratio {
        println!("* per-task overhead, empty task, 1 group: {ratio:.2}x the crossbeam pool, wall (target at most 2x)");
    }
    if let Some((share_pts, outside)) = shares {
        println!("* worst share error on 2 workers (gr3mp, sfs; 1:2:3 and 10:1:1): {share_pts:.2} points (target 1)");
        if outside.is_empty() {
            println!("* lag within the proven bound plus one slice in every row that has one");
        } else {
            println!("* lag outside the proven bound plus one slice: {}", outside.join(", "));
        }
    }
    if let Some((flat_dwrr, flat_gdq)) = flat {
        println!(
            "* decisions per CPU-second, max/min over the worker counts: DWRR {flat_dwrr:.2}x, GDQ {flat_gdq:.2}x (target: per-worker throughput within 2x)"
        );
    }
}
