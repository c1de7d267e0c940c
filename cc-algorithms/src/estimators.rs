//! Estimators shared by the algorithms: round tracking, windowed min/max
//! filters, an exponentially weighted moving average and the Westwood
//! bandwidth filters (Linux Westwood+, ns-3 Westwood and ns-3 Westwood+).
//! Each algorithm reuses these instead of keeping its own.

use std::time::Duration;
use std::time::Instant;

use quiche::cc::PacketSpace;

/// Counts round trips by packet number, as Linux `tcp_vegas.c` does with
/// `beg_snd_nxt`: a round ends when a packet sent after the round began is
/// acknowledged. Only application-space packets count, since packet numbers
/// restart in each packet number space.
#[derive(Debug, Default, Clone)]
pub struct RoundTracker {
    /// Number of completed rounds.
    rounds: u64,
    /// Largest application-space packet number sent so far.
    largest_sent: Option<u64>,
    /// The round ends once this packet number (or a later one) is acked.
    round_end: Option<u64>,
}

impl RoundTracker {
    /// Records a sent packet.
    pub fn on_sent(&mut self, space: PacketSpace, pkt_num: u64) {
        if space == PacketSpace::Application {
            self.largest_sent = Some(self.largest_sent.map_or(pkt_num, |p| p.max(pkt_num)));
            if self.round_end.is_none() {
                self.round_end = Some(pkt_num);
            }
        }
    }

    /// Records the largest packet number of an ACK; returns true when it
    /// completes a round, and starts the next one.
    pub fn on_ack(&mut self, space: PacketSpace, largest_acked: u64) -> bool {
        if space != PacketSpace::Application {
            return false;
        }
        match self.round_end {
            Some(end) if largest_acked >= end => {
                self.rounds += 1;
                // The next round ends with the next packet sent after this
                // point, so it covers one full round trip.
                self.round_end = self.largest_sent.map(|p| p + 1);
                true
            }
            _ => false,
        }
    }

    /// Completed rounds.
    pub fn rounds(&self) -> u64 {
        self.rounds
    }
}

/// Which extreme a [`WindowedFilter`] keeps.
pub trait Extreme: Copy {
    /// Whether `a` is at least as good as `b` (for a max filter: `a >= b`).
    fn better(a: f64, b: f64) -> bool;
}

/// Keeps the maximum.
#[derive(Debug, Clone, Copy)]
pub struct Max;
/// Keeps the minimum.
#[derive(Debug, Clone, Copy)]
pub struct Min;

impl Extreme for Max {
    fn better(a: f64, b: f64) -> bool {
        a >= b
    }
}
impl Extreme for Min {
    fn better(a: f64, b: f64) -> bool {
        a <= b
    }
}

/// Windowed min or max over time, after Kathleen Nichols' algorithm (as in
/// Linux `lib/minmax.c`): the best, second best and third best samples of
/// the window, so the estimate ages out in O(1) per sample.
#[derive(Debug, Clone)]
pub struct WindowedFilter<E: Extreme> {
    window: Duration,
    /// (time, value): best first.
    samples: [Option<(Instant, f64)>; 3],
    _kind: std::marker::PhantomData<E>,
}

/// A windowed maximum filter.
pub type MaxFilter = WindowedFilter<Max>;
/// A windowed minimum filter.
pub type MinFilter = WindowedFilter<Min>;

impl<E: Extreme> WindowedFilter<E> {
    /// A filter over `window`.
    pub fn new(window: Duration) -> Self {
        WindowedFilter {
            window,
            samples: [None; 3],
            _kind: std::marker::PhantomData,
        }
    }

    /// The current estimate.
    pub fn get(&self) -> Option<f64> {
        self.samples[0].map(|(_, v)| v)
    }

    /// Forgets every sample.
    pub fn reset(&mut self) {
        self.samples = [None; 3];
    }

