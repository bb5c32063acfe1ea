//! Two tenants with weights 3:1 sharing a pool: "batch" (weight 1) is
//! CPU-bound for ever, "web" (weight 3) comes in bursts. While web has
//! work it gets 3/4 of the CPU, batch 1/4; between bursts batch gets it all.
//! Shares are printed live, every 200 ms, over the last interval.
//!
//!     cargo run --release -p propshare-rt --example tenants [-- SECONDS [WORKERS [SCHEDULER]]]
//!
//! One group is one scheduler client, and a client runs on one worker at a
//! time (the papers' model): with 2 workers and 2 busy tenants each gets a
//! worker whatever the weights, which is the readjusted ideal. So the
//! default is 1 worker; try `-- 3 2` to see the cap, or add tenants.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use propshare_rt::{need_yield, Group, Runtime};

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// CPU-bound work as a closure: crunch until the slice is used, then hand
/// the rest back to the group as a new task (the runtime cannot split a
/// closure; `need_yield` says when to).
fn crunch(g: Group, stop: Arc<AtomicBool>) {
    while !need_yield() {
        spin(Duration::from_micros(50));
    }
    if !stop.load(Ordering::Relaxed) {
        let again = g.clone();
        // Err only once the runtime shuts down; then the work just ends.
        let _ = g.spawn(move || crunch(again, stop));
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let secs: u64 = args.next().map_or(Ok(3), |a| a.parse())?;
    let workers: usize = args.next().map_or(Ok(1), |a| a.parse())?;
    let spec = args.next().unwrap_or_else(|| "gr3mp".into());

    let rt = Runtime::builder().workers(workers).scheduler(&spec).slice(Duration::from_millis(1)).build()?;
    let batch = rt.group("batch", 1)?;
    let web = rt.group("web", 3)?;
    let stop = Arc::new(AtomicBool::new(false));
    {
        let (g, stop) = (batch.clone(), stop.clone());
        batch.spawn(move || crunch(g, stop))?;
    }

    println!("{workers} worker(s), {spec}; web weight 3 (bursty), batch weight 1 (CPU-bound)");
    println!(
        "{:>6}  {:>8} {:>8}  {:>9}  {:>10} {:>10}",
        "t ms", "web %", "batch %", "web queue", "web lag µs", "batch lag"
    );
    let start = Instant::now();
    let mut last = (0u64, 0u64);
    let mut tick = 0u64;
    while start.elapsed() < Duration::from_secs(secs) {
        // A burst every second: 100 requests of 1 ms each, about 0.13 s of
        // web's 3/4 share of one worker (more where the machine is loaded).
        if tick.is_multiple_of(5) {
            for _ in 0..100 {
                drop(web.spawn(|| spin(Duration::from_millis(1)))?);
            }
        }
        std::thread::sleep(Duration::from_millis(200));
        tick += 1;
        let (w, b) = (web.stats(), batch.stats());
        let (dw, db) = (w.cpu_ns - last.0, b.cpu_ns - last.1);
        last = (w.cpu_ns, b.cpu_ns);
        let total = (dw + db).max(1) as f64;
        println!(
            "{:>6}  {:>8.1} {:>8.1}  {:>9}  {:>10} {:>10}",
            start.elapsed().as_millis(),
            100.0 * dw as f64 / total,
            100.0 * db as f64 / total,
            w.queue_len,
            w.lag_ns / 1000,
            b.lag_ns / 1000
        );
    }
    stop.store(true, Ordering::Relaxed);
    let snap = rt.shutdown_cancel();
    for g in &snap.groups {
        println!(
            "{}: {} ms CPU, {} tasks run, {} cancelled at shutdown, lag range [{}, {}] µs",
            g.name,
            g.cpu_ns / 1_000_000,
            g.tasks_run(),
            g.cancelled,
            g.min_lag_ns / 1000,
            g.max_lag_ns / 1000
        );
    }
    assert!(snap.totals.balanced(), "every task is accounted for");
    Ok(())
}
