//! How the harness reads and writes quantities: durations on the command
//! line (`10s`, `500ms`), timestamps in documents (`2026-11-30T21:04:47Z`).

use std::time::Duration;

/// Parses `10s`, `500ms`, `250us`, `2m`, `1h`, `1.5s`; a bare number is seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (try 10s, 500ms, 2m)"))?;
    let scale = match unit.trim() {
        "" | "s" | "sec" | "secs" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {s:?} (use ms, s, m or h)"
            ))
        }
    };
    let secs = value * scale;
    if !(0.0..=1e9).contains(&secs) {
        return Err(format!("{s:?} is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// `secs` since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Parses a point in time: Unix seconds (`1796083200`, `1796083200.5`) or
/// RFC 3339 (`2026-12-01T00:40:00Z`, `2026-12-01T01:40:00.250+01:00`).
/// Returns seconds since the Unix epoch.
pub fn parse_time(s: &str) -> Result<f64, String> {
    let s = s.trim();
    let bad = || {
        format!(
            "{s:?} is not a time: give Unix seconds (1796083200) or RFC 3339 \
             (2026-12-01T00:40:00Z, 2026-12-01T01:40:00+01:00)"
        )
    };
    if let Ok(secs) = s.parse::<f64>() {
        return if secs.is_finite() && secs >= 0.0 {
            Ok(secs)
        } else {
            Err(bad())
        };
    }
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Result<i64, String> {
        s.get(r)
            .filter(|t| !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit()))
            .and_then(|t| t.parse().ok())
            .ok_or_else(bad)
    };
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(bad());
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return Err(bad());
    }
    let mut rest = &s[19..];
    let mut frac = 0.0;
    if let Some(r) = rest.strip_prefix('.') {
        let digits = r.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        frac = format!("0.{}", &r[..digits]).parse().map_err(|_| bad())?;
        rest = &r[digits..];
    }
    let offset_s = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6
            && matches!(rest.as_bytes()[0], b'+' | b'-')
            && rest.as_bytes()[3] == b':' =>
        {
            let two = |t: &str| {
                t.parse::<i64>()
                    .ok()
                    .filter(|_| t.bytes().all(|c| c.is_ascii_digit()))
            };
            let (Some(oh), Some(om)) = (two(&rest[1..3]), two(&rest[4..6])) else {
                return Err(bad());
            };
            let sign = if rest.starts_with('-') { -1 } else { 1 };
            sign * (oh * 3600 + om * 60)
        }
        _ => return Err(bad()),
    };
    // Howard Hinnant's days_from_civil.
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset_s;
    if secs < 0 {
        return Err(bad());
    }
    Ok(secs as f64 + frac)
}

/// Now, as [`utc`].
pub fn now_utc() -> String {
    utc(std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_in_unix_seconds_and_rfc_3339() {
        assert_eq!(parse_time("1796083200"), Ok(1_796_083_200.0));
        assert_eq!(parse_time("1796083200.5"), Ok(1_796_083_200.5));
        assert_eq!(parse_time("2026-12-01T00:00:00Z"), Ok(1_796_083_200.0));
        assert_eq!(utc(1_796_083_200), "2026-12-01T00:00:00Z");
        assert_eq!(
            parse_time("2026-12-01T01:00:00.25+01:00"),
            Ok(1_796_083_200.25)
        );
        assert_eq!(parse_time("2026-11-30T23:30:00-00:30"), Ok(1_796_083_200.0));
        for bad in [
            "",
            "soon",
            "-5",
            "2026-13-01T00:00:00Z",
            "2026-12-01T00:00:00",
            "2026-12-01T00:00:00+0100",
            "NaN",
        ] {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("10 parsecs").is_err());
    }

    #[test]
    fn utc_formats_known_instants() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_796_092_200), "2026-12-01T02:30:00Z");
    }
}
