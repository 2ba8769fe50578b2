//! Which OPcache JIT the PHP servers run (`compare --php-jit`): the same
//! `-d` flags for php-fpm, Swoole and RoadRunner's workers, so that a JIT
//! comparison needs no copy of compose/.

/// The JIT mode; the seed's configuration, and the default, is `tracing`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum PhpJit {
    /// The tracing JIT (`opcache.jit=tracing`; PHP's own `on` means it too).
    #[default]
    #[value(alias = "on")]
    Tracing,
    /// The function JIT (`opcache.jit=function`).
    Function,
    /// OPcache without the JIT (`opcache.jit=off`, no JIT buffer).
    Off,
}

impl PhpJit {
    /// `opcache.jit`'s value.
    pub fn name(self) -> &'static str {
        match self {
            PhpJit::Tracing => "tracing",
            PhpJit::Function => "function",
            PhpJit::Off => "off",
        }
    }

    /// The PHP command-line flags that set it (they come after `-c php.ini`:
    /// Debian's conf.d/10-opcache.ini sets `opcache.jit=off` after php.ini).
    pub fn ini_args(self) -> Vec<String> {
        let buffer = match self {
            PhpJit::Off => "0",
            _ => "128M",
        };
        vec![
            "-d".into(),
            format!("opcache.jit={}", self.name()),
            "-d".into(),
            format!("opcache.jit_buffer_size={buffer}"),
        ]
    }

    /// Whether a server's reported JIT (`/config`'s `jit`) is this mode.
    pub fn is_reported_as(self, reported: &str) -> bool {
        match self {
            PhpJit::Off => matches!(reported, "off" | "disable" | "0"),
            _ => !matches!(reported, "off" | "disable" | "0"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    #[test]
    fn each_mode_sets_opcache_jit_and_on_means_tracing() {
        assert_eq!(
            PhpJit::Off.ini_args(),
            ["-d", "opcache.jit=off", "-d", "opcache.jit_buffer_size=0"]
        );
        assert_eq!(PhpJit::default().ini_args()[1], "opcache.jit=tracing");
        assert_eq!(PhpJit::from_str("on", false), Ok(PhpJit::Tracing));
        assert!(PhpJit::Off.is_reported_as("off") && !PhpJit::Off.is_reported_as("tracing"));
        assert!(
            PhpJit::Tracing.is_reported_as("tracing") && !PhpJit::Tracing.is_reported_as("off")
        );
    }
}
