//! Slow start as a choice: standard doubling, or HyStart++ (RFC 9406),
//! with a record of when and why slow start ended.
//!
//! HyStart++ (RFC 9406 section 4.2, constants of section 4.3): per round,
//! the minimum of at least `N_RTT_SAMPLE` (8) RTT samples is compared with
//! the previous round's; a rise of `clamp(last / 8, 4 ms, 16 ms)` or more
//! ends slow start into Conservative Slow Start (CSS), which grows by a
//! quarter of what slow start would (`CSS_GROWTH_DIVISOR` = 4). If a CSS
//! round's minimum falls back below the minimum that began CSS, slow start
//! resumes (the rise was spurious); after `CSS_ROUNDS` (5) rounds, CSS
//! ends: ssthresh = cwnd, congestion avoidance. A loss in either ends both
//! as it ends standard slow start. The per-ACK limit `L` is infinite,
//! as the RFC allows for a paced sender (every plugin is paced).
//!
//! **Measured: with pacing it ends a round late.** NewReno on the
//! simulator (20 Mbit/s, 40 ms, 1-BDP drop-tail, 3 s): standard slow start
//! lost 157 packets, HyStart++ 146. In the round in which the queue built
//! (packets 148 to 287) the RTT rose from 44 to 74 ms, but the round's
//! minimum stayed 40.6 ms: its first packets, paced, met an empty queue.
//! The next round's minimum (74.9 ms) entered CSS at once, with the window
//! already at 392 kB against a BDP plus buffer of 200 kB, and the loss came
//! 7 ms later. quiche's built-in Reno with its own HyStart++ lost 87 against
//! 153 on the same link, entering CSS at 263 ms with a 288 kB window; the
//! built-ins are not paced. Unpaced (`pacing = "off"` on the flow), this
//! NewReno entered no CSS at all (153 lost, as standard): its rounds ended
//! at packets 79 and 156, and the loss came before the round after 156
//! ended, every round's minimum 40.6 ms. Why quiche's own does better is
//! not found yet: both compare whole-round minima as RFC 9406 says.

use std::time::{Duration, Instant};

use quiche::cc::{AckEvent, PacketSpace, SentPacket};

use crate::estimators::RoundTracker;

/// RFC 9406's MIN_RTT_THRESH.
pub const MIN_RTT_THRESH: Duration = Duration::from_millis(4);
/// RFC 9406's MAX_RTT_THRESH.
pub const MAX_RTT_THRESH: Duration = Duration::from_millis(16);
/// RFC 9406's MIN_RTT_DIVISOR.
pub const MIN_RTT_DIVISOR: u32 = 8;
/// RFC 9406's N_RTT_SAMPLE.
pub const N_RTT_SAMPLE: u32 = 8;
/// RFC 9406's CSS_GROWTH_DIVISOR.
pub const CSS_GROWTH_DIVISOR: usize = 4;
/// RFC 9406's CSS_ROUNDS.
pub const CSS_ROUNDS: u32 = 5;

/// HyStart++'s constants (RFC 9406 section 4.3), each a parameter of the
/// plugins that take `slow_start=` (`hs_*`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HyStartParams {
    /// MIN_RTT_THRESH.
    pub min_rtt_thresh: Duration,
    /// MAX_RTT_THRESH.
    pub max_rtt_thresh: Duration,
    /// MIN_RTT_DIVISOR.
    pub min_rtt_divisor: u32,
    /// N_RTT_SAMPLE.
    pub n_rtt_sample: u32,
    /// CSS_GROWTH_DIVISOR.
    pub css_growth_divisor: usize,
    /// CSS_ROUNDS.
    pub css_rounds: u32,
}

impl HyStartParams {
    /// The RFC's values.
    pub const RFC: HyStartParams = HyStartParams {
        min_rtt_thresh: MIN_RTT_THRESH,
        max_rtt_thresh: MAX_RTT_THRESH,
        min_rtt_divisor: MIN_RTT_DIVISOR,
        n_rtt_sample: N_RTT_SAMPLE,
        css_growth_divisor: CSS_GROWTH_DIVISOR,
        css_rounds: CSS_ROUNDS,
    };
}

