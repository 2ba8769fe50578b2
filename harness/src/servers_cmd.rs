//! `harness servers`: the catalog — every server `harness compare` can
//! start, its model and language, whether it can run here, and if not why
//! and what to install.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::catalog::{self, Availability, Env};
use crate::env::Environment;
use crate::report::align;

#[derive(Debug, clap::Args, Clone)]
#[command(after_help = "\
Lists every server `harness compare` knows: its concurrency model and
language, whether it can run on this machine, and if not, why and what to
install. Servers started elsewhere are loaded with --target NAME=URL.

Example:
  harness servers")]
pub struct ServersArgs {
    /// The repository (compose/ and target/).
    #[arg(long, value_name = "DIR")]
    pub repo_dir: Option<PathBuf>,
}

/// The catalog as a table.
pub fn render(env: &Env) -> String {
    let mut rows = vec![
        ["server", "model", "language", "runs here", "what / why not"]
            .map(String::from)
            .to_vec(),
    ];
    let mut fixes = Vec::new();
    for e in catalog::catalog() {
        let (ok, what) = match e.availability(env) {
            Availability::Ready(d) => ("yes", d),
            Availability::Missing { reason, fix } => {
                fixes.push(format!("  {}: {fix}", e.name));
                ("no", reason)
            }
        };
        rows.push(vec![
            e.name.clone(),
            e.model.to_string(),
            e.language.to_string(),
            ok.to_string(),
            what,
        ]);
    }
    let mut out = align(&rows, &[]);
    let refused = catalog::roadrunner::install_refusals();
    if !refused.is_empty() {
        out.push_str("\nAsked by scripts/install-deps and refused:\n");
        for line in refused {
            out.push_str(&format!("  {line}\n"));
        }
    }
    if !fixes.is_empty() {
        out.push_str("\nTo run the others:\n");
        for f in fixes {
            out.push_str(&f);
            out.push('\n');
        }
    }
    out.push_str(&format!(
        "\nDatabase for db/work workloads: {}\n\
         Servers started elsewhere: harness compare --target NAME=URL (their CPU metered with \
         --target-pid NAME=PID or --target-container NAME=CONTAINER)\n",
        match embedded_mariadb::availability() {
            Ok(()) => "a private MariaDB (embedded) unless --mysql-url".to_string(),
            Err(e) => format!("--mysql-url needed: {e}"),
        }
    ));
    out.push_str(&environments());
    out
}

/// Every `--env` and whether it can be built here; the Docker engine's
/// version and storage driver, or why there is none.
pub fn environments() -> String {
    let mut out = format!(
        "Docker: {}\nEnvironments (--env):\n",
        match crate::env::docker::Engine::probe() {
            Ok(e) => e.describe(),
            Err(why) => format!("not available: {why}"),
        }
    );
    for e in Environment::ALL {
        let state = match e.availability() {
            Ok(()) => "available".to_string(),
            Err(why) => format!("not available: {why}"),
        };
        out.push_str(&format!("  {:<19} {state}\n", e.name()));
    }
    out
}

pub fn run(args: ServersArgs) -> anyhow::Result<ExitCode> {
    let env = Env::discover(args.repo_dir.as_deref());
    print!("{}", render(&env));
    Ok(ExitCode::SUCCESS)
}
