//! The bottleneck log's records and samples: what a link reports of every
//! packet (a [`Record`] to a [`Sink`]) and, periodically, of each direction
//! (a [`Sample`]). Pure data; writing them to files is the driver's job
//! (harness's `bottleneck` module writes `bottleneck.bin` and
//! `bottleneck-samples.jsonl`).

/// The magic bytes the (uncompressed) log starts with.
pub const MAGIC: &[u8; 8] = b"CCLABBN1";
/// Size of one record.
pub const RECORD_BYTES: usize = 32;

/// What happened to a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Reached the bottleneck (after the loss element, before the queue).
    Arrive = 0,
    /// Dropped (see the reason).
    Drop = 1,
    /// Left the queue onto the link.
    Depart = 2,
    /// A duplicate copy entered.
    Duplicate = 3,
    /// An AQM set CE on it (see the reason, a `MarkReason` code); the
    /// packet stays queued (marks at enqueue, logged after its arrival)
    /// or departs (marks at dequeue, logged before its departure).
    Mark = 4,
}

/// One per-packet event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Record {
    /// ns since the log's epoch.
    pub t_ns: u64,
    /// Flow number.
    pub flow: u16,
    /// 0 up, 1 down.
    pub dir: u8,
    /// A [`Kind`] code.
    pub kind: u8,
    /// A drop reason code (`DropReason`) for drops, a mark reason code
    /// (`MarkReason`, the same code for the same mechanism) for marks, 0
    /// otherwise.
    pub reason: u8,
    /// The packet's ECN codepoint after the event (`Ecn` bits: 0 Not-ECT,
    /// 1 ECT(1), 2 ECT(0), 3 CE).
    pub ecn: u8,
    /// Datagram size, bytes.
    pub size: u16,
    /// Queue bytes after the event.
    pub queue_bytes: u32,
    /// Queue packets after the event.
    pub queue_packets: u32,
    /// Time spent queued, ns (departs, dequeue drops and dequeue marks).
    pub sojourn_ns: u32,
}

impl Record {
    /// The 32-byte encoding.
    pub fn encode(&self) -> [u8; RECORD_BYTES] {
        let mut b = [0u8; RECORD_BYTES];
        b[0..8].copy_from_slice(&self.t_ns.to_le_bytes());
        b[8..10].copy_from_slice(&self.flow.to_le_bytes());
        b[10] = self.dir;
        b[11] = self.kind;
        b[12] = self.reason;
        b[13] = self.ecn;
        b[14..16].copy_from_slice(&self.size.to_le_bytes());
        b[16..20].copy_from_slice(&self.queue_bytes.to_le_bytes());
        b[20..24].copy_from_slice(&self.queue_packets.to_le_bytes());
        b[24..28].copy_from_slice(&self.sojourn_ns.to_le_bytes());
        b
    }

    /// Decodes 32 bytes.
    pub fn decode(b: &[u8; RECORD_BYTES]) -> Record {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Record {
            t_ns: u64::from_le_bytes(b[0..8].try_into().unwrap()),
            flow: u16::from_le_bytes([b[8], b[9]]),
            dir: b[10],
            kind: b[11],
            reason: b[12],
            ecn: b[13] & 0b11,
            size: u16::from_le_bytes([b[14], b[15]]),
            queue_bytes: u32_at(16),
            queue_packets: u32_at(20),
            sojourn_ns: u32_at(24),
        }
    }
}

/// Where per-packet events go.
pub trait Sink {
    /// Takes one event.
    fn record(&mut self, r: &Record);
}

impl Sink for Vec<Record> {
    fn record(&mut self, r: &Record) {
        self.push(*r);
    }
}

/// Discards events.
pub struct NoSink;

impl Sink for NoSink {
    fn record(&mut self, _: &Record) {}
}

/// One periodic sample of one direction of the bottleneck.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Sample {
    /// End of the interval, seconds since the run's start.
    pub t_s: f64,
    /// `up` or `down`.
    pub dir: String,
    /// Length of the interval, seconds.
    pub interval_s: f64,
    /// Bytes that left the queue onto the link in the interval.
    pub sent_bytes: u64,
    /// Packets likewise.
    pub sent_packets: u64,
    /// sent bits / capacity in the interval.
    pub utilization: f64,
    /// Queue bytes at the end of the interval.
    pub queue_bytes: u64,
    /// Queue packets at the end of the interval.
    pub queue_packets: u64,
    /// Drops in the interval, every reason.
    pub drops: u64,
    /// Drops since the start.
    pub drops_total: u64,
    /// CE marks in the interval, every reason (absent when 0, so the
    /// samples of links that mark nothing are what they were before ECN).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub marks: u64,
    /// CE marks since the start (absent while 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub marks_total: u64,
    /// The direction's capacity over the interval, bits, on a direction
    /// whose capacity moves (a trace; rate changes or pauses): what a
    /// run's utilization weights the sample by. Absent on a direction of
    /// one constant rate, whose samples weigh by their length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_bits: Option<f64>,
}

fn is_zero(x: &u64) -> bool {
    *x == 0
}
