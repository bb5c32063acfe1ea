//! Criterion benchmark: ns per steady-state decision (stop + pick, with
//! blocking and waking) for every registered scheduler, at a small and a
//! large N. `propshare bench` sweeps N and P more widely and plots.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use propshare_sim::bench::BenchDriver;

fn decisions(c: &mut Criterion) {
    let mut group = c.benchmark_group("decision");
    group.sample_size(20);
    for name in propshare::registry::names() {
        for (n, p) in [(1_000usize, 1usize), (1_000, 8), (65_536, 8)] {
            let Ok(mut d) = BenchDriver::new(name, n, p) else { continue };
            for _ in 0..(2 * n).min(100_000) {
                d.step();
            }
            group.bench_with_input(BenchmarkId::new(name, format!("N={n},P={p}")), &n, |b, _| b.iter(|| d.step()));
        }
    }
    group.finish();
}

criterion_group!(benches, decisions);
criterion_main!(benches);