impl Default for HyStartParams {
    fn default() -> Self {
        HyStartParams::RFC
    }
}

/// SEARCH's constants, each a parameter of the plugins that take
/// `slow_start=` (`search_*`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchParams {
    /// WINDOW_SIZE_FACTOR: the window in initial RTTs.
    pub window_factor: f64,
    /// W: bins per window.
    pub w: usize,
    /// EXTRA_BINS: bins kept beyond a window.
    pub extra_bins: usize,
    /// THRESH.
    pub thresh: f64,
}

impl SearchParams {
    /// The draft's values.
    pub const DRAFT: SearchParams = SearchParams {
        window_factor: SEARCH_WINDOW_FACTOR,
        w: SEARCH_W,
        extra_bins: SEARCH_EXTRA_BINS,
        thresh: SEARCH_THRESH,
    };

    fn bins(&self) -> usize {
        self.w.max(1) + self.extra_bins.max(1)
    }
}

impl Default for SearchParams {
    fn default() -> Self {
        SearchParams::DRAFT
    }
}

/// A plugin's slow start: which, with its rule's constants.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SlowStartConfig {
    /// Which slow start.
    pub kind: SlowStartKind,
    /// HyStart++'s constants (used when `kind` is HyStart++).
    pub hystart: HyStartParams,
    /// SEARCH's constants (used when `kind` is SEARCH).
    pub search: SearchParams,
}

impl SlowStartConfig {
    /// Standard slow start.
    pub const STANDARD: SlowStartConfig = SlowStartConfig::of(SlowStartKind::Standard);

    /// `kind` with the RFC's and the draft's constants.
    pub const fn of(kind: SlowStartKind) -> SlowStartConfig {
        SlowStartConfig {
            kind,
            hystart: HyStartParams::RFC,
            search: SearchParams::DRAFT,
        }
    }
}

impl From<SlowStartKind> for SlowStartConfig {
    fn from(kind: SlowStartKind) -> Self {
        SlowStartConfig::of(kind)
    }
}

/// Which slow start a window-based plugin runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SlowStartKind {
    /// Double per round until ssthresh or a loss (RFC 9002 B.5).
    #[default]
    Standard,
    /// HyStart++ (RFC 9406).
    HystartPlusPlus,
    /// SEARCH 3.x (the rule of draft-chung-ccwg-search before -09).
    Search,
}

impl SlowStartKind {
    /// From the registry's choice index (`standard`, `hystart++`,
    /// `search`).
    pub fn from_code(code: f64) -> Self {
        if code >= 1.5 {
            SlowStartKind::Search
        } else if code >= 0.5 {
            SlowStartKind::HystartPlusPlus
        } else {
            SlowStartKind::Standard
        }
    }
}

/// The exit rule a slow start runs besides a loss.
#[derive(Debug, Clone)]
pub enum ExitRule {
    /// HyStart++ (RFC 9406).
    HyStart(HyStartPP),
    /// SEARCH (draft-chung-ccwg-search).
    Search(Search),
}

impl ExitRule {
    /// The rule `cfg` asks for; `None` for standard slow start.
    pub fn new(cfg: SlowStartConfig) -> Option<ExitRule> {
        match cfg.kind {
            SlowStartKind::Standard => None,
            SlowStartKind::HystartPlusPlus => Some(ExitRule::HyStart(HyStartPP {
                p: cfg.hystart,
                ..HyStartPP::default()
            })),
            SlowStartKind::Search => Some(ExitRule::Search(Search {
                p: cfg.search,
                ..Search::default()
            })),
        }
    }

    /// Records a sent packet.
    pub fn on_sent(&mut self, pkt: &SentPacket) {
        // SEARCH counts deliveries only.
        if let ExitRule::HyStart(h) = self {
            h.on_sent(pkt);
        }
    }

    /// One ACK in slow start (or CSS), with the window before it;
    /// `app_limited` when the window was not used (RFC 9002 7.8).
    pub fn on_ack(
        &mut self,
        ack: &AckEvent,
        now: Instant,
        cwnd: usize,
        app_limited: bool,
    ) -> Verdict {
        match self {
            ExitRule::HyStart(h) => h.on_ack(ack),
            ExitRule::Search(s) => s.on_ack(ack, now, cwnd, app_limited),
        }
    }

