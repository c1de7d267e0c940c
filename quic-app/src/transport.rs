//! How an endpoint acknowledges and how it fills packets: the two transport
//! behaviours a scenario may set besides the congestion controller, applied
//! the same way by the tokio binaries and the simulator (through the
//! patched quiche's `Config::set_ack_policy` and
//! `Config::set_avoid_small_packets`).

use std::fmt;
use std::time::Duration;

/// When a receiver sends ACK frames for application data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckPolicy {
    /// quiche's own: every packet it sends after an ack-eliciting packet
    /// arrived carries an ACK, so an application that answers each read
    /// acknowledges each datagram (about one ACK per data packet).
    Immediate,
    /// An ACK once `packets` ack-eliciting packets have arrived since the
    /// last, or `max_delay_ms` after the first of them, and at once on a
    /// gap or reordering (RFC 9000 §13.2.1). `rfc9000` is 2 packets, 25 ms.
    Delayed {
        /// Ack-eliciting packets per ACK.
        packets: u64,
        /// The longest an ACK waits, ms; also the `max_ack_delay`
        /// transport parameter this end advertises.
        max_delay_ms: u64,
    },
    /// About `ratio` ACKs per round trip, as neqo (4 by default) and
    /// picoquic ask of their peers: an ACK once the ack-eliciting packets
    /// since the last reach those of the last round trip divided by
    /// `ratio` (2 to 256), or a round trip divided by `ratio` after the
    /// first (1 ms to `max_delay_ms`), and at once on a gap. Decided by
    /// the receiver from its smoothed RTT (quiche has no ACK_FREQUENCY
    /// frame for the sender to ask with). `per-rtt` is 4 per round trip,
    /// at most 25 ms.
    PerRtt {
        /// ACKs per round trip.
        ratio: u64,
        /// The longest an ACK waits, ms; also the advertised
        /// `max_ack_delay`.
        max_delay_ms: u64,
    },
}

/// The most ACKs per round trip [`AckPolicy::PerRtt`] may ask for.
pub const MAX_ACK_RATIO: u64 = 100;

/// The most ack-eliciting packets [`AckPolicy::Delayed`] may wait for.
pub const MAX_ACK_PACKETS: u64 = 1000;
/// The longest delay [`AckPolicy::Delayed`] may have, ms (RFC 9000 §18.2
/// allows `max_ack_delay` up to 2^14 ms; longer than a second is never
/// what an experiment wants).
pub const MAX_ACK_DELAY_MS: u64 = 1000;

/// The forms [`AckPolicy::parse`] accepts, for error messages.
pub const ACK_POLICY_FORMS: &str = "immediate, rfc9000 (an ACK every 2 ack-eliciting packets or after 25 ms), delayed:packets=N,max_delay=Dms (N from 1 to 1000, D from 1 to 1000), or per-rtt:ratio=R,max_delay=Dms (about R ACKs per round trip, R from 1 to 100, default 4; D as for delayed, default 25)";

impl AckPolicy {
    /// RFC 9000 §13.2.2's recommendation with quiche's default
    /// `max_ack_delay`: every second ack-eliciting packet, at most 25 ms.
    pub const RFC9000: AckPolicy = AckPolicy::Delayed {
        packets: 2,
        max_delay_ms: 25,
    };