    /// Adds a sample taken at `now`.
    pub fn update(&mut self, now: Instant, value: f64) {
        if !value.is_finite() {
            return;
        }
        let fresh = Some((now, value));
        let expired = |s: Option<(Instant, f64)>| {
            s.is_none_or(|(t, _)| now.saturating_duration_since(t) > self.window)
        };
        // A new best, or nothing valid left in the window: restart.
        if self.samples[0].is_none_or(|(_, v)| E::better(value, v)) || expired(self.samples[2]) {
            self.samples = [fresh; 3];
            return;
        }
        if self.samples[1].is_none_or(|(_, v)| E::better(value, v)) {
            self.samples[1] = fresh;
            self.samples[2] = fresh;
        } else if self.samples[2].is_none_or(|(_, v)| E::better(value, v)) {
            self.samples[2] = fresh;
        }
        // Age out the best samples, promoting the runners-up.
        if expired(self.samples[0]) {
            self.samples = [self.samples[1], self.samples[2], fresh];
            if expired(self.samples[0]) {
                self.samples = [self.samples[1], self.samples[2], fresh];
            }
        } else if self.samples[1] == self.samples[0]
            && self.samples[0]
                .is_some_and(|(t, _)| now.saturating_duration_since(t) > self.window / 4)
        {
            // A quarter of the window passed without a new second best.
            self.samples[1] = fresh;
            self.samples[2] = fresh;
        } else if self.samples[2] == self.samples[1]
            && self.samples[1]
                .is_some_and(|(t, _)| now.saturating_duration_since(t) > self.window / 2)
        {
            self.samples[2] = fresh;
        }
    }
}

/// Exponentially weighted moving average: `v <- (1 - w) v + w x`.
#[derive(Debug, Clone, Copy)]
pub struct Ewma {
    weight: f64,
    value: Option<f64>,
}

impl Ewma {
    /// An average giving weight `weight` (0 < w <= 1) to each new sample.
    pub fn new(weight: f64) -> Self {
        Ewma {
            weight: weight.clamp(f64::MIN_POSITIVE, 1.0),
            value: None,
        }
    }

    /// Adds a sample; the first sample sets the average. Non-finite samples
    /// are ignored.
    pub fn update(&mut self, sample: f64) -> f64 {
        if sample.is_finite() {
            self.value = Some(match self.value {
                Some(v) => (1.0 - self.weight) * v + self.weight * sample,
                None => sample,
            });
        }
        self.value.unwrap_or(0.0)
    }

    /// The average, if any sample arrived.
    pub fn get(&self) -> Option<f64> {
        self.value
    }
}

/// Minimum length of a Westwood+ sampling window (Linux
/// `TCP_WESTWOOD_RTT_MIN`, 50 ms).
pub const WESTWOOD_RTT_MIN: Duration = Duration::from_millis(50);

/// The Westwood+ bandwidth estimator of Linux `tcp_westwood.c`.
///
/// Acknowledged bytes are summed over a sampling window of at least
/// `max(RTT, 50 ms)`; at the end of each window the sample `bytes / window`
/// goes through two cascaded filters `x <- (7 x + sample) / 8`. The first
/// window's sample initialises both filters.
#[derive(Debug, Clone)]
pub struct WestwoodBwFilter {
    /// Start of the current sampling window.
    window_start: Option<Instant>,
    /// Bytes acknowledged in the current window.
    acked_bytes: u64,
    /// First filter stage, bytes per second.
    bw_ns_est: f64,
    /// Second filter stage: the bandwidth estimate, bytes per second.
    bw_est: f64,
}

impl Default for WestwoodBwFilter {
    fn default() -> Self {
        Self::new()
    }
}

impl WestwoodBwFilter {
    /// An empty estimator.
    pub fn new() -> Self {
        WestwoodBwFilter {
            window_start: None,
            acked_bytes: 0,
            bw_ns_est: 0.0,
            bw_est: 0.0,
        }
    }

    fn filter(a: f64, b: f64) -> f64 {
        (7.0 * a + b) / 8.0
    }

    /// Records `bytes` acknowledged at `now` with the latest RTT sample
    /// `rtt`. Returns true when a sampling window closed. As in Linux, the
    /// window is checked before this ACK's bytes are added, so they count
    /// towards the next window.
    pub fn on_ack(&mut self, now: Instant, bytes: u64, rtt: Duration) -> bool {
        let start = *self.window_start.get_or_insert(now);
        let delta = now.saturating_duration_since(start);
        if rtt.is_zero() || delta <= rtt.max(WESTWOOD_RTT_MIN) {
            self.acked_bytes = self.acked_bytes.saturating_add(bytes);
            return false;
        }
        let sample = self.acked_bytes as f64 / delta.as_secs_f64();
        if self.bw_ns_est == 0.0 && self.bw_est == 0.0 {
            self.bw_ns_est = sample;
            self.bw_est = sample;
        } else {
            self.bw_ns_est = Self::filter(self.bw_ns_est, sample);
            self.bw_est = Self::filter(self.bw_est, self.bw_ns_est);
        }
        self.acked_bytes = bytes;
        self.window_start = Some(now);
        true
    }

