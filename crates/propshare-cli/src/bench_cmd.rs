//! `propshare bench`, `bench-sim` and `bench-insns`: what scheduling costs.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;

use propshare::{registry, Weight, MS};
use propshare_sim::alloc::{live, peak, reset_peak};
use propshare_sim::bench::{measure_balancing, measure_driver, BalancingResult, BenchDriver, BenchResult};
use propshare_sim::engine::{ClientSpec, Engine, SimConfig};
use propshare_sim::output::write_atomic;
use propshare_sim::plot::{line_chart, Scale, Series};

/// CPU time of the calling thread, ns, if the OS reports it. On a shared
/// machine this is the figure to compare: wall time also counts the time
/// other processes held the core.
fn thread_cpu_ns() -> Option<u64> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// The sizes measured: an N sweep at P = 8 and a P sweep at N = 65536
/// (`grid`: every combination). A scheduler is skipped where N < 2P.
fn configs(quick: bool, grid: bool) -> Vec<(usize, usize)> {
    let ns: &[usize] = if quick { &[16, 256, 4096] } else { &[16, 256, 4096, 65_536, 1_048_576] };
    let ps: &[usize] = if quick { &[1, 8] } else { &[1, 2, 8, 64, 1024] };
    let mut v = Vec::new();
    if grid {
        for &p in ps {
            for &n in ns {
                v.push((n, p));
            }
        }
    } else {
        let n_mid = if quick { 4096 } else { 65_536 };
        v.extend(ns.iter().map(|&n| (n, 8)));
        v.extend(ps.iter().filter(|&&p| p != 8).map(|&p| (n_mid, p)));
    }
    v.retain(|&(n, p)| n >= 2 * p);
    v
}

