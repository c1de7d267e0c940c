//! When and why a sender's first slow start ended, and what it overshot,
//! from its congestion states, metrics and losses.
//!
//! **Slow start** is a state named `slow_start`, `startup` or
//! `bbr_startup` (any case, `_`/`-`/space ignored: quiche's, our plugins'
//! and most implementations' names). **Conservative slow start**
//! (`conservative_slow_start`, HyStart++'s CSS, RFC 9406) counts as having
//! left slow start (the RFC's "exit slow start and enter CSS"), but not as
//! the end of the overshoot: CSS still grows the window. A return from CSS
//! to slow start (a spurious rise) undoes the exit. `application_limited`
//! changes nothing. Any other state ends both. Only the first slow start
//! is reported, not one after a timeout or idle.
//!
//! - `exit_s`: the time the sender left slow start, seconds from the
//!   trace's start; `end_s` the time it left CSS too (= `exit_s` without
//!   CSS). Both null when the trace ended still in slow start.
//! - `exit_cwnd_bytes`: the window then: the controller's own
//!   `ss_exit_cwnd` metric when it logs one, else the largest window
//!   logged in slow start (the window only grows there, and the logged
//!   value after a loss is already cut).
//! - `exit_reason`: `loss`, `delay_increase` (an RTT rule: HyStart++,
//!   Vegas's gamma), `bandwidth_plateau` (BBR's full pipe, SEARCH's
//!   delivery rate), `threshold` (the window reached ssthresh with no loss
//!   near) or `other`; `none` before an exit. The controller's own
//!   `ss_exit_reason` metric decides when logged (1 loss, 2 delay
//!   increase, 3 bandwidth plateau), as does bbr3's `bbr_startup_exit` (1
//!   plateau, 2 loss); `reason_source` says `controller`. Otherwise it is
//!   `inferred` from the state entered: CSS is a delay increase,
//!   `recovery` a loss, a `drain` or `congestion_avoidance` a loss when one
//!   was declared in the smoothed RTT before the exit, else a plateau
//!   (drain) or the threshold.
//! - `lost_packets`: the overshoot's losses: packets sent before `end_s`
//!   and declared lost at any time (by send time when the trace logs
//!   `packet_sent`, else losses declared up to one smoothed RTT after
//!   `end_s`).
//! - `peak_queue_ms`: the largest `latest_rtt` sample taken before one
//!   smoothed RTT after `end_s` (the ACKs of what slow start sent), less
//!   the trace's minimum RTT: the queue slow start built, as the sender saw
//!   it.

use serde::Serialize;