    /// The bandwidth estimate in bytes per second (0 before the first
    /// window closes).
    pub fn estimate(&self) -> f64 {
        self.bw_est
    }
}

/// The original Westwood bandwidth estimator, as ns-3's `TcpWestwood`
/// models it with its Tustin filter: every ACK gives a sample
/// `s = acked bytes / RTT`, and `b <- a b + (1 - a) (s + s_prev) / 2` with
/// `a = 0.9`. Unlike Westwood+ it samples per ACK, so ACK compression
/// inflates it, the flaw Westwood+ corrected.
#[derive(Debug, Clone, Default)]
pub struct WestwoodTustinFilter {
    /// Filtered estimate, bytes per second.
    bw: f64,
    /// Previous raw sample, bytes per second.
    last_sample: f64,
}

impl WestwoodTustinFilter {
    /// Filter gain `a`.
    pub const GAIN: f64 = 0.9;

    /// Records an ACK of `bytes` with RTT `rtt`.
    pub fn on_ack(&mut self, bytes: u64, rtt: Duration) {
        if rtt.is_zero() {
            return;
        }
        let sample = bytes as f64 / rtt.as_secs_f64();
        if !sample.is_finite() {
            return;
        }
        self.step(sample);
    }

    /// The bandwidth estimate in bytes per second.
    pub fn estimate(&self) -> f64 {
        self.bw
    }

    /// One step of the Tustin filter with a new raw `sample`.
    fn step(&mut self, sample: f64) {
        self.bw = Self::GAIN * self.bw + (1.0 - Self::GAIN) * (sample + self.last_sample) / 2.0;
        self.last_sample = sample;
    }
}

/// The Westwood+ bandwidth estimator as ns-3 models it (`TcpWestwood` with
/// `ProtocolType=WestwoodPlus` and its default `FilterType=Tustin`, as in
/// ns-3.29): one sample per RTT instead of one per ACK, through the same
/// Tustin filter as [`WestwoodTustinFilter`].
///
/// ns-3 starts a sampling period at an ACK (whose bytes count) and closes it
/// with a timer one RTT later, the RTT sample of that first ACK; the sample
/// is the bytes acknowledged in the period divided by that RTT. A plugin has
/// no timers, so the period closes at the first ACK at or after its end;
/// that ACK's bytes then open the next period, as in ns-3 where the ACK
/// after the timer schedules the next one.
#[derive(Debug, Clone, Default)]
pub struct Ns3WestwoodPlusFilter {
    /// Start of the open sampling period and its length (the RTT sample
    /// of the ACK that opened it).
    period: Option<(Instant, Duration)>,
    /// Bytes acknowledged in the open period.
    acked_bytes: u64,
    /// The Tustin filter the per-RTT samples go through.
    tustin: WestwoodTustinFilter,
}

impl Ns3WestwoodPlusFilter {
    /// Records `bytes` acknowledged at `now` with RTT sample `rtt`. Returns
    /// true when a sampling period closed. ACKs without an RTT (zero) are
    /// ignored, as ns-3 ignores them.
    pub fn on_ack(&mut self, now: Instant, bytes: u64, rtt: Duration) -> bool {
        if rtt.is_zero() {
            return false;
        }
        let mut closed = false;
        if let Some((start, len)) = self.period {
            if now.saturating_duration_since(start) < len {
                self.acked_bytes = self.acked_bytes.saturating_add(bytes);
                return false;
            }
            let sample = self.acked_bytes as f64 / len.as_secs_f64();
            if sample.is_finite() {
                self.tustin.step(sample);
            }
            closed = true;
        }
        self.period = Some((now, rtt));
        self.acked_bytes = bytes;
        closed
    }

    /// The bandwidth estimate in bytes per second.
    pub fn estimate(&self) -> f64 {
        self.tustin.estimate()
    }
}

/// Which Westwood-family bandwidth filter an algorithm uses. The numeric
/// codes are the values of the registry's `filter=` parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WestwoodFilterKind {
    /// `filter=0`: Linux `tcp_westwood.c` (Westwood+), [`WestwoodBwFilter`].
    Linux,
    /// `filter=1`: ns-3's original Westwood, per-ACK samples,
    /// [`WestwoodTustinFilter`].
    Ns3Westwood,
    /// `filter=2`: ns-3's Westwood+, per-RTT samples,
    /// [`Ns3WestwoodPlusFilter`].
    Ns3WestwoodPlus,
}