    /// The window increase for `acked` bytes in slow start.
    pub fn increase(&self, acked: usize) -> usize {
        match self {
            ExitRule::HyStart(h) => h.increase(acked),
            ExitRule::Search(_) => acked,
        }
    }

    /// The share of slow start's growth allowed now: 1 /
    /// CSS_GROWTH_DIVISOR in HyStart++'s CSS, else 1 (for controllers with
    /// a growth rule of their own, which [`increase`](Self::increase)'s
    /// bytes do not fit).
    pub fn growth_share(&self) -> f64 {
        match self {
            ExitRule::HyStart(h) if h.in_css() => 1.0 / h.p.css_growth_divisor.max(1) as f64,
            _ => 1.0,
        }
    }

    /// Whether it is in HyStart++'s Conservative Slow Start.
    pub fn in_css(&self) -> bool {
        matches!(self, ExitRule::HyStart(h) if h.in_css())
    }

    /// Slow start ended some other way (a loss).
    pub fn reset(&mut self) {
        match self {
            ExitRule::HyStart(h) => h.reset(),
            ExitRule::Search(s) => s.reset(),
        }
    }

    /// The rule's own counters, for qlog.
    pub fn visit_metrics(&self, f: &mut dyn FnMut(&'static str, f64)) {
        match self {
            ExitRule::HyStart(h) => {
                f("hystart_css_entries", f64::from(h.css_entries));
                f("hystart_css_spurious", f64::from(h.css_spurious));
            }
            ExitRule::Search(s) => s.visit_metrics(f),
        }
    }
}

/// Why slow start ended (logged as `ss_exit_reason`: the code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitReason {
    /// A loss (or a congestion event) in slow start: code 1.
    Loss = 1,
    /// An RTT rule (HyStart++ entering CSS, Vegas's gamma): code 2.
    DelayIncrease = 2,
    /// The delivery rate stopped growing (SEARCH): code 3.
    BandwidthPlateau = 3,
}

/// What an exit rule tells the window after an ACK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Slow start (or CSS) goes on.
    Continue,
    /// HyStart++ saw the RTT rise: slow start has ended, CSS begins.
    EnterCss,
    /// The rise was spurious: CSS ends, slow start resumes.
    ResumeSlowStart,
    /// CSS is over: set ssthresh to the window.
    EndSlowStart,
    /// SEARCH found the delivery rate flat: leave slow start with this
    /// window (bytes), ssthresh with it.
    ExitWith(usize),
}

/// HyStart++ state for one flow.
#[derive(Debug, Clone, Default)]
pub struct HyStartPP {
    p: HyStartParams,
    rounds: RoundTracker,
    last_round_min: Option<Duration>,
    current_round_min: Option<Duration>,
    samples: u32,
    /// The round minimum that began CSS; `Some` while in CSS.
    css_baseline: Option<Duration>,
    css_rounds: u32,
    /// Times CSS was entered, and left back to slow start.
    pub css_entries: u32,
    /// Times a CSS was found spurious.
    pub css_spurious: u32,
}

impl HyStartPP {
    /// Records a sent packet (for rounds).
    pub fn on_sent(&mut self, pkt: &SentPacket) {
        self.rounds.on_sent(pkt.space, pkt.pkt_num);
    }

    /// Whether it is in Conservative Slow Start.
    pub fn in_css(&self) -> bool {
        self.css_baseline.is_some()
    }

    /// The window increase for `acked` bytes in slow start.
    pub fn increase(&self, acked: usize) -> usize {
        if self.in_css() {
            acked / self.p.css_growth_divisor.max(1)
        } else {
            acked
        }
    }

