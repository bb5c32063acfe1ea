//! `propshare`: simulate, compare and reproduce proportional-share schedulers.

use anyhow::Result;
use clap::{Parser, Subcommand};
use propshare::{Weight, MS};
use propshare_sim::engine::{simulate, ClientSpec, SimConfig, SimReport};

mod run_cmd;

#[derive(Parser)]
#[command(name = "propshare", version, about = "Proportional-share CPU scheduling on multiprocessors")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the built-in demo workload on some schedulers and print a per-client table.
    Demo {
        /// Schedulers to run (comma-separated registry names).
        #[arg(long, value_delimiter = ',', default_value = "rr,wfq,wfq+readjust")]
        scheduler: Vec<String>,
        /// Number of CPUs.
        #[arg(long, default_value_t = 2)]
        cpus: usize,
    },
    /// List the registered schedulers.
    List,
    /// Schedule real Linux processes by weight (needs root).
    Run(Box<run_cmd::RunArgs>),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        None => demo(&["rr".into(), "wfq".into(), "wfq+readjust".into()], 2),
        Some(Command::Demo { scheduler, cpus }) => demo(&scheduler, cpus),
        Some(Command::Run(args)) => run_cmd::main(*args),
        Some(Command::List) => {
            for e in propshare::registry::SCHEDULERS {
                println!("{:<16} {}", e.name, e.summary);
            }
            Ok(())
        }
    };
    if let Err(e) = result {
        eprintln!("propshare: error: {e:#}");
        std::process::exit(2);
    }
}

/// The built-in workload: five CPU-bound clients, one of them infeasible on 2 CPUs.
fn demo_clients() -> Vec<ClientSpec> {
    [1u64, 1, 2, 4, 12]
        .iter()
        .enumerate()
        .map(|(i, &w)| ClientSpec::cpu_bound(format!("c{i}"), Weight::new(w).expect("positive")))
        .collect()
}

fn demo(schedulers: &[String], cpus: usize) -> Result<()> {
    let quantum = 10 * MS;
    let horizon = 10_000 * MS;
    println!("{cpus} CPUs, quantum 10 ms, 10 s, CPU-bound clients; shares in % of one CPU, lag in quanta");
    for name in schedulers {
        let report = simulate(name, SimConfig::new(cpus, quantum, horizon), demo_clients())?;
        print_table(&report);
    }
    Ok(())
}

fn print_table(r: &SimReport) {
    let q = r.config.quantum as f64;
    let h = r.config.horizon as f64;
    println!("\n{}", r.scheduler);
    println!(
        "{:<8} {:>8} {:>12} {:>12} {:>10} {:>10}",
        "client", "weight", "ideal %", "received %", "max lag", "min lag"
    );
    for c in &r.clients {
        println!(
            "{:<8} {:>8} {:>12.2} {:>12.2} {:>10.2} {:>10.2}",
            c.name,
            c.weight,
            100.0 * c.ideal / h,
            100.0 * c.received as f64 / h,
            c.max_lag / q,
            c.min_lag / q
        );
    }
}