impl WestwoodFilterKind {
    /// The kind for a registry code (rounded to the nearest integer);
    /// `None` for codes other than 0, 1 and 2.
    pub fn from_code(code: f64) -> Option<Self> {
        if !code.is_finite() {
            return None;
        }
        match code.round() as i64 {
            0 => Some(Self::Linux),
            1 => Some(Self::Ns3Westwood),
            2 => Some(Self::Ns3WestwoodPlus),
            _ => None,
        }
    }

    /// The registry code.
    pub fn code(self) -> u8 {
        match self {
            Self::Linux => 0,
            Self::Ns3Westwood => 1,
            Self::Ns3WestwoodPlus => 2,
        }
    }
}

/// A Westwood-family bandwidth estimator chosen at run time.
#[derive(Debug, Clone)]
pub enum WestwoodEstimator {
    /// Linux Westwood+.
    Linux(WestwoodBwFilter),
    /// ns-3 Westwood.
    Ns3Westwood(WestwoodTustinFilter),
    /// ns-3 Westwood+.
    Ns3WestwoodPlus(Ns3WestwoodPlusFilter),
}

impl WestwoodEstimator {
    /// An empty estimator of `kind`.
    pub fn new(kind: WestwoodFilterKind) -> Self {
        match kind {
            WestwoodFilterKind::Linux => Self::Linux(WestwoodBwFilter::new()),
            WestwoodFilterKind::Ns3Westwood => Self::Ns3Westwood(WestwoodTustinFilter::default()),
            WestwoodFilterKind::Ns3WestwoodPlus => {
                Self::Ns3WestwoodPlus(Ns3WestwoodPlusFilter::default())
            }
        }
    }

    /// Which filter this is.
    pub fn kind(&self) -> WestwoodFilterKind {
        match self {
            Self::Linux(_) => WestwoodFilterKind::Linux,
            Self::Ns3Westwood(_) => WestwoodFilterKind::Ns3Westwood,
            Self::Ns3WestwoodPlus(_) => WestwoodFilterKind::Ns3WestwoodPlus,
        }
    }

    /// Records `bytes` acknowledged at `now`, with the latest RTT sample.
    pub fn on_ack(&mut self, now: Instant, bytes: u64, rtt: Duration) {
        match self {
            Self::Linux(f) => {
                f.on_ack(now, bytes, rtt);
            }
            Self::Ns3Westwood(f) => f.on_ack(bytes, rtt),
            Self::Ns3WestwoodPlus(f) => {
                f.on_ack(now, bytes, rtt);
            }
        }
    }