    /// One ACK in slow start or CSS.
    pub fn on_ack(&mut self, ack: &AckEvent) -> Verdict {
        if ack.space != PacketSpace::Application {
            return Verdict::Continue;
        }
        if let Some(largest) = ack.acked.iter().map(|p| p.pkt_num).max() {
            if self.rounds.on_ack(ack.space, largest) {
                self.last_round_min = self.current_round_min.take();
                self.samples = 0;
                if self.in_css() {
                    self.css_rounds += 1;
                    if self.css_rounds >= self.p.css_rounds {
                        self.css_baseline = None;
                        return Verdict::EndSlowStart;
                    }
                }
            }
        }
        let Some(rtt) = ack.rtt_sample else {
            return Verdict::Continue;
        };
        self.current_round_min = Some(self.current_round_min.map_or(rtt, |m| m.min(rtt)));
        self.samples += 1;
        if self.samples < self.p.n_rtt_sample {
            return Verdict::Continue;
        }
        let current = self.current_round_min.unwrap_or(rtt);
        match self.css_baseline {
            None => {
                if let Some(last) = self.last_round_min {
                    // clamp(), without its panic when a tuned minimum
                    // exceeds the maximum: the maximum wins.
                    let thresh = (last / self.p.min_rtt_divisor.max(1))
                        .max(self.p.min_rtt_thresh)
                        .min(self.p.max_rtt_thresh);
                    if current >= last + thresh {
                        self.css_baseline = Some(current);
                        self.css_rounds = 0;
                        self.css_entries += 1;
                        return Verdict::EnterCss;
                    }
                }
            }
            Some(baseline) => {
                if current < baseline {
                    // The rise was spurious: back to slow start.
                    self.css_baseline = None;
                    self.css_spurious += 1;
                    return Verdict::ResumeSlowStart;
                }
            }
        }
        Verdict::Continue
    }

    /// Slow start ended some other way (a loss): CSS ends with it.
    pub fn reset(&mut self) {
        self.css_baseline = None;
        self.css_rounds = 0;
    }
}

/// SEARCH's WINDOW_SIZE_FACTOR: the delivery window spans 3.5 initial
/// RTTs.
pub const SEARCH_WINDOW_FACTOR: f64 = 3.5;
/// SEARCH's W: bins in one delivery window.
pub const SEARCH_W: usize = 10;
/// SEARCH's EXTRA_BINS: bins kept beyond one window, for looking one RTT
/// back.
pub const SEARCH_EXTRA_BINS: usize = 15;
/// SEARCH's THRESH: the shortfall of delivered bytes against twice those
/// one RTT earlier that ends slow start.
pub const SEARCH_THRESH: f64 = 0.35;

/// SEARCH as its authors' version 3.0/3.1 and the draft's revisions before
/// -09 give it (draft-chung-ccwg-search; not -09/-10, see below): slow
/// start ends when the bytes delivered over the last window (3.5 initial
/// RTTs, in 10 bins) fall short of twice those delivered over the window
/// one smoothed RTT earlier by
/// `SEARCH_THRESH` of the latter: the delivery rate stopped doubling, the
/// bottleneck is full. Bins hold cumulative delivered bytes; the window one
/// RTT back is interpolated between bins.
///
/// **Not the newest revision.** From -09 (17 March 2026) the draft compares
/// the bytes delivered over the window with the bytes *sent* over the window
/// one RTT earlier, exits at a shortfall of 26% (not 35%), and drains the
/// window towards one initial RTT's deliveries at the exit instead of
/// keeping it. This is the earlier rule, which compares with twice the
/// bytes delivered one RTT earlier; -09/-10 are not implemented.
#[derive(Debug, Clone, Default)]
pub struct Search {
    p: SearchParams,
    /// Cumulative delivered bytes at the end of each bin (a ring).
    bins: Vec<u64>,
    /// Index of the current bin; `None` before the first ACK.
    curr: Option<u64>,
    bin_duration: Duration,
    bin_end: Option<Instant>,
    delivered: u64,
    /// Times the rule started over (missed bins, an app-limited ACK, an
    /// RTT too long for the bins kept).
    pub resets: u32,
    /// The last normalized difference computed (for qlog).
    pub last_norm_diff: f64,
}

impl Search {
    /// Starts over: the next ACK begins new bins.
    pub fn reset(&mut self) {
        self.curr = None;
        self.bin_end = None;
        self.bins.clear();
    }

