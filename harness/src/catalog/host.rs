//! What this machine offers the recipes: free ports, programs on PATH and
//! their versions, the current user.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;

/// A free TCP port on 127.0.0.1 (free when probed: the caller retries if
/// something takes it before its server binds).
pub fn free_port() -> anyhow::Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").context("cannot find a free port")?;
    Ok(l.local_addr()?.port())
}

/// A program in PATH or in the sbin directories.
pub fn find_program(names: &[&str]) -> Option<PathBuf> {
    names.iter().find_map(|n| embedded_mariadb::find_program(n))
}

/// The first line of `program args` (stdout, else stderr), for versions.
pub fn version_of(program: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    let text = if out.stdout.is_empty() {
        out.stderr
    } else {
        out.stdout
    };
    let s = String::from_utf8_lossy(&text);
    s.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_string)
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The current user's and group's names (for php-fpm's pool and nginx's `user`).
pub fn user_and_group() -> (String, String) {
    // SAFETY: getpwuid/getgrgid return pointers into static storage, read
    // immediately on this thread.
    unsafe {
        let name =
            |p: *const libc::c_char| std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned();
        let pw = libc::getpwuid(libc::geteuid());
        let user = if pw.is_null() {
            "nobody".to_string()
        } else {
            name((*pw).pw_name)
        };
        let gr = libc::getgrgid(libc::getegid());
        let group = if gr.is_null() {
            "nogroup".to_string()
        } else {
            name((*gr).gr_name)
        };
        (user, group)
    }
}
