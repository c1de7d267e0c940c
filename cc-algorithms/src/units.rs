//! Rates as users write them, with tc's units.

/// Parses a rate with tc's units into bit/s: `bit`, `kbit`, `mbit`, `gbit`,
/// `tbit` (powers of 1000), or `bps`, `kbps`, `mbps`, `gbps` (bytes per
/// second, as tc reads them); a bare number is bit/s. Case-insensitive.
/// `None` for anything else, and for negative or non-finite values.
pub fn parse_rate(s: &str) -> Option<f64> {
    let t = s.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == '+' || c == '-'))
        .unwrap_or(t.len());
    // "e" is part of a number only when digits follow it, e.g. 1e6.
    let (num, unit) = t.split_at(split);
    let mult = match unit {
        "" | "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        "tbit" => 1e12,
        "bps" => 8.0,
        "kbps" => 8e3,
        "mbps" => 8e6,
        "gbps" => 8e9,
        _ => return None,
    };
    let v = num.parse::<f64>().ok()? * mult;
    (v.is_finite() && v >= 0.0).then_some(v)
}

/// Formats bit/s with the largest tc unit that keeps the number >= 1.
pub fn format_rate(bps: f64) -> String {
    for (unit, m) in [("tbit", 1e12), ("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)] {
        if bps >= m {
            return format!("{}{unit}", bps / m);
        }
    }
    format!("{bps}bit")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tc_units() {
        assert_eq!(parse_rate("40mbit"), Some(40e6));
        assert_eq!(parse_rate("500kbit"), Some(500e3));
        assert_eq!(parse_rate("1Gbit"), Some(1e9));
        assert_eq!(parse_rate("1.5mbit"), Some(1.5e6));
        assert_eq!(parse_rate("1000"), Some(1000.0));
        assert_eq!(parse_rate("1e6bit"), Some(1e6));
        // tc's bps is bytes per second.
        assert_eq!(parse_rate("1mbps"), Some(8e6));
        for bad in [
            "",
            "fast",
            "10 furlongs",
            "-5mbit",
            "nanbit",
            "infmbit",
            "mbit",
        ] {
            assert_eq!(parse_rate(bad), None, "{bad}");
        }
        assert_eq!(format_rate(40e6), "40mbit");
        assert_eq!(format_rate(1.0), "1bit");
        assert_eq!(format_rate(1e13), "10tbit");
    }
}
