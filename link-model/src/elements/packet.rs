//! A datagram inside the emulator.

/// The ECN field of a packet: the two low bits of the IPv4 TOS byte or
/// the IPv6 Traffic Class (RFC 3168 §5; ECT(1) as the L4S identifier, RFC
/// 9331). The link model has its own type so that it depends on nothing
/// else of the project's; the drivers translate it to and from the QUIC
/// stack's and the socket's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Ecn {
    /// `00`: not ECN-capable. Every AQM drops such a packet where it would
    /// signal congestion.
    #[default]
    NotEct = 0,
    /// `01`: ECN-capable, L4S (RFC 9331); DualPI2's L queue takes it.
    Ect1 = 1,
    /// `10`: ECN-capable, classic (RFC 3168).
    Ect0 = 2,
    /// `11`: Congestion Experienced.
    Ce = 3,
}

impl Ecn {
    /// From the low two bits of a TOS / Traffic Class byte (the others
    /// are ignored).
    pub fn from_bits(tos: u8) -> Ecn {
        match tos & 0b11 {
            0 => Ecn::NotEct,
            1 => Ecn::Ect1,
            2 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }

    /// The two bits.
    pub fn bits(self) -> u8 {
        self as u8
    }

    /// ECN-capable: ECT(0), ECT(1) or already CE (RFC 3168 §6.1.1.1: a CE
    /// packet may be "marked" again, which leaves it CE; Linux's
    /// `INET_ECN_set_ce` counts it as marked).
    pub fn is_ect(self) -> bool {
        self != Ecn::NotEct
    }

    /// The L4S identifier: ECT(1) or CE (RFC 9331 §5.1; the low bit set).
    pub fn is_l4s(self) -> bool {
        self.bits() & 1 == 1
    }
}

/// One datagram and what the emulator knows about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    /// The UDP payload, forwarded unchanged.
    pub data: Vec<u8>,
    /// Which flow (client, route) it belongs to.
    pub flow: u16,
    /// Which traffic class a `wfq` scheduler puts it in: the scenario's
    /// flow or cross source it belongs to (the emulator's route, the
    /// simulator's flow index). `fq` classifies by `flow` instead.
    pub class: u16,
    /// When it reached the emulator, ns on the emulator's clock.
    pub arrival_ns: u64,
    /// Which stage of its route it is at ([`crate::topology::Network`]; 0
    /// on a single link).
    pub hop: u8,
    /// Its ECN codepoint, as the sender set it and the links changed it
    /// (an AQM with `ecn` sets CE instead of dropping).
    pub ecn: Ecn,
}

impl Packet {
    /// A packet of `size` zero bytes, for tests and probes (Not-ECT).
    pub fn sized(size: usize, flow: u16, arrival_ns: u64) -> Packet {
        Packet {
            data: vec![0; size],
            flow,
            class: flow,
            arrival_ns,
            hop: 0,
            ecn: Ecn::NotEct,
        }
    }

    /// The same with codepoint `ecn`.
    pub fn with_ecn(mut self, ecn: Ecn) -> Packet {
        self.ecn = ecn;
        self
    }

    /// Its size in bytes.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// True for an empty datagram.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Sets CE if the packet is ECN-capable: true if it now carries a
    /// mark (it was ECT or already CE), false for a Not-ECT packet, which
    /// the AQM must drop instead (RFC 3168 §5).
    pub fn mark_ce(&mut self) -> bool {
        if self.ecn.is_ect() {
            self.ecn = Ecn::Ce;
            true
        } else {
            false
        }
    }
}

/// Why the emulator dropped a packet. The codes share one space with
/// [`MarkReason`]'s: the same code names the same mechanism.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DropReason {
    /// The random or Gilbert-Elliott loss element.
    Loss = 1,
    /// The queue was full (drop-tail, or RED's hard limit); with `fq` and
    /// `wfq`, the arriving packet's own class queue was full.
    QueueFull = 2,
    /// RED dropped it early.
    Red = 3,
    /// CoDel dropped it at dequeue.
    CoDel = 4,
    /// PIE dropped it early, at enqueue.
    Pie = 5,
    /// DualPI2 dropped a classic-queue packet (probability p' squared).
    DualPi2C = 6,
    /// DualPI2 dropped an L-queue packet in overload (the coupled
    /// probability saturated, RFC 9332 §4.2.3).
    DualPi2L = 7,
    /// The token-bucket policer found too few tokens (code 9: 8 is
    /// [`MarkReason::Step`]'s, a mechanism that never drops).
    Policer = 9,
}

