//! The `harness` binary: parses the command line and hands it to
//! [`harness::run_cli`]; `harness --help` explains the commands.

use std::process::ExitCode;

use clap::Parser;

#[cfg(feature = "jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = harness::cli::Cli::parse();
    match harness::run_cli(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("harness: {e:#}");
            ExitCode::FAILURE
        }
    }
}
