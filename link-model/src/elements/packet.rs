//! A datagram inside the emulator.

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
}

impl Packet {
    /// A packet of `size` zero bytes, for tests and probes.
    pub fn sized(size: usize, flow: u16, arrival_ns: u64) -> Packet {
        Packet {
            data: vec![0; size],
            flow,
            class: flow,
            arrival_ns,
            hop: 0,
        }
    }

    /// Its size in bytes.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// True for an empty datagram.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// Why the emulator dropped a packet.
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
}

impl DropReason {
    /// All reasons, in code order.
    pub const ALL: [DropReason; 5] = [
        DropReason::Loss,
        DropReason::QueueFull,
        DropReason::Red,
        DropReason::CoDel,
        DropReason::Pie,
    ];

    /// The name in logs and summaries.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::Loss => "loss",
            DropReason::QueueFull => "queue_full",
            DropReason::Red => "red",
            DropReason::CoDel => "codel",
            DropReason::Pie => "pie",
        }
    }

    /// From the code in the binary log.
    pub fn from_code(c: u8) -> Option<DropReason> {
        DropReason::ALL.into_iter().find(|r| *r as u8 == c)
    }
}
