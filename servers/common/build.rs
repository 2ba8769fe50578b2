//! Records the compiler's `major.minor` version for the servers' `/config` `runtime`.

use std::process::Command;

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        // "rustc 1.95.0 (59807616e 2026-04-14)" -> "1.95"
        .and_then(|s| {
            let full = s.split_whitespace().nth(1)?.to_owned();
            let mut parts = full.split('.');
            Some(format!("{}.{}", parts.next()?, parts.next()?))
        })
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=SERVER_COMMON_RUSTC_VERSION={version}");
    println!("cargo:rerun-if-env-changed=RUSTC");
    println!("cargo:rerun-if-changed=build.rs");
}
