//! Rates and durations as users write them (tc units), for `--capacity`
//! and for reading the link of a `simulation:scenario` event.

/// Parses `20mbit`, `500kbit`, `1gbit`, `1mbps` (bytes/s as in tc) or a
/// bare number of bit/s.
pub fn parse_rate(s: &str) -> Option<f64> {
    let t = s.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult = match unit {
        "" | "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        "bps" => 8.0,
        "kbps" => 8e3,
        "mbps" => 8e6,
        "gbps" => 8e9,
        _ => return None,
    };
    let v = num.parse::<f64>().ok()? * mult;
    v.is_finite().then_some(v)
}

/// Parses a duration, `40ms`, `1.5s`, `250us`, `100ns` (or a bare number
/// of ms), into ms.
pub fn parse_duration_ms(s: &str) -> Option<f64> {
    let t = s.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult = match unit.trim() {
        "" | "ms" | "msec" | "msecs" => 1.0,
        "s" | "sec" | "secs" => 1e3,
        "us" | "usec" | "usecs" | "µs" => 1e-3,
        "ns" | "nsec" | "nsecs" => 1e-6,
        _ => return None,
    };
    let v = num.parse::<f64>().ok()? * mult;
    v.is_finite().then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_durations() {
        assert_eq!(parse_rate("20mbit"), Some(20e6));
        assert_eq!(parse_rate("1.5gbit"), Some(1.5e9));
        assert_eq!(parse_duration_ms("20ms"), Some(20.0));
        assert_eq!(parse_duration_ms("1.5s"), Some(1500.0));
        assert_eq!(parse_duration_ms("250us"), Some(0.25));
        assert_eq!(parse_duration_ms(" 7 ms "), Some(7.0));
        assert_eq!(parse_duration_ms("0"), Some(0.0));
        assert_eq!(parse_duration_ms("fast"), None);
    }
}