/// Run the benchmark and write table, CSV, plots and an HTML page to `out`.
/// `sizes`, if given, replaces the built-in (N, P) list.
pub fn bench(
    schedulers: &[String],
    quick: bool,
    grid: bool,
    sizes: Option<Vec<(usize, usize)>>,
    out: &Path,
    quiet: bool,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("--out {}", out.display()))?;
    let (batches, batch) = if quick { (30, 200) } else { (200, 1000) };
    let cfgs = sizes.unwrap_or_else(|| configs(quick, grid));
    let mut results: Vec<(BenchResult, f64)> = Vec::new();
    let started = Instant::now();
    if !quiet {
        eprintln!(
            "measuring {} schedulers x {} sizes ({} batches of {} decisions each)...",
            schedulers.len(),
            cfgs.len(),
            batches,
            batch
        );
    }
    println!("{:<20} {:>9} {:>6} {:>12} {:>12} {:>14}", "scheduler", "N", "P", "median ns", "p99 ns", "bytes/client");
    for name in schedulers {
        for &(n, p) in &cfgs {
            let before = live();
            let mut driver = BenchDriver::new(name, n, p).map_err(anyhow::Error::msg)?;
            let bytes = live().saturating_sub(before) as f64 / n as f64;
            let r = measure_driver(&mut driver, name, n, p, batches, batch);
            drop(driver);
            println!("{:<20} {:>9} {:>6} {:>12.1} {:>12.1} {:>14.1}", name, n, p, r.median_ns, r.p99_ns, bytes);
            results.push((r, bytes));
        }
    }
    let balancing = balancing(schedulers, &cfgs, Duration::from_millis(if quick { 200 } else { 1500 }), out)?;
    let elapsed = started.elapsed().as_secs_f64();
    let csv_path = out.join("bench.csv");
    let csv_err = || csv_path.display().to_string();
    write_atomic(&csv_path, |w| {
        writeln!(w, "scheduler,clients,cpus,median_ns,p99_ns,bytes_per_client,decisions")?;
        for (r, b) in &results {
            writeln!(
                w,
                "{},{},{},{:.2},{:.2},{:.1},{}",
                r.scheduler, r.clients, r.cpus, r.median_ns, r.p99_ns, b, r.decisions
            )?;
        }
        Ok(())
    })
    .with_context(csv_err)?;
    let by = |pred: &dyn Fn(&BenchResult) -> bool, x: &dyn Fn(&BenchResult) -> f64| -> Vec<Series> {
        schedulers
            .iter()
            .map(|s| Series {
                name: s.clone(),
                points: results
                    .iter()
                    .filter(|(r, _)| &r.scheduler == s && pred(r))
                    .map(|(r, _)| (x(r), r.median_ns))
                    .collect(),
            })
            .filter(|s| !s.points.is_empty())
            .collect()
    };
    let n_mid = if quick { 4096 } else { 65_536 };
    let vs_n = by(&|r| r.cpus == 8, &|r| r.clients as f64);
    let vs_p = by(&|r| r.clients == n_mid, &|r| r.cpus as f64);
    let plot_err = |e: Box<dyn std::error::Error>| anyhow::anyhow!("plot: {e}");
    for (file, title, x_label, series) in [
        ("bench_vs_n.svg", "ns per decision against N (P = 8)".to_string(), "clients N", &vs_n),
        ("bench_vs_p.svg", format!("ns per decision against P (N = {n_mid})"), "CPUs P", &vs_p),
    ] {
        let y_label = "ns per decision (median)";
        line_chart(&out.join(file), &title, x_label, y_label, series, (Scale::Log, Scale::Log))
            .map_err(plot_err)
            .with_context(|| out.display().to_string())?;
    }
    let mut html = String::new();
    let _ = write!(
        html,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>propshare: decision cost</title>\
         <style>body{{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto}}td,th{{border:1px solid #ccc;padding:2px 8px;text-align:right}}table{{border-collapse:collapse}}</style></head><body>\
         <h1>Decision cost</h1><p>One decision = <code>stopped</code> + <code>pick</code> on a steady mixed workload (1 in 16 stops blocks, paired with a wake). \
         Median and p99 over {batches} batches of {batch} decisions, after warm-up; wall-clock on a shared, noisy 2-core machine, so compare ratios measured in one run. \
         Memory: live heap bytes per client after setup. Run took {elapsed:.0} s. Repeat with <code>propshare bench{}</code>.</p>\
         <img src=\"bench_vs_n.svg\"><img src=\"bench_vs_p.svg\"><table><tr><th>scheduler</th><th>N</th><th>P</th><th>median ns</th><th>p99 ns</th><th>bytes/client</th></tr>",
        if quick { " --quick" } else { "" }
    );
    for (r, b) in &results {
        let _ = write!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.0}</td></tr>",
            r.scheduler, r.clients, r.cpus, r.median_ns, r.p99_ns, b
        );
    }
    html.push_str("</table>");
    if !balancing.is_empty() {
        let _ = write!(
            html,
            "<h2>DWRR: round-balancing steps</h2><p>Decisions of <code>dwrr</code> and <code>dwrr-cfs</code> timed one \
             by one and split by whether the pick ran a round-balancing step (its round-active was empty: an O(P) \
             survey of the other CPUs, the steals, and the queue swap). Same workload, with round slices \
             3Q&middot;w/1024 (the CFS port's weight scale) so that rounds are short enough to balance often. \
             Medians with the cost of a clock read pair subtracted; moved = clients stolen per step. \
             Also in bench_balancing.csv.</p><table><tr><th>scheduler</th><th>N</th><th>P</th>\
             <th>ordinary ns</th><th>balancing ns</th><th>balancing p99 ns</th><th>ratio</th>\
             <th>steps per 1000 decisions</th><th>moved per step</th></tr>"
        );
        for b in &balancing {
            html.push_str("<tr>");
            for cell in balancing_cells(b) {
                let _ = write!(html, "<td>{cell}</td>");
            }
            html.push_str("</tr>");
        }
        html.push_str("</table>");
    }
    html.push_str("<script>window.addEventListener('load',function(){var i=document.images,n=0;for(var k=0;k<i.length;k++){if(i[k].complete&&i[k].naturalWidth>0)n++;}document.body.setAttribute('data-plots',n+'/'+i.length);});</script></body></html>\n");
    write_atomic(&out.join("bench.html"), |w| w.write_all(html.as_bytes()))
        .with_context(|| out.join("bench.html").display().to_string())?;
    println!("\n{} configurations in {elapsed:.0} s; table, CSV and plots in {}", results.len(), out.display());
    Ok(())
}