    /// The bandwidth estimate in bytes per second (0 before the first
    /// sample).
    pub fn estimate(&self) -> f64 {
        match self {
            Self::Linux(f) => f.estimate(),
            Self::Ns3Westwood(f) => f.estimate(),
            Self::Ns3WestwoodPlus(f) => f.estimate(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_end_when_a_packet_of_the_round_is_acked() {
        let mut r = RoundTracker::default();
        for pn in 0..10 {
            r.on_sent(PacketSpace::Application, pn);
        }
        // Round 1 ends with the first packet's ACK.
        assert!(r.on_ack(PacketSpace::Application, 0));
        // Packets 1..9 were sent in round 1: acking them ends nothing until
        // packet 10, the first of round 2, is acked.
        assert!(!r.on_ack(PacketSpace::Application, 9));
        r.on_sent(PacketSpace::Application, 10);
        assert!(!r.on_ack(PacketSpace::Handshake, 50));
        assert!(r.on_ack(PacketSpace::Application, 10));
        assert_eq!(r.rounds(), 2);
    }

    #[test]
    fn max_filter_keeps_best_and_ages_it_out() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut f = MaxFilter::new(ms(100));
        f.update(t0, 10.0);
        f.update(t0 + ms(10), 5.0);
        assert_eq!(f.get(), Some(10.0));
        f.update(t0 + ms(60), 7.0);
        assert_eq!(f.get(), Some(10.0));
        // 10 is older than the window: the runner-up takes over.
        f.update(t0 + ms(120), 6.0);
        assert_eq!(f.get(), Some(7.0));
        f.update(t0 + ms(400), 1.0);
        assert_eq!(f.get(), Some(1.0));
    }

    #[test]
    fn min_filter_tracks_minimum() {
        let t0 = Instant::now();
        let mut f = MinFilter::new(Duration::from_secs(10));
        for (i, v) in [50.0, 40.0, 45.0, 41.0].into_iter().enumerate() {
            f.update(t0 + Duration::from_millis(i as u64), v);
        }
        assert_eq!(f.get(), Some(40.0));
        f.update(t0, f64::NAN);
        assert_eq!(f.get(), Some(40.0));
    }

    #[test]
    fn ewma_matches_hand_computation() {
        let mut e = Ewma::new(0.25);
        assert_eq!(e.update(8.0), 8.0);
        // 0.75 * 8 + 0.25 * 4 = 7
        assert_eq!(e.update(4.0), 7.0);
        assert_eq!(e.update(f64::INFINITY), 7.0);
    }

    #[test]
    fn westwood_filter_matches_linux_arithmetic() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut w = WestwoodBwFilter::new();
        let rtt = ms(20);
        assert!(!w.on_ack(t0, 0, rtt));
        // Windows last more than max(20, 50) ms.
        assert!(!w.on_ack(t0 + ms(30), 30_000, rtt));
        // Closes [t0, t0+60ms] holding 30_000 bytes: 500 kB/s seeds both
        // filters; this ACK's 30_000 bytes go to the next window.
        assert!(w.on_ack(t0 + ms(60), 30_000, rtt));
        assert!((w.estimate() - 500_000.0).abs() < 1e-6);
        assert!(w.on_ack(t0 + ms(120), 90_000, rtt));
        assert!((w.estimate() - 500_000.0).abs() < 1e-6);
        // 90_000 bytes in 60 ms = 1.5 MB/s through both 7/8 filters.
        assert!(w.on_ack(t0 + ms(180), 0, rtt));
        let ns = (7.0 * 500e3 + 1.5e6) / 8.0;
        let est = (7.0 * 500e3 + ns) / 8.0;
        assert_eq!(est, 515_625.0);
        assert!((w.estimate() - est).abs() < 1e-6, "{}", w.estimate());
    }

    #[test]
    fn westwood_tustin_filter_by_hand() {
        let mut w = WestwoodTustinFilter::default();
        let rtt = Duration::from_millis(100);
        // 12_000 bytes per 100 ms = 120 kB/s samples.
        w.on_ack(12_000, rtt);
        // 0.9 x 0 + 0.1 x (120k + 0) / 2 = 6000
        assert!((w.estimate() - 6_000.0).abs() < 1e-9);
        w.on_ack(12_000, rtt);
        // 0.9 x 6000 + 0.1 x (120k + 120k) / 2 = 17_400
        assert!((w.estimate() - 17_400.0).abs() < 1e-9);
        w.on_ack(12_000, Duration::ZERO);
        assert!((w.estimate() - 17_400.0).abs() < 1e-9);
    }

    #[test]
    fn ns3_westwood_plus_samples_once_per_rtt_by_hand() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut w = Ns3WestwoodPlusFilter::default();
        // The first ACK opens a 100 ms period; its bytes count.
        assert!(!w.on_ack(t0, 12_000, ms(100)));
        assert!(!w.on_ack(t0 + ms(50), 12_000, ms(100)));
        // No RTT sample: ignored.
        assert!(!w.on_ack(t0 + ms(60), 99_000, Duration::ZERO));
        assert_eq!(w.estimate(), 0.0);
        // Closes: 24_000 bytes / 100 ms = 240 kB/s;
        // 0.9 x 0 + 0.1 x (240k + 0) / 2 = 12_000. This ACK opens the next.
        assert!(w.on_ack(t0 + ms(100), 6_000, ms(100)));
        assert!((w.estimate() - 12_000.0).abs() < 1e-9);
        // 6_000 / 100 ms = 60 kB/s: 0.9 x 12k + 0.1 x (60k + 240k) / 2.
        assert!(w.on_ack(t0 + ms(200), 0, ms(100)));
        assert!((w.estimate() - 25_800.0).abs() < 1e-9, "{}", w.estimate());
    }

    #[test]
    fn filter_codes_round_trip() {
        for kind in [
            WestwoodFilterKind::Linux,
            WestwoodFilterKind::Ns3Westwood,
            WestwoodFilterKind::Ns3WestwoodPlus,
        ] {
            assert_eq!(
                WestwoodFilterKind::from_code(kind.code() as f64),
                Some(kind)
            );
            assert_eq!(WestwoodEstimator::new(kind).kind(), kind);
        }
        assert_eq!(WestwoodFilterKind::from_code(3.0), None);
        assert_eq!(WestwoodFilterKind::from_code(f64::NAN), None);
    }
}