    /// Parses `immediate`, `rfc9000` or `delayed:packets=N,max_delay=Dms`
    /// (either key may be left out: 2 packets, 25 ms).
    pub fn parse(s: &str) -> Result<AckPolicy, String> {
        let bad = |why: String| Err(format!("`{s}`: {why}; the forms are {ACK_POLICY_FORMS}"));
        match s.trim() {
            "immediate" => return Ok(AckPolicy::Immediate),
            "rfc9000" => return Ok(AckPolicy::RFC9000),
            _ => {}
        }
        let t = s.trim();
        let (per_rtt, rest) = if let Some(rest) = t.strip_prefix("per-rtt") {
            (true, rest)
        } else if let Some(rest) = t.strip_prefix("delayed") {
            (false, rest)
        } else {
            return bad("not an ACK policy".into());
        };
        let (mut packets, mut max_delay_ms, mut ratio) = (2, 25, 4);
        let rest = rest.strip_prefix(':').unwrap_or(rest);
        for kv in rest.split(',').filter(|kv| !kv.trim().is_empty()) {
            let Some((k, v)) = kv.split_once('=') else {
                return bad(format!("`{kv}` is not KEY=VALUE"));
            };
            match k.trim() {
                "ratio" if per_rtt => match v.trim().parse::<u64>() {
                    Ok(n) if (1..=MAX_ACK_RATIO).contains(&n) => ratio = n,
                    _ => {
                        return bad(format!(
                            "ratio `{v}` is not a whole number from 1 to {MAX_ACK_RATIO}"
                        ))
                    }
                },
                "packets" if !per_rtt => match v.trim().parse::<u64>() {
                    Ok(n) if (1..=MAX_ACK_PACKETS).contains(&n) => packets = n,
                    _ => {
                        return bad(format!(
                            "packets `{v}` is not a whole number from 1 to {MAX_ACK_PACKETS}"
                        ))
                    }
                },
                "max_delay" => {
                    let ms = v
                        .trim()
                        .strip_suffix("ms")
                        .and_then(|n| n.parse::<u64>().ok());
                    match ms {
                        Some(ms) if (1..=MAX_ACK_DELAY_MS).contains(&ms) => max_delay_ms = ms,
                        _ => return bad(format!("max_delay `{v}` is not whole milliseconds from 1ms to {MAX_ACK_DELAY_MS}ms")),
                    }
                }
                other => {
                    let keys = if per_rtt {
                        "ratio, max_delay"
                    } else {
                        "packets, max_delay"
                    };
                    return bad(format!("unknown key `{other}` ({keys})"));
                }
            }
        }
        Ok(if per_rtt {
            AckPolicy::PerRtt {
                ratio,
                max_delay_ms,
            }
        } else {
            AckPolicy::Delayed {
                packets,
                max_delay_ms,
            }
        })
    }
}

impl fmt::Display for AckPolicy {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match *self {
            AckPolicy::Immediate => f.write_str("immediate"),
            p if p == AckPolicy::RFC9000 => f.write_str("rfc9000"),
            AckPolicy::Delayed {
                packets,
                max_delay_ms,
            } => write!(f, "delayed:packets={packets},max_delay={max_delay_ms}ms"),
            AckPolicy::PerRtt {
                ratio,
                max_delay_ms,
            } => write!(f, "per-rtt:ratio={ratio},max_delay={max_delay_ms}ms"),
        }
    }
}

/// Whether a sender may send a data packet smaller than a full one because
/// that is all the congestion window has room for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SmallPackets {
    /// quiche's own: send whenever the window has any room.
    Allow,
    /// Send a data packet only when a full-size one fits the window or
    /// nothing is in flight, as TCP's segment-counted windows do.
    Avoid,
}

impl SmallPackets {
    /// Parses `allow` or `avoid`.
    pub fn parse(s: &str) -> Result<SmallPackets, String> {
        match s.trim() {
            "allow" => Ok(SmallPackets::Allow),
            "avoid" => Ok(SmallPackets::Avoid),
            _ => Err(format!(
                "`{s}` is not allow (quiche's own: send whenever the window has room) or avoid (send data only when a full-size packet fits the window)"
            )),
        }
    }
}

impl fmt::Display for SmallPackets {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(match self {
            SmallPackets::Allow => "allow",
            SmallPackets::Avoid => "avoid",
        })
    }
}

/// Whether a sender paces its packets (quiche's pacer, on by default for
/// every plugin and BBRv2) or sends each as soon as the window allows, as
/// ns-2's and ns-3's TCP agents and quiche's built-in Reno and CUBIC do.
///
/// A paced sender that wakes late may make up the sending time it lost
/// with a burst, bounded by its credit (`quiche::PacingCredit`): by
/// default 2 ms at the pacing rate, 10 to 256 packets (quinn's token
/// bucket); `on:credit=0` keeps none (every late wake-up is time lost, as
/// quiche 0.30's pacers did); `on:credit=1ms,min=2` is about Linux's TSO
/// autosizing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pacing {
    /// Paced at the rate the controller sets, with the default credit.
    On,
    /// Paced, with this credit.
    Credit {
        /// Sending time that may be made up, microseconds at the pacing rate.
        micros: u32,
        /// The bound in full-size packets is at least this.
        min_packets: u16,
        /// And at most this.
        max_packets: u16,
    },
    /// Sent as soon as the window has room.
    Off,
}

/// The forms [`Pacing::parse`] accepts, for error messages.
pub const PACING_FORMS: &str = "on (quiche's pacer; a late sender may make up 2 ms at the pacing rate, 10 to 256 packets), off (send as soon as the window has room, as ns-2's TCP does), or on:credit=DURATION[,min=N][,max=N] (the credit a late sender may make up: DURATION from 0 to 100ms at the pacing rate, at least min and at most max full-size packets, 0 to 10000; min defaults to 0 and max to 256 when credit is given)";

