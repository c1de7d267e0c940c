//! Rates and durations as users write them (tc units), for `--capacity`
//! and for reading the link of a `simulation:scenario` event: the link
//! model's parsers (`link_model::link::units`), the one place tc's units
//! are read.

use link_model::link::units;

/// Parses `20mbit`, `500kbit`, `1gbit`, `1mbps` (bytes/s as in tc) or a
/// bare number of bit/s.
pub fn parse_rate(s: &str) -> Option<f64> {
    units::parse_rate(s)
}

/// Parses a duration, `40ms`, `1.5s`, `250us`, `100ns` (or a bare number
/// of ms, as a scenario event's numbers are), into ms.
pub fn parse_duration_ms(s: &str) -> Option<f64> {
    match s.trim().parse::<f64>() {
        Ok(ms) => ms.is_finite().then_some(ms),
        Err(_) => units::parse_duration_ns(s).map(|ns| ns as f64 / 1e6),
    }
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
