//! `worker-pool`: see the library's documentation.

#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    if let Err(e) = worker_pool::run(worker_pool::Args::from_env()) {
        eprintln!("worker-pool: {e:#}");
        std::process::exit(1);
    }
}