/// How a trace's first slow start ended (see the module doc).
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct SlowStartSummary {
    /// Left slow start, s from the trace's start; null if it never did.
    pub exit_s: Option<f64>,
    /// Left conservative slow start too, s; null if it never did.
    pub end_s: Option<f64>,
    /// Window when it left slow start, bytes.
    pub exit_cwnd_bytes: Option<f64>,
    /// `loss`, `delay_increase`, `bandwidth_plateau`, `threshold`,
    /// `other` or `none`.
    pub exit_reason: String,
    /// `controller` (its own metric) or `inferred` (from the states).
    pub reason_source: String,
    /// The state it went to from slow start.
    pub next_state: Option<String>,
    /// Seconds spent in conservative slow start.
    pub css_s: f64,
    /// Packets sent before the end of slow start and lost.
    pub lost_packets: u64,
    /// Peak queueing delay seen in slow start's RTT samples, ms.
    pub peak_queue_ms: Option<f64>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Phase {
    /// No state logged yet.
    #[default]
    Unknown,
    SlowStart,
    Css,
    Ended,
}

/// What a state name means for slow start.
#[derive(Debug, PartialEq, Eq)]
enum StateClass {
    SlowStart,
    Css,
    Neutral,
    Other,
}

fn classify(state: &str) -> StateClass {
    let norm: String = state
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    match norm.as_str() {
        "slowstart" | "startup" | "bbrstartup" => StateClass::SlowStart,
        "conservativeslowstart" => StateClass::Css,
        "applicationlimited" | "applimited" => StateClass::Neutral,
        _ => StateClass::Other,
    }
}

/// Follows one trace's events (fed by the analysis).
#[derive(Clone, Debug, Default)]
pub struct SlowStartTracker {
    phase: Phase,
    exit_s: Option<f64>,
    end_s: Option<f64>,
    next_state: Option<String>,
    css_since: Option<f64>,
    css_s: f64,
    max_cwnd: Option<f64>,
    exit_cwnd: Option<f64>,
    srtt_ms: Option<f64>,
    srtt_at_end_s: f64,
    max_latest_rtt: Option<f64>,
    controller_reason: Option<f64>,
    controller_cwnd: Option<f64>,
    bbr_startup_exit: Option<f64>,
    last_loss_s: Option<f64>,
    loss_before_exit: bool,
    lost_by_event: u64,
    lost_by_counter: u64,
}

impl SlowStartTracker {
    fn active(&self) -> bool {
        matches!(self.phase, Phase::Unknown | Phase::SlowStart | Phase::Css)
    }

    /// Whether time `t` (a declaration or a sample) still belongs to slow
    /// start: before its end, or within one smoothed RTT after it.
    fn within_end(&self, t: f64) -> bool {
        match self.end_s {
            None => true,
            Some(end) => t <= end + self.srtt_at_end_s,
        }
    }

    /// A congestion state was entered at `t`.
    pub fn on_state(&mut self, t: f64, state: &str) {
        let class = classify(state);
        match (self.phase, class) {
            (Phase::Ended, _) | (_, StateClass::Neutral) => {}
            (Phase::Unknown | Phase::SlowStart, StateClass::SlowStart) => {
                self.phase = Phase::SlowStart;
            }
            (Phase::Unknown, _) => {
                // The first state logged is not slow start: nothing to
                // report about one.
                self.phase = Phase::Ended;
            }
            (Phase::SlowStart, StateClass::Css) => {
                self.phase = Phase::Css;
                self.mark_exit(t, state);
                self.css_since = Some(t);
            }
            (Phase::SlowStart, StateClass::Other) => {
                self.mark_exit(t, state);
                self.mark_end(t);
            }
            (Phase::Css, StateClass::Css) => {}
            (Phase::Css, StateClass::SlowStart) => {
                // The rise was spurious: slow start resumes.
                self.close_css(t);
                self.phase = Phase::SlowStart;
                self.exit_s = None;
                self.exit_cwnd = None;
                self.next_state = None;
            }
            (Phase::Css, StateClass::Other) => {
                self.close_css(t);
                self.mark_end(t);
            }
        }
    }

    fn mark_exit(&mut self, t: f64, state: &str) {
        self.exit_s = Some(t);
        self.exit_cwnd = self.max_cwnd;
        self.next_state = Some(state.to_string());
        self.loss_before_exit = match (self.last_loss_s, self.srtt_ms) {
            (Some(l), Some(srtt)) => t - l <= srtt / 1000.0,
            (Some(l), None) => t - l <= 0.0,
            _ => false,
        };
    }

    fn close_css(&mut self, t: f64) {
        if let Some(since) = self.css_since.take() {
            self.css_s += (t - since).max(0.0);
        }
    }

    fn mark_end(&mut self, t: f64) {
        self.phase = Phase::Ended;
        self.end_s = Some(t);
        self.srtt_at_end_s = self.srtt_ms.unwrap_or(0.0) / 1000.0;
    }

    /// A metrics update at `t`: window, RTTs (ms) and the controller's
    /// own fields.
    pub fn on_metrics(
        &mut self,
        t: f64,
        cwnd: Option<f64>,
        latest_rtt_ms: Option<f64>,
        smoothed_rtt_ms: Option<f64>,
        extra: &[(String, f64)],
    ) {
        if let (Some(c), Phase::Unknown | Phase::SlowStart) = (cwnd, self.phase) {
            self.max_cwnd = Some(self.max_cwnd.map_or(c, |m| m.max(c)));
        }
        if let Some(s) = smoothed_rtt_ms.filter(|s| *s > 0.0) {
            if self.active() {
                self.srtt_ms = Some(s);
            }
        }
        if let Some(r) = latest_rtt_ms.filter(|r| *r > 0.0) {
            if self.within_end(t) {
                self.max_latest_rtt = Some(self.max_latest_rtt.map_or(r, |m| m.max(r)));
            }
        }
        for (k, v) in extra {
            match k.as_str() {
                "ss_exit_reason" if *v > 0.0 => self.controller_reason = Some(*v),
                "ss_exit_cwnd" if *v > 0.0 => self.controller_cwnd = Some(*v),
                "bbr_startup_exit" if *v > 0.0 => self.bbr_startup_exit = Some(*v),
                _ => {}
            }
        }
    }

    /// A packet declared lost at `t`, sent at `sent_s` when known.
    pub fn on_lost_packet(&mut self, t: f64, sent_s: Option<f64>) {
        if self.active() {
            self.last_loss_s = Some(t);
        }
        let in_slow_start = match (self.end_s, sent_s) {
            (None, _) => true,
            (Some(end), Some(s)) => s <= end,
            (Some(_), None) => self.within_end(t),
        };
        if in_slow_start {
            self.lost_by_event += 1;
        }
    }

    /// `n` packets counted lost at `t` by a running counter (no
    /// `packet_lost` events).
    pub fn on_lost_count(&mut self, t: f64, n: u64) {
        if self.active() {
            self.last_loss_s = Some(t);
        }
        if self.within_end(t) {
            self.lost_by_counter += n;
        }
    }

    /// The summary at the trace's end `t_end`; `by_events` when the
    /// trace's losses come from `packet_lost` events; `min_rtt_ms` the
    /// trace's minimum. None when no slow start was logged.
    pub fn summary(
        &self,
        t_end: f64,
        by_events: bool,
        min_rtt_ms: Option<f64>,
    ) -> Option<SlowStartSummary> {
        if self.phase == Phase::Unknown || (self.phase == Phase::Ended && self.exit_s.is_none()) {
            return None;
        }
        let css_open = self.css_since.map_or(0.0, |s| (t_end - s).max(0.0));
        let (reason, source) = match (self.exit_s, self.controller_reason, self.bbr_startup_exit) {
            (None, _, _) => ("none", "inferred"),
            (Some(_), Some(code), _) => (
                match code.round() as i64 {
                    1 => "loss",
                    2 => "delay_increase",
                    3 => "bandwidth_plateau",
                    _ => "other",
                },
                "controller",
            ),
            (Some(_), None, Some(code)) => (
                if code.round() as i64 == 2 {
                    "loss"
                } else {
                    "bandwidth_plateau"
                },
                "controller",
            ),
            (Some(_), None, None) => {
                let next = self.next_state.as_deref().unwrap_or("");
                let norm = next.to_ascii_lowercase();
                let r = if classify(next) == StateClass::Css {
                    "delay_increase"
                } else if norm.contains("recovery") || self.loss_before_exit {
                    "loss"
                } else if norm.contains("drain") {
                    "bandwidth_plateau"
                } else if norm.contains("congestion_avoidance") {
                    "threshold"
                } else {
                    "other"
                };
                (r, "inferred")
            }
        };
        Some(SlowStartSummary {
            exit_s: self.exit_s,
            end_s: self.end_s,
            exit_cwnd_bytes: self
                .exit_s
                .and(self.controller_cwnd.or(self.exit_cwnd).or(self.max_cwnd)),
            exit_reason: reason.into(),
            reason_source: source.into(),
            next_state: self.next_state.clone(),
            css_s: self.css_s + css_open,
            lost_packets: if by_events {
                self.lost_by_event
            } else {
                self.lost_by_counter
            },
            peak_queue_ms: match (self.max_latest_rtt, min_rtt_ms) {
                (Some(peak), Some(min)) => Some((peak - min).max(0.0)),
                _ => None,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics(t: &mut SlowStartTracker, at: f64, cwnd: f64, rtt: f64) {
        t.on_metrics(at, Some(cwnd), Some(rtt), Some(rtt), &[]);
    }

    #[test]
    fn a_loss_exit_is_inferred_from_recovery_with_the_peak_window() {
        let mut t = SlowStartTracker::default();
        t.on_state(0.0, "slow_start");
        metrics(&mut t, 0.1, 20_000.0, 40.0);
        metrics(&mut t, 0.2, 80_000.0, 60.0);
        t.on_lost_packet(0.25, Some(0.19));
        // The window logged after the cut comes before the state.
        metrics(&mut t, 0.25, 40_000.0, 70.0);
        t.on_state(0.25, "recovery");
        // Lost later, sent in slow start: overshoot; sent after: not.
        t.on_lost_packet(0.27, Some(0.24));
        t.on_lost_packet(0.5, Some(0.3));
        // An RTT sample within one smoothed RTT of the end counts.
        metrics(&mut t, 0.3, 40_000.0, 90.0);
        metrics(&mut t, 0.4, 40_000.0, 120.0);
        let s = t.summary(1.0, true, Some(40.0)).unwrap();
        assert_eq!(s.exit_s, Some(0.25));
        assert_eq!(s.end_s, Some(0.25));
        assert_eq!(s.exit_cwnd_bytes, Some(80_000.0));
        assert_eq!(
            (s.exit_reason.as_str(), s.reason_source.as_str()),
            ("loss", "inferred")
        );
        assert_eq!(s.lost_packets, 2);
        assert_eq!(s.peak_queue_ms, Some(50.0));
    }

    #[test]
    fn css_is_an_exit_but_its_losses_are_overshoot() {
        let mut t = SlowStartTracker::default();
        t.on_state(0.0, "slow_start");
        metrics(&mut t, 0.1, 50_000.0, 40.0);
        t.on_state(0.2, "conservative_slow_start");
        metrics(&mut t, 0.3, 60_000.0, 50.0);
        t.on_lost_packet(0.4, Some(0.35));
        t.on_state(0.4, "recovery");
        let s = t.summary(1.0, true, Some(40.0)).unwrap();
        assert_eq!(s.exit_s, Some(0.2));
        assert_eq!(s.end_s, Some(0.4));
        assert_eq!(s.exit_cwnd_bytes, Some(50_000.0));
        assert_eq!(s.exit_reason, "delay_increase");
        assert!((s.css_s - 0.2).abs() < 1e-9);
        assert_eq!(s.lost_packets, 1);
    }

    #[test]
    fn a_spurious_css_undoes_the_exit_and_the_controller_names_the_reason() {
        let mut t = SlowStartTracker::default();
        t.on_state(0.0, "slow_start");
        t.on_state(0.2, "conservative_slow_start");
        t.on_state(0.3, "slow_start");
        assert_eq!(t.summary(0.35, true, None).unwrap().exit_s, None);
        t.on_metrics(
            0.4,
            Some(70_000.0),
            None,
            None,
            &[
                ("ss_exit_reason".into(), 3.0),
                ("ss_exit_cwnd".into(), 64_000.0),
            ],
        );
        t.on_state(0.4, "congestion_avoidance");
        let s = t.summary(1.0, true, None).unwrap();
        assert_eq!(s.exit_s, Some(0.4));
        assert_eq!(s.exit_reason, "bandwidth_plateau");
        assert_eq!(s.reason_source, "controller");
        assert_eq!(s.exit_cwnd_bytes, Some(64_000.0));
    }

    #[test]
    fn bbr_names_and_no_exit() {
        let mut t = SlowStartTracker::default();
        t.on_state(0.0, "bbr_startup");
        let s = t.summary(1.0, true, None).unwrap();
        assert_eq!((s.exit_s, s.exit_reason.as_str()), (None, "none"));
        t.on_state(0.5, "bbr_drain");
        let s = t.summary(1.0, true, None).unwrap();
        assert_eq!(s.exit_reason, "bandwidth_plateau");
        // A trace whose first state is not slow start reports nothing.
        let mut u = SlowStartTracker::default();
        u.on_state(0.0, "congestion_avoidance");
        assert_eq!(u.summary(1.0, true, None), None);
        assert_eq!(SlowStartTracker::default().summary(1.0, true, None), None);
    }

    #[test]
    fn counted_losses_belong_to_slow_start_until_one_rtt_after_its_end() {
        let mut t = SlowStartTracker::default();
        t.on_state(0.0, "slow_start");
        metrics(&mut t, 0.1, 50_000.0, 100.0);
        t.on_lost_count(0.2, 3);
        t.on_state(0.2, "recovery");
        // Declared within one smoothed RTT (100 ms) of the end: overshoot.
        t.on_lost_count(0.25, 2);
        t.on_lost_count(0.35, 4);
        let s = t.summary(1.0, false, Some(90.0)).unwrap();
        assert_eq!(s.lost_packets, 5);
        // The same trace read by events would count those instead.
        assert_eq!(t.summary(1.0, true, Some(90.0)).unwrap().lost_packets, 0);
    }
}
