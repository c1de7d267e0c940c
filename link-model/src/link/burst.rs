//! Two link elements that act on bursts: a token-bucket policer at a
//! direction's entrance, and aggregation at its exit.
//!
//! ```toml
//! [link.down]
//! policer = "rate=10mbit,burst=30kb"   # drop what exceeds 10 Mbit/s beyond a 30 kB bucket
//! aggregate = "period=4ms,burst=32pkt" # deliver in bursts, one every 4 ms, at most 32 packets each
//! ```
//!
//! **Policer** (`rate`, `burst`): a token bucket as a router's policer
//! (Linux's `police ... conform-exceed drop`, the policers of Flach et
//! al., SIGCOMM 2016, and the BBR draft's test case A.17). The bucket
//! holds `burst` bytes and fills at `rate`; it starts full. An arriving
//! packet that finds at least its own size in the bucket takes that many
//! tokens and goes on to the queue; one that does not is dropped (reason
//! `policer`) and takes none. It polices arrivals, so it sits before the
//! queue and the AQM: a policed link drops without queueing, whatever its
//! `queue`. `burst` is bytes (`30kb`, `15000b`) or packets of the MTU
//! (`20pkt`); at least one MTU, or no packet of that size ever conforms.
//!
//! **Aggregation** (`period`, optional `burst` and `phase`): packets that
//! have crossed the link are held and handed over together, as a Wi-Fi or
//! cellular MAC delivers an aggregate per channel access. Releases happen
//! every `period`, the first at `phase` from the run's start; a packet
//! leaves at the first release at or after the time it would have
//! arrived, with everything else then due. With `burst` (packets or
//! bytes) a release carries at most that much; the rest waits for the
//! next one, so a burst smaller than what the link moves in a period also
//! caps the link's rate at `burst / period`. On the downlink it
//! aggregates data; on the uplink it aggregates ACKs (what misleads BBR's
//! bandwidth samples and delay-based controllers). `period` is required:
//! a burst size alone would hold a lone last packet for ever. Without
//! `phase` each direction's is drawn from the link's seed, so repetitions
//! see different alignments of the two directions' releases: with both
//! grids at the run's start and a one-way delay a multiple of the
//! periods, sim's endpoints (which take no time) met the releases in one
//! particular alignment, in which Vegas kept 86% of a 20 Mbit/s link
//! where at 41 ms it kept 34% and on real endpoints 37 to 46%
//! (`make aggregation`). Linux's netem calls this `slot` (`slot MIN MAX
//! packets N bytes B`), whose slots restart after an idle period and may
//! have random lengths; here they are a fixed grid, so a run is
//! reproducible and the held time is at most `period`.

use super::units::{format_duration_ns, format_rate, parse_duration_ns, parse_rate};
use super::units::{parse_queue, QueueLimit};
use super::{err, key_values, LinkError};

/// A token-bucket policer (see the module's text).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Policer {
    /// Token rate, bit/s.
    pub rate_bps: f64,
    /// Bucket depth as written (bytes, or packets of the MTU).
    pub burst: QueueLimit,
}

/// Release packets in bursts (see the module's text).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Aggregation {
    /// Time between releases, ns.
    pub period_ns: u64,
    /// At most this much per release (packets or bytes), if set.
    pub burst: Option<QueueLimit>,
    /// When the first release is, ns from the run's start (less than the
    /// period); `None`: drawn from the link's seed for each direction.
    pub phase_ns: Option<u64>,
}

/// A size as packets or bytes (`20pkt`, `30kb`); BDP multiples are refused.
fn parse_amount(field: &str, key: &str, v: &str) -> Result<QueueLimit, LinkError> {
    match parse_queue(v) {
        Some(q @ (QueueLimit::Packets(n) | QueueLimit::Bytes(n))) if n > 0 => Ok(q),
        _ => Err(err(
            field,
            format!(
                "`{key}={v}` is not a positive size in packets (20pkt) or bytes (30kb, 15000b)"
            ),
        )),
    }
}

/// `none` (None), or the `key=value` pairs of `s` among `keys`, an
/// unknown or repeated key refused with what `allowed` says.
fn pairs(
    field: &str,
    s: &str,
    keys: &[&str],
    allowed: &str,
) -> Result<Option<Vec<(String, String)>>, LinkError> {
    if s.trim().eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    key_values(field, s, keys)
        .map(Some)
        .map_err(|e| err(field, format!("{}; expected {allowed}", e.problem)))
}

impl Policer {
    const ALLOWED: &'static str = "`none` or `rate=10mbit,burst=30kb` (burst in bytes or packets)";

    /// Parses `none` or `rate=...,burst=...`.
    pub(super) fn parse(field: &str, s: &str) -> Result<Option<Policer>, LinkError> {
        let Some(kv) = pairs(field, s, &["rate", "burst"], Self::ALLOWED)? else {
            return Ok(None);
        };
        let (mut rate, mut burst) = (None, None);
        for (k, v) in kv {
            if k == "rate" {
                rate = Some(
                    parse_rate(&v)
                        .filter(|&r| (1000.0..=1e11).contains(&r))
                        .ok_or_else(|| {
                            err(
                                field,
                                format!("`rate={v}` is not a rate between 1kbit and 100gbit"),
                            )
                        })?,
                );
            } else {
                burst = Some(parse_amount(field, &k, &v)?);
            }
        }
        match (rate, burst) {
            (Some(rate_bps), Some(burst)) => Ok(Some(Policer { rate_bps, burst })),
            _ => Err(err(
                field,
                format!(
                    "`{s}` needs both rate and burst; expected {}",
                    Self::ALLOWED
                ),
            )),
        }
    }