    fn bin(&self, i: u64) -> u64 {
        self.bins[(i % self.bins.len() as u64) as usize]
    }

    /// Cumulative delivered bytes at fractional bin index `x`.
    fn at(&self, x: f64) -> f64 {
        let lo = x.floor();
        let frac = x - lo;
        let a = self.bin(lo as u64) as f64;
        if frac <= 0.0 {
            return a;
        }
        let b = self.bin(lo as u64 + 1) as f64;
        a + (b - a) * frac
    }

    /// One ACK in slow start; `app_limited` when the window was not used:
    /// a sender that does not fill its window cannot double its delivery
    /// rate, so its bins start over (as SEARCH 3.1 does).
    pub fn on_ack(
        &mut self,
        ack: &AckEvent,
        now: Instant,
        cwnd: usize,
        app_limited: bool,
    ) -> Verdict {
        if ack.space != PacketSpace::Application {
            return Verdict::Continue;
        }
        if app_limited {
            if self.curr.is_some() {
                self.resets += 1;
                self.reset();
            }
            return Verdict::Continue;
        }
        self.delivered += ack.acked_bytes as u64;
        let rtt = ack.rtt.smoothed_rtt;
        let (Some(curr), Some(end)) = (self.curr, self.bin_end) else {
            // The first ACK: bins of 3.5 RTTs / 10 from the RTT now.
            let Some(sample) = ack.rtt_sample.or(ack.rtt.min_rtt) else {
                return Verdict::Continue;
            };
            let d = sample.mul_f64(self.p.window_factor / self.p.w.max(1) as f64);
            if d.is_zero() {
                return Verdict::Continue;
            }
            self.bin_duration = d;
            self.bins = vec![0; self.p.bins()];
            self.bins[0] = self.delivered;
            self.curr = Some(0);
            self.bin_end = Some(now + d);
            return Verdict::Continue;
        };
        if now <= end {
            let i = (curr % self.bins.len() as u64) as usize;
            self.bins[i] = self.delivered;
            return Verdict::Continue;
        }
        // One or more bins ended: the ones no ACK reached keep the
        // cumulative count they started with.
        let passed =
            ((now - end).as_secs_f64() / self.bin_duration.as_secs_f64()).floor() as u64 + 1;
        // Bins with no ACK keep the cumulative count they began with; only
        // a gap longer than the bins kept (an idle sender) starts over.
        // Early in slow start a small window's ACKs come in trains an RTT
        // apart, several bins with none; resetting there (after 2 missed
        // bins) restarted the history every round until the window spanned
        // the RTT, and at 20 Mbit/s, 40 ms it put the first check past the
        // first loss.
        let ring = self.bins.len() as u64;
        if passed >= ring {
            self.resets += 1;
            self.reset();
            return Verdict::Continue;
        }
        let before = self.delivered - ack.acked_bytes as u64;
        for k in 1..passed {
            let i = ((curr + k) % ring) as usize;
            self.bins[i] = before;
        }
        let curr = curr + passed;
        self.bins[(curr % ring) as usize] = self.delivered;
        self.curr = Some(curr);
        self.bin_end = Some(end + self.bin_duration * passed as u32);
        // The window now, and the window one smoothed RTT earlier.
        let back = rtt.as_secs_f64() / self.bin_duration.as_secs_f64();
        let prev = curr as f64 - back;
        let w = self.p.w.max(1);
        if prev < w as f64 {
            return Verdict::Continue;
        }
        if curr as f64 - (prev - w as f64) >= ring as f64 - 1.0 {
            // The RTT grew past what the bins remember: start over.
            self.resets += 1;
            self.reset();
            return Verdict::Continue;
        }
        let curr_delv = (self.bin(curr) - self.bin(curr - w as u64)) as f64;
        let prev_delv = self.at(prev) - self.at(prev - w as f64);
        if prev_delv <= 0.0 {
            return Verdict::Continue;
        }
        let norm_diff = (2.0 * prev_delv - curr_delv) / (2.0 * prev_delv);
        self.last_norm_diff = norm_diff;
        if norm_diff >= self.p.thresh {
            return Verdict::ExitWith(cwnd);
        }
        Verdict::Continue
    }