/// `v` with `decimals`, or "n/a" where nothing was measured (NaN).
/// One row of the round-balancing table, as the console and the HTML
/// report print it: scheduler, N, P, ordinary and balancing medians,
/// balancing p99, their ratio, steps per 1000 decisions, moved per step.
fn balancing_cells(b: &BalancingResult) -> [String; 9] {
    [
        b.scheduler.clone(),
        b.clients.to_string(),
        b.cpus.to_string(),
        or_na(b.ordinary_median_ns, 0),
        or_na(b.balancing_median_ns, 0),
        or_na(b.balancing_p99_ns, 0),
        or_na(b.balancing_median_ns / b.ordinary_median_ns.max(1.0), 1),
        format!("{:.2}", b.balancing_per_1000),
        format!("{:.2}", b.moved_per_step),
    ]
}

fn or_na(v: f64, decimals: usize) -> String {
    if v.is_nan() {
        "n/a".into()
    } else {
        format!("{v:.decimals$}")
    }
}

/// `v` with one decimal, or an empty CSV field where nothing was measured.
fn or_empty(v: f64) -> String {
    if v.is_nan() {
        String::new()
    } else {
        format!("{v:.1}")
    }
}

/// DWRR's round-balancing steps timed apart ([`measure_balancing`]) for the
/// DWRR schedulers among `schedulers`, at every size: a table on stdout and
/// `bench_balancing.csv`.
fn balancing(
    schedulers: &[String],
    cfgs: &[(usize, usize)],
    budget: Duration,
    out: &Path,
) -> anyhow::Result<Vec<BalancingResult>> {
    let mut results = Vec::new();
    for name in schedulers {
        for &(n, p) in cfgs {
            let Some(r) = measure_balancing(name, n, p, budget).map_err(anyhow::Error::msg)? else { break };
            if results.is_empty() {
                println!(
                    "\nround balancing (DWRR, slices 3Q*w/1024; ns with the clock read cost subtracted)\n\
                     {:<10} {:>7} {:>5} {:>12} {:>13} {:>14} {:>7} {:>13} {:>9}",
                    "scheduler",
                    "N",
                    "P",
                    "ordinary ns",
                    "balancing ns",
                    "balancing p99",
                    "ratio",
                    "steps/1000",
                    "moved"
                );
            }
            let [scheduler, n, p, ordinary, balancing, p99, ratio, steps, moved] = balancing_cells(&r);
            println!("{scheduler:<10} {n:>7} {p:>5} {ordinary:>12} {balancing:>13} {p99:>14} {ratio:>7} {steps:>13} {moved:>9}");
            results.push(r);
        }
    }
    if !results.is_empty() {
        write_atomic(&out.join("bench_balancing.csv"), |w| {
            writeln!(
                w,
                "scheduler,clients,cpus,ordinary_median_ns,balancing_median_ns,balancing_p99_ns,\
                 balancing_per_1000,moved_per_step,steps,decisions,clock_ns"
            )?;
            for r in &results {
                writeln!(
                    w,
                    "{},{},{},{},{},{},{:.3},{:.3},{},{},{:.1}",
                    r.scheduler,
                    r.clients,
                    r.cpus,
                    or_empty(r.ordinary_median_ns),
                    or_empty(r.balancing_median_ns),
                    or_empty(r.balancing_p99_ns),
                    r.balancing_per_1000,
                    r.moved_per_step,
                    r.steps,
                    r.decisions,
                    r.clock_ns
                )?;
            }
            Ok(())
        })
        .with_context(|| out.join("bench_balancing.csv").display().to_string())?;
    }
    Ok(results)
}

/// One bench-sim measurement.
struct SimRun {
    decisions: u64,
    wall_s: f64,
    cpu_s: Option<f64>,
    /// Live heap after `Engine::new`, per client.
    setup_bytes: f64,
    /// Largest live heap during the run (simulator + scheduler + fluid), per client.
    peak_bytes: f64,
}

impl SimRun {
    /// Quanta per second of CPU time (wall time where CPU time is unknown).
    fn rate(&self) -> f64 {
        self.decisions as f64 / self.cpu_s.unwrap_or(self.wall_s)
    }

