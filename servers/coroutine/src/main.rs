use std::process::ExitCode;

use clap::Parser;

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    match coroutine::run(coroutine::Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("coroutine: {e:#}");
            ExitCode::FAILURE
        }
    }
}
