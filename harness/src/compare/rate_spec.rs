//! `compare --rate`'s values: a rate per second, or a share of each
//! server's closed-loop capacity.

/// One `--rate` value: requests (or messages) per second, or a share of
/// the server's closed-loop capacity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RateSpec {
    PerSecond(f64),
    /// A share (0..1] of the closed-loop RPS measured in the same run.
    OfCapacity(f64),
}

impl RateSpec {
    /// `1000`, `2.5k`, `25%`; 0 and below is an error (a one-liner).
    pub fn parse(s: &str) -> Result<RateSpec, String> {
        let t = s.trim();
        let bad = || {
            format!("--rate {s:?}: a rate per second (1000, 20k) or a share of each server's closed-loop capacity (25%)")
        };
        if let Some(p) = t.strip_suffix('%') {
            let v: f64 = p.trim().parse().map_err(|_| bad())?;
            if !(v > 0.0 && v.is_finite()) {
                return Err(format!("--rate {s:?}: a share above 0% (0 sends nothing)"));
            }
            return Ok(RateSpec::OfCapacity(v / 100.0));
        }
        let (num, scale) = match t.strip_suffix(['k', 'K']) {
            Some(n) => (n, 1e3),
            None => (t, 1.0),
        };
        let v: f64 = num.trim().parse().map_err(|_| bad())?;
        if !(v > 0.0 && v.is_finite()) {
            return Err(format!(
                "--rate {s:?}: a rate above 0 per second (0 sends nothing)"
            ));
        }
        Ok(RateSpec::PerSecond(v * scale))
    }

    /// How the rate was asked for: `1000/s`, `25%`.
    pub fn label(self) -> String {
        match self {
            RateSpec::PerSecond(r) => format!("{r:.0}/s"),
            RateSpec::OfCapacity(s) => format!("{:.0}%", s * 100.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_as_per_second_or_shares_and_zero_is_refused() {
        assert_eq!(RateSpec::parse("1000"), Ok(RateSpec::PerSecond(1000.0)));
        assert_eq!(RateSpec::parse("20k"), Ok(RateSpec::PerSecond(20_000.0)));
        assert_eq!(RateSpec::parse("25%"), Ok(RateSpec::OfCapacity(0.25)));
        for bad in ["0", "0%", "-5", "fast", "", "NaN"] {
            let e = RateSpec::parse(bad).unwrap_err();
            assert!(e.starts_with("--rate") && !e.contains('\n'), "{e}");
        }
    }
}