impl DropReason {
    /// All reasons, in code order.
    pub const ALL: [DropReason; 8] = [
        DropReason::Loss,
        DropReason::QueueFull,
        DropReason::Red,
        DropReason::CoDel,
        DropReason::Pie,
        DropReason::DualPi2C,
        DropReason::DualPi2L,
        DropReason::Policer,
    ];

    /// The reasons every summary lists, even at zero (the others are
    /// listed when they happened, so results without them stay as they
    /// were).
    pub const ALWAYS_LISTED: usize = 5;

    /// The name in logs and summaries.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::Loss => "loss",
            DropReason::QueueFull => "queue_full",
            DropReason::Red => "red",
            DropReason::CoDel => "codel",
            DropReason::Pie => "pie",
            DropReason::DualPi2C => "dualpi2_c",
            DropReason::DualPi2L => "dualpi2_l",
            DropReason::Policer => "policer",
        }
    }

    /// From the code in the binary log.
    pub fn from_code(c: u8) -> Option<DropReason> {
        DropReason::ALL.into_iter().find(|r| *r as u8 == c)
    }

    /// Its place in [`DropReason::ALL`] (and in counters).
    pub fn index(self) -> usize {
        match self {
            DropReason::Policer => 7,
            r => r as usize - 1,
        }
    }
}

/// Why an AQM set CE on a packet instead of dropping it (or, for the
/// step thresholds, as its only signal). Codes as [`DropReason`]'s where
/// the mechanism is the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MarkReason {
    /// RED's early (unforced) drop, as a mark (`red:ecn=true`).
    Red = 3,
    /// CoDel's drop at dequeue, as a mark (`codel:ecn=true`, fq_codel).
    CoDel = 4,
    /// PIE's early drop, as a mark while p ≤ 10 % (`pie:ecn=true`).
    Pie = 5,
    /// DualPI2's classic queue: an ECT(0) packet marked with p' squared.
    DualPi2C = 6,
    /// DualPI2's L queue: its native step/ramp or the coupled k·p'.
    DualPi2L = 7,
    /// A step threshold: `aqm = "step"` (DCTCP's K) or CoDel's
    /// `ce_threshold`.
    Step = 8,
}

impl MarkReason {
    /// All reasons, in code order.
    pub const ALL: [MarkReason; 6] = [
        MarkReason::Red,
        MarkReason::CoDel,
        MarkReason::Pie,
        MarkReason::DualPi2C,
        MarkReason::DualPi2L,
        MarkReason::Step,
    ];

    /// The name in logs and summaries.
    pub fn as_str(self) -> &'static str {
        match self {
            MarkReason::Red => "red",
            MarkReason::CoDel => "codel",
            MarkReason::Pie => "pie",
            MarkReason::DualPi2C => "dualpi2_c",
            MarkReason::DualPi2L => "dualpi2_l",
            MarkReason::Step => "step",
        }
    }

    /// Its place in [`MarkReason::ALL`] (and in counters): the codes run
    /// from `Red`'s on without a gap.
    pub fn index(self) -> usize {
        self as usize - MarkReason::Red as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drop_reasons_index_their_place_in_all() {
        for (i, r) in DropReason::ALL.into_iter().enumerate() {
            assert_eq!(r.index(), i, "{r:?}");
            assert_eq!(DropReason::from_code(r as u8), Some(r));
        }
    }

    #[test]
    fn mark_reasons_index_their_place_in_all() {
        for (i, r) in MarkReason::ALL.into_iter().enumerate() {
            assert_eq!(r.index(), i, "{r:?}");
        }
    }
}