    fn times(&self) -> String {
        match self.cpu_s {
            Some(c) => format!("{:.2} s CPU ({:.2} s wall)", c, self.wall_s),
            None => format!("{:.2} s wall", self.wall_s),
        }
    }
}

/// Simulate `n` CPU-bound clients (bench weights) on `p` CPUs for `quanta_per_cpu` quanta of 10 ms.
fn sim_run(scheduler: &str, n: usize, p: usize, quanta_per_cpu: u64) -> anyhow::Result<SimRun> {
    let clients: Vec<ClientSpec> =
        (0..n).map(|i| ClientSpec::cpu_bound(format!("c{i}"), propshare_sim::bench::bench_weight(i as u32))).collect();
    let cfg = SimConfig::new(p, 10 * MS, 10 * MS * quanta_per_cpu);
    let before = reset_peak();
    let sched = registry::build(scheduler, propshare::SchedConfig { cpus: p, quantum: cfg.quantum, seed: 1 })?;
    let engine = Engine::new(sched, cfg, clients)?;
    let setup = live().saturating_sub(before);
    let (t0, c0) = (Instant::now(), thread_cpu_ns());
    let report = engine.run(&mut |_| {})?;
    let (wall_s, c1) = (t0.elapsed().as_secs_f64(), thread_cpu_ns());
    let cpu_s = c0.zip(c1).map(|(a, b)| b.saturating_sub(a) as f64 / 1e9);
    let peak_bytes = peak().saturating_sub(before) as f64 / n as f64;
    Ok(SimRun { decisions: report.decisions, wall_s, cpu_s, setup_bytes: setup as f64 / n as f64, peak_bytes })
}

/// `bench-sim`: simulator throughput and memory at scale. Quanta per second
/// count the whole run (the joins at time 0 included) and use the thread's
/// CPU time where the OS reports it. `only` = (N, P, quanta per CPU) runs one
/// configuration instead of the two standard ones.
pub fn bench_sim(scheduler: &str, quick: bool, only: Option<(usize, usize, u64)>) -> anyhow::Result<()> {
    registry::check(scheduler)?;
    if let Some((n, p, q)) = only {
        let r = sim_run(scheduler, n, p, q)?;
        println!(
            "{scheduler}: N = {n}, P = {p}, metrics on: {} quanta in {} = {:.1} million quanta/s; {:.0} bytes per client peak",
            r.decisions,
            r.times(),
            r.rate() / 1e6,
            r.peak_bytes
        );
        return Ok(());
    }
    let (n, p, quanta) = if quick { (1000, 8, 200_000u64) } else { (1000, 8, 5_000_000u64) };
    let r = sim_run(scheduler, n, p, quanta / p as u64)?;
    println!(
        "{scheduler}: N = {n}, P = {p}, metrics on: {} quanta in {} = {:.1} million quanta/s",
        r.decisions,
        r.times(),
        r.rate() / 1e6
    );
    let (big_n, big_p, big_q) = if quick { (100_000, 128, 4u64) } else { (1_000_000, 1024, 4u64) };
    let r = sim_run(scheduler, big_n, big_p, big_q * (big_n / big_p) as u64 / 4)?;
    println!(
        "{scheduler}: N = {big_n}, P = {big_p}: {} quanta (joins included) in {} = {:.1} million quanta/s; \
         memory per client (simulator + scheduler + fluid): {:.0} bytes after setup, {:.0} bytes peak during the run",
        r.decisions,
        r.times(),
        r.rate() / 1e6,
        r.setup_bytes,
        r.peak_bytes
    );
    Ok(())
}

/// `bench-insns`: set up, then run exactly `decisions` decisions (for callgrind).
pub fn bench_insns(scheduler: &str, clients: usize, cpus: usize, decisions: u64) -> anyhow::Result<()> {
    let mut d = BenchDriver::new(scheduler, clients, cpus).map_err(anyhow::Error::msg)?;
    for _ in 0..decisions {
        d.step();
    }
    println!("{} decisions", d.steps());
    let _ = Weight::ONE;
    Ok(())
}