impl Pacing {
    /// The credit quiche's pacer gets ([`Pacing::Off`]: none, unused).
    pub fn credit(&self) -> quiche::PacingCredit {
        match *self {
            Pacing::On => quiche::PacingCredit::DEFAULT,
            Pacing::Credit {
                micros,
                min_packets,
                max_packets,
            } => quiche::PacingCredit {
                time: Duration::from_micros(micros.into()),
                min_packets: min_packets.into(),
                max_packets: max_packets.into(),
            },
            Pacing::Off => quiche::PacingCredit::NONE,
        }
    }

    /// Parses `on`, `off` (also `true`/`false`) or
    /// `on:credit=DURATION[,min=N][,max=N]`.
    pub fn parse(s: &str) -> Result<Pacing, String> {
        let bad = |why: String| Err(format!("`{s}`: {why}; the forms are {PACING_FORMS}"));
        let t = s.trim();
        match t {
            "on" | "true" => return Ok(Pacing::On),
            "off" | "false" => return Ok(Pacing::Off),
            _ => {}
        }
        let Some(rest) = t.strip_prefix("on:") else {
            return bad("not a pacing mode".into());
        };
        let (mut micros, mut min_packets, mut max_packets) = (None, 0u16, 256u16);
        for kv in rest.split(',').filter(|kv| !kv.trim().is_empty()) {
            let Some((k, v)) = kv.split_once('=') else {
                return bad(format!("`{kv}` is not KEY=VALUE"));
            };
            let v = v.trim();
            match k.trim() {
                "credit" => {
                    let us = if v == "0" {
                        Some(0)
                    } else if let Some(n) = v.strip_suffix("us") {
                        n.trim().parse::<u32>().ok()
                    } else if let Some(n) = v.strip_suffix("ms") {
                        n.trim()
                            .parse::<u32>()
                            .ok()
                            .and_then(|n| n.checked_mul(1000))
                    } else {
                        None
                    };
                    match us {
                        Some(us) if us <= 100_000 => micros = Some(us),
                        _ => {
                            return bad(format!(
                                "credit `{v}` is not a whole number of ms or us from 0 to 100ms"
                            ))
                        }
                    }
                }
                key @ ("min" | "max") => match v.parse::<u16>() {
                    Ok(n) if n <= 10_000 => {
                        if key == "min" {
                            min_packets = n
                        } else {
                            max_packets = n
                        }
                    }
                    _ => return bad(format!("{key} `{v}` is not a whole number from 0 to 10000")),
                },
                other => return bad(format!("unknown key `{other}` (credit, min, max)")),
            }
        }
        let Some(micros) = micros else {
            return bad("credit=DURATION is missing".into());
        };
        if min_packets > max_packets {
            return bad(format!("min {min_packets} is above max {max_packets}"));
        }
        Ok(Pacing::Credit {
            micros,
            min_packets,
            max_packets,
        })
    }
}

impl fmt::Display for Pacing {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match *self {
            Pacing::On => f.write_str("on"),
            Pacing::Off => f.write_str("off"),
            Pacing::Credit {
                micros,
                min_packets,
                max_packets,
            } => {
                if micros % 1000 == 0 {
                    write!(f, "on:credit={}ms", micros / 1000)?;
                } else {
                    write!(f, "on:credit={micros}us")?;
                }
                write!(f, ",min={min_packets},max={max_packets}")
            }
        }
    }
}

/// The transport behaviours of one endpoint. The default acknowledges as
/// quiche does (immediate) and avoids small packets: measured on CUBIC
/// (20 Mbit/s, 40 ms, 10 s), quiche's own way sends a mean data packet of
/// 452 B on sim and 857 B on emu (the two disagree, and per-packet
/// overhead costs goodput), avoiding them 1348 B on both, as TCP's
/// segment-counted windows and the seed papers' ns-2 models send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transport {
    /// When it acknowledges.
    pub ack: AckPolicy,
    /// Whether it sends data packets smaller than full while data is in
    /// flight.
    pub small_packets: SmallPackets,
    /// Whether it paces what it sends.
    pub pacing: Pacing,
}

impl Default for Transport {
    fn default() -> Transport {
        Transport {
            ack: AckPolicy::Immediate,
            small_packets: SmallPackets::Avoid,
            pacing: Pacing::On,
        }
    }
}