    /// As written in a link description.
    pub fn to_spec(self) -> String {
        format!(
            "rate={},burst={}",
            format_rate(self.rate_bps),
            self.burst.to_spec()
        )
    }

    /// The bucket's depth in bytes, packets counted at `mtu`.
    pub fn burst_bytes(self, mtu: u64) -> u64 {
        match self.burst {
            QueueLimit::Packets(p) => p.saturating_mul(mtu),
            QueueLimit::Bytes(b) => b,
            QueueLimit::Bdp(_) => unreachable!("parse refuses a BDP burst"),
        }
    }
}

impl Aggregation {
    const ALLOWED: &'static str =
        "`none` or `period=4ms[,burst=32pkt][,phase=1ms]` (burst in packets or bytes; phase below the period, drawn from the seed when absent)";

    /// Parses `none` or `period=...[,burst=...][,phase=...]`.
    pub(super) fn parse(field: &str, s: &str) -> Result<Option<Aggregation>, LinkError> {
        let Some(kv) = pairs(field, s, &["period", "burst", "phase"], Self::ALLOWED)? else {
            return Ok(None);
        };
        let (mut period, mut burst, mut phase) = (None, None, None);
        for (k, v) in kv {
            if k == "phase" {
                phase = Some(parse_duration_ns(&v).ok_or_else(|| {
                    err(field, format!("`phase={v}` is not a time, such as 1ms"))
                })?);
            } else if k == "period" {
                period = Some(
                    parse_duration_ns(&v)
                        .filter(|&p| (10_000..=10_000_000_000).contains(&p))
                        .ok_or_else(|| {
                            err(
                                field,
                                format!(
                                    "`period={v}` is not a time between 10us and 10s, such as 4ms"
                                ),
                            )
                        })?,
                );
            } else {
                burst = Some(parse_amount(field, &k, &v)?);
            }
        }
        let Some(period_ns) = period else {
            return Err(err(
                field,
                format!(
                    "`{s}` has no period: a burst size alone would hold a lone last packet for ever; expected {}",
                    Self::ALLOWED
                ),
            ));
        };
        if let Some(p) = phase.filter(|&p| p >= period_ns) {
            return Err(err(
                field,
                format!(
                    "`phase={}` is not below the period ({}): the first release is within one period of the start",
                    format_duration_ns(p),
                    format_duration_ns(period_ns)
                ),
            ));
        }
        Ok(Some(Aggregation {
            period_ns,
            burst,
            phase_ns: phase,
        }))
    }

    /// As written in a link description.
    pub fn to_spec(self) -> String {
        let mut s = format!("period={}", format_duration_ns(self.period_ns));
        if let Some(b) = self.burst {
            s.push_str(&format!(",burst={}", b.to_spec()));
        }
        if let Some(p) = self.phase_ns {
            s.push_str(&format!(",phase={}", format_duration_ns(p)));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_read_back_and_bad_ones_name_the_problem() {
        let p = Policer::parse("f", "rate=10mbit,burst=30kb")
            .unwrap()
            .unwrap();
        assert_eq!(p.rate_bps, 10e6);
        assert_eq!(p.burst_bytes(1500), 30 * 1024);
        assert_eq!(Policer::parse("f", &p.to_spec()).unwrap(), Some(p));
        let p = Policer::parse("f", "burst=20pkt, rate=1mbit")
            .unwrap()
            .unwrap();
        assert_eq!(p.burst_bytes(1500), 30_000);
        assert_eq!(Policer::parse("f", "none").unwrap(), None);
        let a = Aggregation::parse("f", "period=4ms,burst=32pkt")
            .unwrap()
            .unwrap();
        assert_eq!(a.period_ns, 4_000_000);
        assert_eq!(Aggregation::parse("f", &a.to_spec()).unwrap(), Some(a));
        let a = Aggregation::parse("f", "period=2ms").unwrap().unwrap();
        assert_eq!(a.burst, None);
        assert_eq!(Aggregation::parse("f", &a.to_spec()).unwrap(), Some(a));
        for (spec, want) in [
            ("rate=10mbit", "needs both rate and burst"),
            ("rate=fast,burst=1kb", "`rate=fast` is not a rate"),
            (
                "rate=1mbit,burst=1bdp",
                "`burst=1bdp` is not a positive size",
            ),
            ("rate=1mbit,burst=0b", "not a positive size"),
            ("rate=1mbit,depth=1kb", "unknown key `depth`"),
        ] {
            let e = Policer::parse("link.down.policer", spec).unwrap_err();
            assert_eq!(e.field, "link.down.policer");
            assert!(e.problem.contains(want), "{spec}: {}", e.problem);
        }
        for (spec, want) in [
            ("burst=10pkt", "has no period"),
            ("period=1us", "between 10us and 10s"),
            ("period=4ms,burst=-1pkt", "not a positive size"),
            ("period=4ms,size=3", "unknown key `size`"),
        ] {
            let e = Aggregation::parse("link.up.aggregate", spec).unwrap_err();
            assert!(e.problem.contains(want), "{spec}: {}", e.problem);
        }
    }
}