    /// SEARCH's counters, for qlog.
    pub fn visit_metrics(&self, f: &mut dyn FnMut(&'static str, f64)) {
        f("search_norm_diff", self.last_norm_diff);
        f("search_resets", f64::from(self.resets));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::newreno::NewReno;
    use crate::testing::{config, Driver, MSS};
    use quiche::cc::CongestionController;

    fn hystart() -> Driver<NewReno> {
        Driver::new(NewReno::new(&config()).with_slow_start(SlowStartKind::HystartPlusPlus))
    }

    /// One round at `rtt_ms`: the whole window sent, then acknowledged a
    /// packet per ACK (a sample each).
    fn round(d: &mut Driver<NewReno>, rtt_ms: u64) {
        d.rtt = Duration::from_millis(rtt_ms);
        let n = d.cc.congestion_window() / MSS;
        d.send(n, MSS, false);
        for _ in 0..n {
            d.ack(1, false);
        }
    }

    #[test]
    fn an_rtt_rise_leads_through_five_css_rounds_to_avoidance() {
        let mut d = hystart();
        round(&mut d, 100);
        round(&mut d, 100);
        assert_eq!(d.cc.state_name(), "slow_start");
        // 100 ms / 8 = 12.5 ms: a rise of 13 ms enters CSS.
        round(&mut d, 113);
        assert_eq!(d.cc.state_name(), "conservative_slow_start");
        let at_css = d.cc.congestion_window();
        for _ in 0..4 {
            round(&mut d, 113);
            assert_eq!(d.cc.state_name(), "conservative_slow_start");
        }
        // CSS grows by a quarter of slow start's rate.
        let grown = d.cc.congestion_window() as f64 / at_css as f64;
        assert!(grown < 1.3f64.powi(4) && grown > 1.2f64.powi(4), "{grown}");
        round(&mut d, 113);
        assert_eq!(d.cc.state_name(), "congestion_avoidance");
        // Slow start ended when CSS began (RFC 9406), with that window.
        let (reason, cwnd) = d.cc.slow_start_exit().unwrap();
        assert_eq!(reason, ExitReason::DelayIncrease);
        assert!(
            cwnd <= at_css && cwnd + 20 * MSS > at_css,
            "{cwnd} {at_css}"
        );
        assert_eq!(d.cc.ssthresh(), Some(d.cc.congestion_window()));
    }

    #[test]
    fn a_rise_under_the_threshold_keeps_slow_start() {
        let mut d = hystart();
        round(&mut d, 100);
        round(&mut d, 100);
        round(&mut d, 112); // under 12.5 ms
        assert_eq!(d.cc.state_name(), "slow_start");
    }

    #[test]
    fn a_falling_rtt_in_css_resumes_slow_start() {
        let mut d = hystart();
        round(&mut d, 100);
        round(&mut d, 100);
        round(&mut d, 120);
        assert_eq!(d.cc.state_name(), "conservative_slow_start");
        assert!(d.cc.slow_start_exit().is_some());
        round(&mut d, 110);
        assert_eq!(d.cc.state_name(), "slow_start");
        // A spurious CSS is no exit.
        assert_eq!(d.cc.slow_start_exit(), None);
    }

    #[test]
    fn a_loss_in_slow_start_is_recorded_for_both() {
        for kind in [
            SlowStartKind::Standard,
            SlowStartKind::HystartPlusPlus,
            SlowStartKind::Search,
        ] {
            let mut d = Driver::new(NewReno::new(&config()).with_slow_start(kind));
            round(&mut d, 100);
            let w = d.cc.congestion_window();
            d.send(1, MSS, false);
            d.lose(1, true);
            assert_eq!(
                d.cc.slow_start_exit(),
                Some((ExitReason::Loss, w)),
                "{kind:?}"
            );
        }
    }

    /// An application-space ACK of `bytes` at a 100 ms RTT.
    fn search_ack(acked: &[quiche::cc::AckedPacket], bytes: usize) -> AckEvent<'_> {
        let rtt = Duration::from_millis(100);
        AckEvent {
            space: PacketSpace::Application,
            acked,
            acked_bytes: bytes,
            rtt_sample: Some(rtt),
            rtt: quiche::cc::RttEstimates {
                latest_rtt: rtt,
                min_rtt: Some(rtt),
                smoothed_rtt: rtt,
                rttvar: Duration::ZERO,
            },
            bytes_in_flight_before: 0,
            bytes_in_flight_after: 0,
            app_limited: false,
            delivery_rate: 0,
            delivery_rate_app_limited: false,
            recovery_start_time: None,
        }
    }

    /// ACKs every 5 ms for `ms` milliseconds at 100 ms RTT, delivering
    /// `rate(t)` bytes per second; the first time SEARCH says exit.
    fn search_run(s: &mut Search, ms: u64, rate: impl Fn(f64) -> f64) -> Option<f64> {
        let t0 = Instant::now();
        let acked = [quiche::cc::AckedPacket {
            pkt_num: 1,
            size: 1200,
            time_sent: t0,
        }];
        for k in 1..=ms / 5 {
            let t = k as f64 * 0.005;
            let bytes = (rate(t) * 0.005) as usize;
            let ack = search_ack(&acked, bytes);
            let now = t0 + Duration::from_secs_f64(t);
            if let Verdict::ExitWith(_) = s.on_ack(&ack, now, 100_000, false) {
                return Some(t);
            }
        }
        None
    }

    #[test]
    fn search_stays_while_the_delivery_rate_doubles_and_leaves_when_it_flattens() {
        let doubling = |t: f64| 1e5 * 2f64.powf(t / 0.1);
        assert_eq!(search_run(&mut Search::default(), 1500, doubling), None);
        // Flat from 0.8 s: the window of 3.5 RTTs sees it within a few RTTs.
        let capped = |t: f64| doubling(t.min(0.8));
        let exit = search_run(&mut Search::default(), 2000, capped).expect("no exit");
        assert!(exit > 0.8 && exit < 1.2, "{exit}");
    }

    #[test]
    fn search_starts_over_when_app_limited_or_idle() {
        let mut s = Search::default();
        search_run(&mut s, 300, |_| 1e6);
        assert!(s.curr.is_some());
        let ack_time = Instant::now() + Duration::from_secs(60);
        let acked = [quiche::cc::AckedPacket {
            pkt_num: 2,
            size: 1200,
            time_sent: ack_time,
        }];
        let ack = search_ack(&acked, 1200);
        assert_eq!(s.on_ack(&ack, ack_time, 100_000, true), Verdict::Continue);
        assert_eq!((s.curr, s.resets), (None, 1));
        // Started again, then a minute with no ACK: more than the ring.
        assert_eq!(s.on_ack(&ack, ack_time, 100_000, false), Verdict::Continue);
        assert!(s.curr.is_some());
        let later = ack_time + Duration::from_secs(60);
        assert_eq!(s.on_ack(&ack, later, 100_000, false), Verdict::Continue);
        assert_eq!((s.curr, s.resets), (None, 2));
    }

    #[test]
    fn search_in_newreno_sets_ssthresh_at_the_window_and_records_a_plateau() {
        let mut d = Driver::new(NewReno::new(&config()).with_slow_start(SlowStartKind::Search));
        // A bottleneck of 40 packets per 100 ms round: the window doubles,
        // what is delivered per round does not beyond 40.
        d.rtt = Duration::from_millis(100);
        for _ in 0..40 {
            let room = d.cc.congestion_window() / MSS;
            let n = room.saturating_sub(d.in_flight.len());
            d.send(n, MSS, false);
            for _ in 0..40.min(d.in_flight.len()) {
                d.ack(1, false);
            }
            d.now += Duration::from_millis(100);
            if d.cc.slow_start_exit().is_some() {
                break;
            }
        }
        let (reason, cwnd) = d.cc.slow_start_exit().expect("SEARCH never left");
        assert_eq!(reason, ExitReason::BandwidthPlateau);
        assert_eq!(d.cc.ssthresh(), Some(cwnd));
        assert_eq!(d.cc.state_name(), "congestion_avoidance");
    }
}
