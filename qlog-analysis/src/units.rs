//! Rates as users write them (tc units), for `--capacity`.

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