impl Transport {
    /// Sets both on a quiche configuration (and, for a delayed policy, the
    /// `max_ack_delay` it advertises).
    pub fn apply(&self, c: &mut quiche::Config) {
        let policy = match self.ack {
            AckPolicy::Immediate => quiche::AckPolicy::Immediate,
            AckPolicy::Delayed {
                packets,
                max_delay_ms,
            } => {
                c.set_max_ack_delay(max_delay_ms);
                quiche::AckPolicy::Delayed {
                    packets,
                    max_delay: Duration::from_millis(max_delay_ms),
                }
            }
            AckPolicy::PerRtt {
                ratio,
                max_delay_ms,
            } => {
                c.set_max_ack_delay(max_delay_ms);
                quiche::AckPolicy::PerRtt {
                    ratio,
                    max_delay: Duration::from_millis(max_delay_ms),
                }
            }
        };
        // Refused only for zero packets or a zero ratio, which `parse`
        // never makes.
        c.set_ack_policy(policy)
            .expect("an ACK policy of at least one packet");
        c.set_avoid_small_packets(self.small_packets == SmallPackets::Avoid);
        c.enable_pacing(self.pacing != Pacing::Off);
        c.set_pacing_credit(self.pacing.credit());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_print_back() {
        for (s, want) in [
            ("immediate", AckPolicy::Immediate),
            ("rfc9000", AckPolicy::RFC9000),
            ("delayed", AckPolicy::RFC9000),
            (
                "delayed:packets=10,max_delay=40ms",
                AckPolicy::Delayed {
                    packets: 10,
                    max_delay_ms: 40,
                },
            ),
            (
                "per-rtt",
                AckPolicy::PerRtt {
                    ratio: 4,
                    max_delay_ms: 25,
                },
            ),
            (
                "per-rtt:ratio=8,max_delay=10ms",
                AckPolicy::PerRtt {
                    ratio: 8,
                    max_delay_ms: 10,
                },
            ),
        ] {
            let p = AckPolicy::parse(s).unwrap();
            assert_eq!(p, want, "{s}");
            assert_eq!(AckPolicy::parse(&p.to_string()).unwrap(), p);
        }
        for bad in [
            "",
            "never",
            "delayed:packets=0",
            "delayed:packets=1001",
            "delayed:max_delay=0ms",
            "delayed:max_delay=25",
            "delayed:max_delay=2s",
            "delayed:every=2",
            "delayed:packets",
            "delayed:ratio=4",
            "per-rtt:packets=2",
            "per-rtt:ratio=0",
            "per-rtt:ratio=101",
            "per-rtt:max_delay=0ms",
        ] {
            let e = AckPolicy::parse(bad).unwrap_err();
            assert!(e.contains("the forms are"), "{bad}: {e}");
        }
        assert_eq!(SmallPackets::parse("avoid"), Ok(SmallPackets::Avoid));
        assert_eq!(Pacing::parse("off"), Ok(Pacing::Off));
        assert_eq!(Pacing::parse(&Pacing::On.to_string()), Ok(Pacing::On));
        assert!(Pacing::parse("sometimes").unwrap_err().contains("on"));
        for (s, micros, min, max) in [
            ("on:credit=0", 0, 0, 256),
            ("on:credit=1ms,min=2", 1000, 2, 256),
            ("on:credit=500us,min=1,max=64", 500, 1, 64),
        ] {
            let p = Pacing::parse(s).unwrap();
            assert_eq!(
                p,
                Pacing::Credit {
                    micros,
                    min_packets: min,
                    max_packets: max
                },
                "{s}"
            );
            assert_eq!(Pacing::parse(&p.to_string()), Ok(p));
        }
        assert_eq!(Pacing::On.credit(), quiche::PacingCredit::DEFAULT);
        assert_eq!(
            Pacing::parse("on:credit=0").unwrap().credit().time,
            Duration::ZERO
        );
        for bad in [
            "on:",
            "on:min=2",
            "on:credit=2",
            "on:credit=1s",
            "on:credit=200ms",
            "on:credit=1ms,min=5,max=4",
            "on:credit=1ms,burst=3",
        ] {
            let e = Pacing::parse(bad).unwrap_err();
            assert!(e.contains("on:credit=DURATION"), "{bad}: {e}");
        }
        assert!(SmallPackets::parse("sometimes")
            .unwrap_err()
            .contains("allow"));
    }
}
