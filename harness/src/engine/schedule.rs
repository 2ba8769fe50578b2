//! The order in which a connection walks the paths of a mix, computed once
//! per run: a cycle of path indices in which path `i` appears `weight_i / g`
//! times (`g`: the weights' greatest common divisor), spread by smooth
//! weighted round-robin (nginx's upstream balancing). Each connection walks
//! it with its own cursor, so choosing a path costs an index and an
//! increment, with no RNG, lock or atomic, and a connection's sequence is
//! deterministic. Any run of consecutive requests of a connection is within
//! one request of the weights' proportions for two paths (within two for
//! up to six, as the tests check).

/// The most paths a plan may mix.
pub const MAX_PATHS: usize = 256;
/// The longest cycle, after dividing the weights by their gcd.
pub const MAX_CYCLE: u64 = 65_536;

/// The cycle of path indices for `weights`, in order.
pub(crate) fn cycle(weights: &[u32]) -> Result<Vec<u16>, String> {
    if weights.is_empty() {
        return Err("no path to send".into());
    }
    if weights.len() > MAX_PATHS {
        return Err(format!(
            "{} paths: at most {MAX_PATHS} can be mixed",
            weights.len()
        ));
    }
    if weights.contains(&0) {
        return Err("every path's weight must be at least 1".into());
    }
    let g = weights.iter().fold(0, |g, &w| gcd(g, w));
    let w: Vec<i64> = weights.iter().map(|&x| i64::from(x / g)).collect();
    let total: i64 = w.iter().sum();
    if total as u64 > MAX_CYCLE {
        return Err(format!(
            "the weights add up to {total} once divided by their greatest common \
             divisor ({g}); at most {MAX_CYCLE}: use smaller weights"
        ));
    }
    let mut current = vec![0i64; w.len()];
    let mut out = Vec::with_capacity(total as usize);
    for _ in 0..total {
        let mut best = 0;
        for i in 0..w.len() {
            current[i] += w[i];
            if current[i] > current[best] {
                best = i;
            }
        }
        current[best] -= total;
        out.push(best as u16);
    }
    Ok(out)
}

/// Where connection `conn` of `conns` starts in a cycle of `len`: spread
/// evenly, so the heavy requests of a 99:1 mix are not sent all at once.
pub(crate) fn start(conn: usize, conns: usize, len: usize) -> u32 {
    (conn as u64 * len as u64 / conns.max(1) as u64 % len.max(1) as u64) as u32
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(c: &[u16], n: usize) -> Vec<usize> {
        let mut k = vec![0; n];
        for &i in c {
            k[i as usize] += 1;
        }
        k
    }

    #[test]
    fn each_path_appears_its_weight_over_the_gcd() {
        assert_eq!(cycle(&[1]).unwrap(), vec![0]);
        assert_eq!(cycle(&[7]).unwrap(), vec![0]);
        assert_eq!(cycle(&[50, 50]).unwrap(), vec![0, 1]);
        let c = cycle(&[99, 1]).unwrap();
        assert_eq!(counts(&c, 2), vec![99, 1]);
        // The heavy one in the middle, not at either end.
        assert_eq!(c.iter().position(|&i| i == 1), Some(50));
        assert_eq!(counts(&cycle(&[6, 4, 2]).unwrap(), 3), vec![3, 2, 1]);
    }

    #[test]
    fn any_window_is_within_two_of_the_proportions() {
        for weights in [
            vec![99, 1],
            vec![3, 2],
            vec![5, 3, 1],
            vec![52, 44, 59, 36, 54, 48],
            vec![1, 1, 1, 1000],
        ] {
            let c = cycle(&weights).unwrap();
            let len = c.len();
            let total: u32 = weights.iter().sum();
            let bound = if weights.len() == 2 { 1.0 } else { 2.0 };
            for from in 0..len {
                let mut k = vec![0usize; weights.len()];
                for n in 1..=len {
                    k[c[(from + n - 1) % len] as usize] += 1;
                    for (i, &w) in weights.iter().enumerate() {
                        let want = n as f64 * f64::from(w) / f64::from(total);
                        let off = (k[i] as f64 - want).abs();
                        assert!(off < bound, "{weights:?} from {from}, {n}: {off}");
                    }
                }
            }
        }
    }

    #[test]
    fn bad_weights_are_errors() {
        assert!(cycle(&[]).is_err());
        assert!(cycle(&[1, 0]).unwrap_err().contains("at least 1"));
        let e = cycle(&[100_000, 1]).unwrap_err();
        assert!(e.contains("100001") && e.contains("65536"), "{e}");
        // Large weights with a large common divisor are fine.
        assert_eq!(cycle(&[3_000_000, 1_000_000]).unwrap(), vec![0, 0, 1, 0]);
        assert!(cycle(&vec![1; MAX_PATHS + 1]).is_err());
    }

    #[test]
    fn starts_are_spread_over_the_cycle() {
        let s: Vec<u32> = (0..4).map(|j| start(j, 4, 100)).collect();
        assert_eq!(s, vec![0, 25, 50, 75]);
        assert_eq!(start(3, 8, 1), 0);
        assert!((0..300).all(|j| start(j, 300, 100) < 100));
    }
}
