use clap::Parser;

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    if let Err(e) = event_loop::run(event_loop::Args::parse()) {
        eprintln!("event-loop: {e:#}");
        std::process::exit(1);
    }
}
