use propshare_proc::*;
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cpus = parse_cpus(&args[0]).unwrap();
    let secs: f64 = args[1].parse().unwrap();
    let jobs = parse_jobs(&args[2..]).unwrap();
    let r = run(RunOptions {
        jobs,
        cpus: Some(cpus),
        duration: Some((secs * 1e9) as u64),
        trace: Some("/tmp/try.jsonl".into()),
        verbose: true,
        ..RunOptions::default()
    })
    .unwrap();
    print!("{}", r.to_table());
}
