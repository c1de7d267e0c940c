//! The units users write in link descriptions, as tc reads them: times
//! (`40ms`, `1.5s`, `250us`), probabilities (`1%`, `0.5%`, `0.01`), sizes
//! (`64kb`, `1500b`, `2mb`; `k`/`kb` are 1024 bytes as in tc) and queue
//! limits (`100pkt`, `64kb`, `1bdp`), and rates (`20mbit`, `1gbit`, `500kbps`).

/// Splits `"12.5ms"` into `(12.5, "ms")`. The unit is lowercased.
fn split_number(s: &str) -> Option<(f64, String)> {
    let t = s.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-' || c == 'e'))
        .unwrap_or(t.len());
    // A trailing "e" belongs to the unit ("1e" is not a number, and no unit
    // here starts with e), so back off until the number parses.
    let (mut num, mut unit) = t.split_at(split);
    while !num.is_empty() && num.parse::<f64>().is_err() && num.ends_with('e') {
        let cut = num.len() - 1;
        num = &t[..cut];
        unit = &t[cut..];
    }
    let v = num.parse::<f64>().ok()?;
    v.is_finite().then(|| (v, unit.trim().to_string()))
}

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

/// When `s` is a rate in tc's byte units (`20mbps` is 160 Mbit/s), a note
/// saying so with its bit rate, for the run's first line; `None` for a
/// rate in bits or no rate.
pub fn byte_rate_note(s: &str) -> Option<String> {
    let t = s.trim().to_ascii_lowercase();
    if !t.ends_with("bps") {
        return None;
    }
    let bps = parse_rate(&t)?;
    let human = |v: f64| {
        let (x, u) = [
            (1e12, "Tbit/s"),
            (1e9, "Gbit/s"),
            (1e6, "Mbit/s"),
            (1e3, "kbit/s"),
        ]
        .into_iter()
        .find(|(m, _)| v >= *m)
        .unwrap_or((1.0, "bit/s"));
        let n = format!("{:.3}", v / x);
        format!("{} {u}", n.trim_end_matches('0').trim_end_matches('.'))
    };
    let bits = t.trim_end_matches("bps").to_string() + "bit";
    Some(format!(
        "`{}` is {}: as in tc, bps is bytes per second (`{bits}` is {})",
        s.trim(),
        human(bps),
        human(bps / 8.0),
    ))
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

/// Parses a duration into nanoseconds: `s`, `ms`, `us`, `ns` (tc also says
/// `sec`, `msec`, `usec`). A unit is required, except for `0`.
pub fn parse_duration_ns(s: &str) -> Option<u64> {
    let (v, unit) = split_number(s)?;
    let mult = match unit.as_str() {
        "s" | "sec" | "secs" => 1e9,
        "ms" | "msec" | "msecs" => 1e6,
        "us" | "usec" | "usecs" | "µs" => 1e3,
        "ns" | "nsec" | "nsecs" => 1.0,
        "" if v == 0.0 => 1.0,
        _ => return None,
    };
    let ns = v * mult;
    (0.0..1e18).contains(&ns).then(|| ns.round() as u64)
}

/// Parses a probability: `1%`, `0.5%`, or a bare fraction in [0, 1].
pub fn parse_probability(s: &str) -> Option<f64> {
    let (v, unit) = split_number(s)?;
    let p = match unit.as_str() {
        "%" => v / 100.0,
        "" => v,
        _ => return None,
    };
    (0.0..=1.0).contains(&p).then_some(p)
}

/// Parses a size in bytes, with tc's units: `b` or bare bytes, `k`/`kb`
/// (1024), `m`/`mb` (1024²), `g`/`gb` (1024³), `kbit`/`mbit`/`gbit` (bits,
/// powers of 1000).
pub fn parse_size_bytes(s: &str) -> Option<u64> {
    let (v, unit) = split_number(s)?;
    let mult = match unit.as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1024.0,
        "m" | "mb" => 1024.0 * 1024.0,
        "g" | "gb" => 1024.0 * 1024.0 * 1024.0,
        "kbit" => 1e3 / 8.0,
        "mbit" => 1e6 / 8.0,
        "gbit" => 1e9 / 8.0,
        _ => return None,
    };
    let b = v * mult;
    (0.0..1e15).contains(&b).then(|| b.round() as u64)
}

/// A queue limit as written: packets, bytes, or a multiple of the
/// bandwidth-delay product (rate × RTT of the whole path).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueLimit {
    /// At most this many packets.
    Packets(u64),
    /// At most this many bytes.
    Bytes(u64),
    /// This many BDPs (rate × round-trip propagation delay), in bytes.
    Bdp(f64),
}

impl QueueLimit {
    /// As a scenario writes it: `100pkt`, `150000b`, `1bdp`.
    pub fn to_spec(self) -> String {
        match self {
            QueueLimit::Packets(p) => format!("{p}pkt"),
            QueueLimit::Bytes(b) => format!("{b}b"),
            QueueLimit::Bdp(f) => format!("{f}bdp"),
        }
    }
}

/// Parses `100pkt` (also `p`, `pkts`, `packets`), `64kb` (any size unit of
/// [`parse_size_bytes`]) or `1bdp`/`0.5bdp`.
pub fn parse_queue(s: &str) -> Option<QueueLimit> {
    let (v, unit) = split_number(s)?;
    match unit.as_str() {
        "pkt" | "pkts" | "p" | "packet" | "packets" => {
            (v >= 1.0 && v.fract() == 0.0 && v < 1e9).then_some(QueueLimit::Packets(v as u64))
        }
        "bdp" => (v > 0.0 && v < 1e6).then_some(QueueLimit::Bdp(v)),
        "" => None, // a bare number is ambiguous: packets or bytes?
        _ => parse_size_bytes(s)
            .filter(|&b| b > 0)
            .map(QueueLimit::Bytes),
    }
}

/// [`parse_queue`] for field `field` of a link description: the error
/// names the field, the value and what is allowed.
pub fn parse_queue_field(field: &str, s: &str) -> Result<QueueLimit, super::LinkError> {
    parse_queue(s).ok_or_else(|| {
        super::err(
            field,
            format!("`{s}` is not a queue limit: packets (100pkt), bytes (64kb, 150000b) or BDP multiples (1bdp, 0.5bdp)"),
        )
    })
}

/// Formats nanoseconds the way tc would print them (`40ms`, `1.5s`, `250us`).
pub fn format_duration_ns(ns: u64) -> String {
    if ns == 0 {
        "0ms".into()
    } else if ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns.is_multiple_of(1000) {
        format!("{}us", ns / 1000)
    } else {
        format!("{ns}ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_rate_is_said_with_its_bit_rate() {
        let n = byte_rate_note("20mbps").unwrap();
        assert_eq!(
            n,
            "`20mbps` is 160 Mbit/s: as in tc, bps is bytes per second (`20mbit` is 20 Mbit/s)"
        );
        assert_eq!(byte_rate_note("20mbit"), None);
        assert_eq!(byte_rate_note("fast"), None);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ns("40ms"), Some(40_000_000));
        assert_eq!(parse_duration_ns("1.5s"), Some(1_500_000_000));
        assert_eq!(parse_duration_ns("250us"), Some(250_000));
        assert_eq!(parse_duration_ns("20msec"), Some(20_000_000));
        assert_eq!(parse_duration_ns("0"), Some(0));
        assert_eq!(parse_duration_ns(" 7 ms "), Some(7_000_000));
        for bad in ["40", "-1ms", "ms", "fast", "1e400s", "nanms", "1.5 parsecs"] {
            assert_eq!(parse_duration_ns(bad), None, "{bad}");
        }
        assert_eq!(format_duration_ns(40_000_000), "40ms");
        assert_eq!(format_duration_ns(1_500_000_000), "1500ms");
        assert_eq!(format_duration_ns(2_000_000_000), "2s");
        assert_eq!(format_duration_ns(250_000), "250us");
    }

    #[test]
    fn probabilities() {
        assert_eq!(parse_probability("1%"), Some(0.01));
        assert_eq!(parse_probability("0.5%"), Some(0.005));
        assert_eq!(parse_probability("0.25"), Some(0.25));
        assert_eq!(parse_probability("100%"), Some(1.0));
        for bad in ["101%", "-1%", "2", "1x", ""] {
            assert_eq!(parse_probability(bad), None, "{bad}");
        }
    }

    #[test]
    fn sizes_and_queues() {
        assert_eq!(parse_size_bytes("64kb"), Some(65536));
        assert_eq!(parse_size_bytes("1500"), Some(1500));
        assert_eq!(parse_size_bytes("1500b"), Some(1500));
        assert_eq!(parse_size_bytes("1mbit"), Some(125_000));
        assert_eq!(parse_size_bytes("2m"), Some(2 * 1024 * 1024));
        assert_eq!(parse_queue("100pkt"), Some(QueueLimit::Packets(100)));
        assert_eq!(parse_queue("64kb"), Some(QueueLimit::Bytes(65536)));
        assert_eq!(parse_queue("1bdp"), Some(QueueLimit::Bdp(1.0)));
        assert_eq!(parse_queue("0.5BDP"), Some(QueueLimit::Bdp(0.5)));
        for bad in ["100", "0pkt", "1.5pkt", "0bdp", "-1bdp", "lots", "0kb"] {
            assert_eq!(parse_queue(bad), None, "{bad}");
        }
    }

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
