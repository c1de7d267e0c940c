//! Algorithm specs (`name` or `name:key=value,...`) to controllers, and the
//! registry's description of itself.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use quiche::cc::CongestionControllerFactory;
use quiche::CongestionControlAlgorithm;
use serde::Serialize;

use crate::binomial::BinomialConfig;
use crate::br_tcp::BrTcpConfig;
use crate::dcm::{DcmConfig, Variant};
use crate::ewphcc::EwphccConfig;
use crate::exp::ExpConfig;
use crate::newreno::NewRenoConfig;
use crate::smcc::SmccConfig;
use crate::vegas::VegasConfig;
use crate::westwood::WestwoodConfig;

/// How a parameter's value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ParamKind {
    /// A plain number.
    Number,
    /// A rate with tc units (`40mbit`, `500kbit`, `1gbit`; a bare number is
    /// bit/s), stored in bit/s.
    Rate,
    /// A file name (optional; min, max and default are unused).
    File,
    /// One of these names; stored as its index (which a spec may also
    /// give), so min is 0, max the last index and the default an index.
    Choice(&'static [&'static str]),
}

/// One tunable of an algorithm.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ParamInfo {
    /// Key in the spec, the paper's symbol where there is one.
    pub name: &'static str,
    /// Unit of the value.
    pub unit: &'static str,
    /// How the value is written.
    pub kind: ParamKind,
    /// Value when the spec does not set it; `None` means required.
    pub default: Option<f64>,
    /// Smallest allowed value.
    pub min: f64,
    /// Largest allowed value.
    pub max: f64,
    /// What it does.
    pub help: &'static str,
}

/// Where an algorithm is implemented.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// quiche's own implementation.
    Builtin,
    /// A plugin in this crate.
    Plugin,
}

/// One algorithm as the registry describes it.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct AlgorithmInfo {
    /// Name in specs.
    pub name: &'static str,
    /// One-line summary.
    pub summary: &'static str,
    /// quiche built-in or plugin.
    pub origin: Origin,
    /// Tunables.
    pub params: &'static [ParamInfo],
}

impl AlgorithmInfo {
    /// A spec that parses: the bare name, plus an example value for each
    /// required parameter.
    pub fn example_spec(&self) -> String {
        let required: Vec<String> = self
            .params
            .iter()
            .filter(|p| p.default.is_none())
            .map(|p| match p.kind {
                ParamKind::Rate => format!("{}=40mbit", p.name),
                ParamKind::Number => format!("{}={}", p.name, p.min),
                ParamKind::File => format!("{}=FILE", p.name),
                ParamKind::Choice(names) => format!("{}={}", p.name, names[0]),
            })
            .collect();
        if required.is_empty() {
            self.name.to_string()
        } else {
            format!("{}:{}", self.name, required.join(","))
        }
    }

    /// Specs with each parameter at its minimum and at its maximum, the
    /// others as in [`example_spec`](Self::example_spec). Some may be
    /// refused as inconsistent (e.g. Vegas alpha above beta).
    pub fn extreme_specs(&self) -> Vec<String> {
        let base = self.example_spec();
        let mut specs = vec![base.clone()];
        for p in self.params.iter().filter(|p| p.kind != ParamKind::File) {
            for v in [p.min, p.max] {
                let others: Vec<&str> = base
                    .split_once(':')
                    .map(|(_, r)| {
                        r.split(',')
                            .filter(|kv| !kv.starts_with(&format!("{}=", p.name)))
                            .collect()
                    })
                    .unwrap_or_default();
                let mut items: Vec<String> = others.iter().map(|s| s.to_string()).collect();
                items.push(format!("{}={v}", p.name));
                specs.push(format!("{}:{}", self.name, items.join(",")));
            }
        }
        specs
    }
}

type Build = fn(&Params) -> Controller;

struct Entry {
    info: AlgorithmInfo,
    build: Build,
}

const VEGAS_PARAMS: &[ParamInfo] = &[
    ParamInfo {
        name: "alpha",
        unit: "packets",
        kind: ParamKind::Number,
        default: Some(crate::vegas::VegasConfig::DEFAULT.alpha),
        min: 0.0,
        max: 1000.0,
        help: "grow the window by one packet per RTT while fewer packets than this are queued",
    },
    ParamInfo {
        name: "beta",
        unit: "packets",
        kind: ParamKind::Number,
        default: Some(crate::vegas::VegasConfig::DEFAULT.beta),
        min: 0.0,
        max: 1000.0,
        help: "shrink the window by one packet per RTT while more packets than this are queued",
    },
    ParamInfo {
        name: "gamma",
        unit: "packets",
        kind: ParamKind::Number,
        default: Some(crate::vegas::VegasConfig::DEFAULT.gamma),
        min: 0.0,
        max: 1000.0,
        help: "leave slow start when more packets than this are queued",
    },
    ParamInfo {
        name: "linux_slow_start",
        unit: "0 or 1",
        kind: ParamKind::Number,
        default: Some(0.0),
        min: 0.0,
        max: 1.0,
        help: "0: Brakmo and Peterson's slow start as ns-2 runs it (growth every other RTT; gamma tested at the end of each round that did not grow, on how far its RTT rose; cwnd cut by 1/8 on leaving, to no more than rate x baseRTT); 1: Linux tcp_vegas.c's (growth every RTT, gamma tested on the round's minimum RTT)",
    },
    LOSS_RESPONSE,
    ECN,
];

// The choices' defaults in these tables are code 0 (Brakmo and Peterson's
// slow start, NewReno's halving, ECT(0), Linux's Westwood filter, standard
// slow start, ECN off); the configs' own defaults must be the same, or the
// build fails here.
const _: () = {
    use crate::estimators::WestwoodFilterKind;
    use crate::vegas::{LossResponse, SlowStart};
    assert!(matches!(VegasConfig::DEFAULT.slow_start, SlowStart::Paper));
    assert!(matches!(
        VegasConfig::DEFAULT.loss_response,
        LossResponse::Half
    ));
    assert!(matches!(
        SmccConfig::DEFAULT.loss_response,
        LossResponse::Half
    ));
    assert!(!crate::dctcp::DctcpConfig::DEFAULT.ect1);
    assert!(matches!(
        WestwoodConfig::DEFAULT.filter,
        WestwoodFilterKind::Linux
    ));
    assert!(crate::prague::PragueConfig::DEFAULT.g == crate::dctcp::DctcpConfig::DEFAULT.g);
};

/// `loss_response=` of Vegas and of SMCC (Vegas underneath).
const LOSS_RESPONSE: ParamInfo = ParamInfo {
    name: "loss_response",
    unit: "half or ns2",
    kind: ParamKind::Choice(crate::vegas::LossResponse::NAMES),
    default: Some(0.0),
    min: 0.0,
    max: 1.0,
    help: "half: NewReno's (and Linux's) halving on a loss, the minimum window on persistent congestion; ns2: ns-2 Vegas's (tcp-vegas.cc): a quarter off in whole packets (win -= win >> 2; 2 packets at 3 or less), and on persistent congestion (ns-2's timeout) ssthresh = half the window, cwnd = 2 packets",
};

fn loss_response(p: &Params) -> crate::vegas::LossResponse {
    crate::vegas::LossResponse::from_code(p.get("loss_response")).unwrap_or_default()
}

/// `ecn=` of every plugin without an ECN response of its own
/// ([`crate::ecn`]): off, or RFC 3168's classic response.
pub const ECN: ParamInfo = ParamInfo {
    name: "ecn",
    unit: "off or classic",
    kind: ParamKind::Choice(crate::ecn::ECN_MODES),
    default: Some(0.0),
    min: 0.0,
    max: 1.0,
    help: "off: no ECN (packets Not-ECT); classic: send ECT(0) and treat CE marks as RFC 3168 and RFC 9002 do, as a congestion event answered with the algorithm's own loss response, at most once per recovery period (one shared with losses), nothing retransmitted",
};

const BR_TCP_PARAMS: &[ParamInfo] = &with_slow_start::<2, 13>([
    ParamInfo {
        name: "reserved",
        unit: "bit/s",
        kind: ParamKind::Rate,
        default: None,
        min: 1.0,
        max: 1e13,
        help: "bandwidth reserved for the flow; sets ssthresh = reserved x min RTT after a loss",
    },
    ECN,
]);

const fn number(
    name: &'static str,
    unit: &'static str,
    default: f64,
    min: f64,
    max: f64,
    help: &'static str,
) -> ParamInfo {
    ParamInfo {
        name,
        unit,
        kind: ParamKind::Number,
        default: Some(default),
        min,
        max,
        help,
    }
}

const EXP_PARAMS: &[ParamInfo] = &with_slow_start::<7, 18>([
    number("alpha", "packets", crate::exp::ExpConfig::DEFAULT.alpha, 1e-6, 1e6, "increase constant: (alpha / e^W)^k packets per RTT"),
    number("beta", "1", crate::exp::ExpConfig::DEFAULT.beta, 1e-6, 1e6, "decrease constant: (beta e^W)^l on a loss"),
    number("k", "1", crate::exp::ExpConfig::DEFAULT.k, 0.0, 10.0, "order of the increase rule"),
    number("l", "1", crate::exp::ExpConfig::DEFAULT.l, 0.0, 10.0, "order of the decrease rule"),
    number("literal", "0 or 1", if crate::exp::ExpConfig::DEFAULT.literal { 1.0 } else { 0.0 }, 0.0, 1.0, "1: the paper's equations with W in packets (collapses); 0: normalised to the window at the last loss"),
    number("iw", "packets", crate::exp::ExpConfig::DEFAULT.iw as f64, 2.0, 1000.0, "initial window; 10 is ours (quiche's default); the paper's ns-2 default of 1 packet is QUIC's minimum, 2"),
    ECN,
]);

const EWPHCC_PARAMS: &[ParamInfo] = &with_slow_start::<7, 18>([
    number(
        "phi",
        "1",
        crate::ewphcc::EwphccConfig::DEFAULT.phi,
        0.0,
        1.0,
        "weight of the old value in the delay and loss probability averages (0.8: the author's code)",
    ),
    number(
        "alpha",
        "packets",
        crate::ewphcc::EwphccConfig::DEFAULT.alpha,
        0.01,
        1000.0,
        "target growth per RTT (F6's alpha_i, also W(L_tar))",
    ),
    number(
        "decrease",
        "packets",
        crate::ewphcc::EwphccConfig::DEFAULT.decrease,
        0.0,
        1000.0,
        "critical-phase decrease per RTT (the report's v_alpha_); 0: the same as alpha",
    ),
    number(
        "beta",
        "packets",
        crate::ewphcc::EwphccConfig::DEFAULT.beta,
        0.0,
        1000.0,
        "backlog above which the critical phase begins",
    ),
    number(
        "gamma",
        "packets",
        crate::ewphcc::EwphccConfig::DEFAULT.gamma,
        0.0,
        1000.0,
        "backlog below which no queue counts as measured (normal phase)",
    ),
    number(
        "loss_factor",
        "1",
        crate::ewphcc::EwphccConfig::DEFAULT.loss_factor,
        0.05,
        1.0,
        "fraction of the window kept on a loss (0.75: ns-2 Vegas, as the report's simulations ran; 0.5: the report's text)",
    ),
    ECN,
]);

/// `filter=` of DCM+ and DCM: the bandwidth filter, with the paper's as
/// default (codes of `estimators::WestwoodFilterKind`).
const fn dcm_params(default_filter: f64) -> [ParamInfo; 13] {
    with_slow_start::<2, 13>([
        number(
        "filter",
        "0, 1 or 2",
        default_filter,
        0.0,
        2.0,
        "bandwidth filter: 0 Linux tcp_westwood.c (Westwood+); 1 ns-3 Westwood, per-ACK Tustin (DCM's paper); 2 ns-3 Westwood+, per-RTT Tustin (DCM+'s paper)",
        ),
    ECN,
    ])
}

const DCM_PLUS_PARAMS: &[ParamInfo] = &dcm_params(2.0);
/// Westwood+ takes the same filters, Linux's by default (`filter=1` is
/// ns-3's original Westwood, for the DCM+ paper's Westwood runs).
const WESTWOOD_PARAMS: &[ParamInfo] = &dcm_params(0.0);
const DCM_PARAMS: &[ParamInfo] = &dcm_params(1.0);

fn dcm(variant: Variant, p: &Params) -> Controller {
    let filter = crate::estimators::WestwoodFilterKind::from_code(p.get("filter"))
        .unwrap_or_else(|| variant.paper_filter());
    Controller::Plugin(Arc::new(DcmConfig {
        variant,
        filter,
        slow_start: slow_start(p),
    }))
}

const HYSTART: ParamInfo = number(
    "hystart",
    "0 or 1",
    1.0,
    0.0,
    1.0,
    "1: quiche's HyStart++ ends slow start on RTT increase (quiche's default); 0: slow start ends at the first loss",
);

const HYSTART_PARAMS: &[ParamInfo] = &[HYSTART];

const CUBIC_PARAMS: &[ParamInfo] = &[
    HYSTART,
    number(
        "beta",
        "1",
        CubicParams::QUICHE_DEFAULT.beta,
        0.1,
        0.95,
        "multiplicative decrease: cwnd = beta x cwnd on a congestion event (RFC 9438, Section 4.6); fast convergence's W_max = (1 + beta) / 2 x cwnd (Section 4.7) and the Reno-friendly alpha_cubic = 3 (1 - beta) / (1 + beta) (Section 4.3) follow; 0.7: RFC 9438 and quiche",
    ),
    number(
        "c",
        "1",
        CubicParams::QUICHE_DEFAULT.c,
        0.01,
        10.0,
        "growth constant C of W_cubic(t) = C (t - K)^3 + W_max, window in packets, t in seconds (RFC 9438, Section 4.2); 0.4: RFC 9438 and quiche",
    ),
];

/// A built-in with `hystart=` applied and no other settings.
fn with_hystart(algo: CongestionControlAlgorithm, p: &Params) -> Controller {
    Controller::Builtin(
        algo,
        BuiltinOptions {
            hystart: p.get("hystart") >= 0.5,
            cubic: None,
        },
    )
}

const SMCC_PARAMS: &[ParamInfo] = &[
    number(
        "swarm",
        "particles",
        crate::smcc::SmccConfig::DEFAULT.swarm as f64,
        1.0,
        100.0,
        "particles in the swarm",
    ),
    number(
        "iterations",
        "1",
        crate::smcc::SmccConfig::DEFAULT.iterations as f64,
        1.0,
        1000.0,
        "swarm iterations before the best (alpha, beta) is kept",
    ),
    number(
        "rounds",
        "RTTs",
        crate::smcc::SmccConfig::DEFAULT.rounds as f64,
        1.0,
        100.0,
        "round trips each particle is measured over",
    ),
    number(
        "max",
        "packets",
        crate::smcc::SmccConfig::DEFAULT.max,
        2.0,
        1000.0,
        "upper bound of alpha and beta",
    ),
    number(
        "delta",
        "1",
        crate::smcc::SmccConfig::DEFAULT.delta,
        0.0,
        100.0,
        "fitness weight of queueing delay relative to the base RTT",
    ),
    number(
        "lambda",
        "1",
        crate::smcc::SmccConfig::DEFAULT.lambda,
        0.0,
        1000.0,
        "fitness weight of the loss fraction",
    ),
    number("seed", "1", crate::smcc::SmccConfig::DEFAULT.seed as f64, 0.0, 1e15, "seed of the swarm"),
    number(
        "flow_seed",
        "0 or 1",
        if crate::smcc::SmccConfig::DEFAULT.flow_seed { 1.0 } else { 0.0 },
        0.0,
        1.0,
        "1: mix the seed with the RTT samples the flow took before tuning, so flows built from one spec explore differently (the same in every simulator run of a scenario and seed); 0: the seed alone (flows with one seed try the same particles together)",
    ),
    number(
        "alpha_min",
        "packets",
        crate::smcc::SmccConfig::DEFAULT.alpha_min,
        0.0,
        100.0,
        "lower bound of alpha in the search (beta at least alpha_min + 0.5); the paper sets none, and its tables imply 0.18 and 0.034 packets per flow; 1 is the alpha of the ns-2 Vegas it is compared with; 0 would stop the window from growing",
    ),
    LOSS_RESPONSE,
    ParamInfo {
        name: "table",
        unit: "TOML file from `cclab tune smcc`",
        kind: ParamKind::File,
        default: Some(0.0),
        min: 0.0,
        max: 0.0,
        help: "offline mode: take alpha and beta from this table, by the base RTT and rate measured at the end of slow start, instead of tuning online",
    },
    ECN,
];

/// The binomial parameters, with a preset's constants as defaults.
const fn binomial_params(preset: BinomialConfig) -> [ParamInfo; 16] {
    with_slow_start::<5, 16>([
        number(
            "k",
            "1",
            preset.k,
            -1.0,
            2.0,
            "increase exponent: alpha / w^k packets per RTT",
        ),
        number(
            "l",
            "1",
            preset.l,
            0.0,
            2.0,
            "decrease exponent: beta w^l packets on a loss",
        ),
        number(
            "alpha",
            "packets",
            preset.alpha,
            1e-6,
            1000.0,
            "increase constant",
        ),
        number("beta", "1", preset.beta, 1e-6, 1000.0, "decrease constant"),
        ECN,
    ])
}

const AIMD_PARAMS: &[ParamInfo] = &binomial_params(BinomialConfig::AIMD);
const IIAD_PARAMS: &[ParamInfo] = &binomial_params(BinomialConfig::IIAD);
const SQRT_PARAMS: &[ParamInfo] = &binomial_params(BinomialConfig::SQRT);
const MIMD_PARAMS: &[ParamInfo] = &binomial_params(BinomialConfig::MIMD);

fn binomial(name: &'static str, p: &Params) -> Controller {
    Controller::Plugin(Arc::new(BinomialConfig {
        slow_start: slow_start(p),
        name,
        k: p.get("k"),
        l: p.get("l"),
        alpha: p.get("alpha"),
        beta: p.get("beta"),
    }))
}

/// DCTCP's and Prague's EWMA gain g (RFC 8257 and Linux: 1/16).
const G: ParamInfo = number(
    "g",
    "1",
    crate::dctcp::DctcpConfig::DEFAULT.g,
    1.0 / 1024.0,
    1.0,
    "gain of alpha = (1 - g) alpha + g F, once per observation window (about an RTT); 1/16: RFC 8257 and Linux (dctcp_shift_g = 4, PRAGUE_SHIFT_G = 4)",
);

const DCTCP_PARAMS: &[ParamInfo] = &with_slow_start::<3, 14>([
    G,
    number(
        "alpha_init",
        "1",
        crate::dctcp::DctcpConfig::DEFAULT.alpha_init,
        0.0,
        1.0,
        "alpha before the first window ends; 1: Linux (dctcp_alpha_on_init = 1024, i.e. 1), so the first mark halves the window",
    ),
    ParamInfo {
        name: "ect",
        unit: "ect0 or ect1",
        kind: ParamKind::Choice(&["ect0", "ect1"]),
        default: Some(0.0),
        min: 0.0,
        max: 1.0,
        help: "codepoint sent: ect0 as RFC 8257 and Linux by default; ect1 as Linux's dctcp_ect=1, to be classed L4S by a DualQ AQM",
    },
]);

const PRAGUE_PARAMS: &[ParamInfo] = &[
    G,
    number(
        "vrtt",
        "ms",
        crate::prague::PragueConfig::DEFAULT.vrtt.as_secs_f64() * 1e3,
        0.0,
        1000.0,
        "virtual RTT: below it the additive increase is scaled by (sRTT / vrtt)^2 per RTT, so the rate grows as a flow's at vrtt would, and CE reductions and alpha updates come at most once per vrtt; 25: the Prague draft and Linux (prague_rtt_target); 0: no RTT independence",
    ),
    number(
        "transition",
        "rounds",
        crate::prague::PragueConfig::DEFAULT.transition as f64,
        0.0,
        1e6,
        "rounds after slow start before RTT independence applies; 0: at once (ours); Linux's prague_rtt_transition is 500",
    ),
];

/// BBRv3's constants (draft-ietf-ccwg-bbr-06), each with the draft's value
/// as its default.
const BBR3_PARAMS: &[ParamInfo] = &[
    number("startup_pacing_gain", "1", crate::bbr3::Bbr3Config::DRAFT.startup_pacing_gain, 1.0, 10.0, "STARTUP's pacing gain (BBRStartupPacingGain = 4 ln 2)"),
    number("startup_cwnd_gain", "1", crate::bbr3::Bbr3Config::DRAFT.startup_cwnd_gain, 1.0, 10.0, "STARTUP's and DRAIN's cwnd gain (BBRStartupCwndGain)"),
    number("drain_pacing_gain", "1", crate::bbr3::Bbr3Config::DRAFT.drain_pacing_gain, 0.05, 1.0, "DRAIN's pacing gain (DrainPacingGain: 0.5 since draft -05; 0.35 before, and in Linux and quiche)"),
    number("down_pacing_gain", "1", crate::bbr3::Bbr3Config::DRAFT.down_pacing_gain, 0.05, 1.0, "PROBE_BW_DOWN's pacing gain"),
    number("up_pacing_gain", "1", crate::bbr3::Bbr3Config::DRAFT.up_pacing_gain, 1.0, 4.0, "PROBE_BW_UP's pacing gain"),
    number("cwnd_gain", "1", crate::bbr3::Bbr3Config::DRAFT.cwnd_gain, 1.0, 10.0, "PROBE_BW's cwnd gain outside UP"),
    number("up_cwnd_gain", "1", crate::bbr3::Bbr3Config::DRAFT.up_cwnd_gain, 1.0, 10.0, "PROBE_BW_UP's cwnd gain"),
    number("loss_thresh", "1", crate::bbr3::Bbr3Config::DRAFT.loss_thresh, 0.001, 0.5, "loss rate above which inflight is too high (BBRLossThresh)"),
    number("beta", "1", crate::bbr3::Bbr3Config::DRAFT.beta, 0.05, 1.0, "cut of the bounds on loss (BBRBeta)"),
    number("headroom", "1", crate::bbr3::Bbr3Config::DRAFT.headroom, 0.0, 0.9, "share of inflight_longterm left free in CRUISE (BBRHeadroom)"),
    number("full_bw_growth", "1", crate::bbr3::Bbr3Config::DRAFT.full_bw_growth, 1.01, 4.0, "bandwidth growth per round that keeps STARTUP going"),
    number("full_bw_rounds", "rounds", crate::bbr3::Bbr3Config::DRAFT.full_bw_rounds as f64, 1.0, 20.0, "rounds without that growth before the pipe counts as full"),
    number("startup_loss_ranges", "ranges", crate::bbr3::Bbr3Config::DRAFT.startup_full_loss_count as f64, 1.0, 100.0, "discontiguous lost ranges in a round that, with loss above loss_thresh after a round in recovery, end STARTUP (BBRStartupFullLossCnt)"),
    number("bw_filter_cycles", "cycles", crate::bbr3::Bbr3Config::DRAFT.bw_filter_cycles as f64, 1.0, 10.0, "PROBE_BW cycles the max_bw filter spans (MaxBwFilterLen)"),
    number("extra_acked_rounds", "rounds", crate::bbr3::Bbr3Config::DRAFT.extra_acked_rounds as f64, 1.0, 100.0, "rounds the extra_acked filter spans (ExtraAckedFilterLen)"),
    number("min_rtt_filter", "s", crate::bbr3::Bbr3Config::DRAFT.min_rtt_filter.as_secs_f64(), 0.1, 300.0, "min_rtt filter length (MinRTTFilterLen)"),
    number("probe_rtt_interval", "s", crate::bbr3::Bbr3Config::DRAFT.probe_rtt_interval.as_secs_f64(), 0.1, 300.0, "time without a new low RTT before PROBE_RTT (ProbeRTTInterval)"),
    number("probe_rtt_duration", "ms", crate::bbr3::Bbr3Config::DRAFT.probe_rtt_duration.as_secs_f64() * 1e3, 1.0, 10000.0, "time PROBE_RTT holds its low window (ProbeRTTDuration)"),
    number("probe_rtt_cwnd_gain", "1", crate::bbr3::Bbr3Config::DRAFT.probe_rtt_cwnd_gain, 0.1, 1.0, "PROBE_RTT's window as a multiple of the BDP (ProbeRTTCwndGain)"),
    number("probe_wait", "s", crate::bbr3::Bbr3Config::DRAFT.probe_wait_base.as_secs_f64(), 0.01, 60.0, "shortest wait between bandwidth probes"),
    number("probe_wait_spread", "s", crate::bbr3::Bbr3Config::DRAFT.probe_wait_spread.as_secs_f64(), 0.0, 60.0, "random extra wait between probes, up to this"),
    number("pacing_margin", "%", crate::bbr3::Bbr3Config::DRAFT.pacing_margin_percent, 0.0, 50.0, "pacing this far below the model's bandwidth (BBRPacingMarginPercent)"),
    number("min_pipe_cwnd", "packets", crate::bbr3::Bbr3Config::DRAFT.min_pipe_cwnd_packets, 2.0, 100.0, "smallest window (BBRMinPipeCwnd)"),
];

fn bbr3(p: &Params) -> Controller {
    use std::time::Duration;
    let secs = |k: &str| Duration::from_secs_f64(p.get(k));
    Controller::Plugin(Arc::new(crate::bbr3::Bbr3Config {
        startup_pacing_gain: p.get("startup_pacing_gain"),
        startup_cwnd_gain: p.get("startup_cwnd_gain"),
        drain_pacing_gain: p.get("drain_pacing_gain"),
        down_pacing_gain: p.get("down_pacing_gain"),
        up_pacing_gain: p.get("up_pacing_gain"),
        cwnd_gain: p.get("cwnd_gain"),
        up_cwnd_gain: p.get("up_cwnd_gain"),
        loss_thresh: p.get("loss_thresh"),
        beta: p.get("beta"),
        headroom: p.get("headroom"),
        full_bw_growth: p.get("full_bw_growth"),
        full_bw_rounds: p.get("full_bw_rounds").round() as u32,
        startup_full_loss_count: p.get("startup_loss_ranges").round() as u32,
        bw_filter_cycles: p.get("bw_filter_cycles").round() as u32,
        extra_acked_rounds: p.get("extra_acked_rounds").round() as u32,
        min_rtt_filter: secs("min_rtt_filter"),
        probe_rtt_interval: secs("probe_rtt_interval"),
        probe_rtt_duration: Duration::from_secs_f64(p.get("probe_rtt_duration") / 1e3),
        probe_rtt_cwnd_gain: p.get("probe_rtt_cwnd_gain"),
        probe_wait_base: secs("probe_wait"),
        probe_wait_spread: secs("probe_wait_spread"),
        pacing_margin_percent: p.get("pacing_margin"),
        min_pipe_cwnd_packets: p.get("min_pipe_cwnd"),
    }))
}

/// `slow_start=` of the window-based plugins that take it.
const SLOW_START: ParamInfo = ParamInfo {
    name: "slow_start",
    unit: "standard, hystart++ or search",
    kind: ParamKind::Choice(&["standard", "hystart++", "search"]),
    default: Some(0.0),
    min: 0.0,
    max: 2.0,
    help: "standard: double per round until ssthresh or a loss (RFC 9002); hystart++: RFC 9406, leave on an RTT rise through 5 rounds of conservative slow start (its constants: 4-16 ms threshold, 8 samples, growth / 4)",
};

/// Every parameter of slow start as a choice: the choice, then HyStart++'s
/// constants (RFC 9406 section 4.3) and SEARCH's, each defaulting to its
/// document's value (`cc_algorithms::slow_start`).
const SLOW_START_PARAMS: [ParamInfo; 11] = {
    use crate::slow_start as ss;
    [
        SLOW_START,
        number(
            "hs_min_rtt_thresh",
            "ms",
            ss::MIN_RTT_THRESH.as_millis() as f64,
            0.0,
            1000.0,
            "HyStart++'s MIN_RTT_THRESH: the smallest RTT rise that ends slow start",
        ),
        number(
            "hs_max_rtt_thresh",
            "ms",
            ss::MAX_RTT_THRESH.as_millis() as f64,
            0.0,
            1000.0,
            "HyStart++'s MAX_RTT_THRESH: the largest rise asked for (the maximum wins over a larger minimum)",
        ),
        number(
            "hs_min_rtt_divisor",
            "1",
            ss::MIN_RTT_DIVISOR as f64,
            1.0,
            1000.0,
            "HyStart++'s MIN_RTT_DIVISOR: the rise asked for is the last round's minimum RTT over this, within the two thresholds",
        ),
        number(
            "hs_n_rtt_sample",
            "samples",
            ss::N_RTT_SAMPLE as f64,
            1.0,
            1000.0,
            "HyStart++'s N_RTT_SAMPLE: RTT samples a round needs before its minimum is compared",
        ),
        number(
            "hs_css_growth_divisor",
            "1",
            ss::CSS_GROWTH_DIVISOR as f64,
            1.0,
            1000.0,
            "HyStart++'s CSS_GROWTH_DIVISOR: conservative slow start grows this many times slower than slow start",
        ),
        number(
            "hs_css_rounds",
            "rounds",
            ss::CSS_ROUNDS as f64,
            0.0,
            1000.0,
            "HyStart++'s CSS_ROUNDS: rounds of conservative slow start before congestion avoidance",
        ),
        number(
            "search_window_factor",
            "initial RTTs",
            ss::SEARCH_WINDOW_FACTOR,
            0.1,
            100.0,
            "SEARCH's WINDOW_SIZE_FACTOR: the delivery window's length in initial RTTs",
        ),
        number(
            "search_w",
            "bins",
            ss::SEARCH_W as f64,
            1.0,
            100.0,
            "SEARCH's W: bins per delivery window",
        ),
        number(
            "search_extra_bins",
            "bins",
            ss::SEARCH_EXTRA_BINS as f64,
            1.0,
            1000.0,
            "SEARCH's EXTRA_BINS: bins kept beyond one window, to look one RTT back",
        ),
        number(
            "search_thresh",
            "1",
            ss::SEARCH_THRESH,
            0.0,
            1.0,
            "SEARCH's THRESH: the shortfall of delivered bytes against twice those one RTT earlier that ends slow start",
        ),
    ]
};

/// `base`, then [`SLOW_START_PARAMS`] (`M` must be `N` + 11).
const fn with_slow_start<const N: usize, const M: usize>(base: [ParamInfo; N]) -> [ParamInfo; M] {
    assert!(M == N + SLOW_START_PARAMS.len());
    let mut out = [SLOW_START; M];
    let mut i = 0;
    while i < N {
        out[i] = base[i];
        i += 1;
    }
    let mut j = 0;
    while j < SLOW_START_PARAMS.len() {
        out[N + j] = SLOW_START_PARAMS[j];
        j += 1;
    }
    out
}

/// The `slow_start=` choice of a spec, with its rule's constants.
fn slow_start(p: &Params) -> crate::slow_start::SlowStartConfig {
    use crate::slow_start::{HyStartParams, SearchParams, SlowStartConfig, SlowStartKind};
    let ms = |k: &str| std::time::Duration::from_secs_f64(p.get(k) / 1e3);
    let count = |k: &str| p.get(k).round() as u32;
    SlowStartConfig {
        kind: SlowStartKind::from_code(p.get("slow_start")),
        hystart: HyStartParams {
            min_rtt_thresh: ms("hs_min_rtt_thresh"),
            max_rtt_thresh: ms("hs_max_rtt_thresh"),
            min_rtt_divisor: count("hs_min_rtt_divisor"),
            n_rtt_sample: count("hs_n_rtt_sample"),
            css_growth_divisor: count("hs_css_growth_divisor") as usize,
            css_rounds: count("hs_css_rounds"),
        },
        search: SearchParams {
            window_factor: p.get("search_window_factor"),
            w: count("search_w") as usize,
            extra_bins: count("search_extra_bins") as usize,
            thresh: p.get("search_thresh"),
        },
    }
}

fn builtin(algo: CongestionControlAlgorithm) -> Controller {
    Controller::Builtin(algo, BuiltinOptions::default())
}

const ENTRIES: &[Entry] = &[
    Entry {
        info: AlgorithmInfo {
            name: "newreno",
            summary: "NewReno as RFC 9002 specifies it; the reference plugin",
            origin: Origin::Plugin,
            params: &with_slow_start::<1, 12>([ECN]),
        },
        build: |p| {
            Controller::Plugin(Arc::new(NewRenoConfig {
                slow_start: slow_start(p),
            }))
        },
    },
    Entry {
        info: AlgorithmInfo {
            name: "tahoe",
            summary: "TCP Tahoe: on loss ssthresh = max(flight/2, 2 MSS), cwnd = minimum window, slow start again; no fast recovery",
            origin: Origin::Plugin,
            params: &[ECN],
        },
        build: |_| Controller::Plugin(Arc::new(crate::newreno::TahoeConfig::default())),
    },
    Entry {
        info: AlgorithmInfo {
            name: "vegas",
            summary: "TCP Vegas, delay-based: Brakmo and Peterson / ns-2 slow start, Linux tcp_vegas.c avoidance, real-valued diff",
            origin: Origin::Plugin,
            params: VEGAS_PARAMS,
        },
        build: |p| {
            Controller::Plugin(Arc::new(VegasConfig {
                alpha: p.get("alpha"),
                beta: p.get("beta"),
                gamma: p.get("gamma"),
                slow_start: if p.get("linux_slow_start") >= 0.5 {
                    crate::vegas::SlowStart::Linux
                } else {
                    crate::vegas::SlowStart::Paper
                },
                loss_response: loss_response(p),
            }))
        },
    },
    Entry {
        info: AlgorithmInfo {
            name: "westwood+",
            summary: "Westwood+: Reno growth, ssthresh = bandwidth estimate x min RTT on loss",
            origin: Origin::Plugin,
            params: WESTWOOD_PARAMS,
        },
        build: |p| {
            let filter = crate::estimators::WestwoodFilterKind::from_code(p.get("filter"))
                .unwrap_or(crate::estimators::WestwoodFilterKind::Linux);
            Controller::Plugin(Arc::new(WestwoodConfig {
                filter,
                slow_start: slow_start(p),
            }))
        },
    },
    Entry {
        info: AlgorithmInfo {
            name: "br-tcp",
            summary:
                "BR-TCP: after a loss, ssthresh and cwnd from the reserved bandwidth x min RTT",
            origin: Origin::Plugin,
            params: BR_TCP_PARAMS,
        },
        build: |p| {
            Controller::Plugin(Arc::new(BrTcpConfig {
            slow_start: slow_start(p),
                reserved_bps: p.get("reserved"),
            }))
        },
    },
    Entry {
        info: AlgorithmInfo {
            name: "exp",
            summary: "TCP/EXP: exponential increase (alpha/e^W)^k and decrease (beta e^W)^l",
            origin: Origin::Plugin,
            params: EXP_PARAMS,
        },
        build: |p| {
            Controller::Plugin(Arc::new(ExpConfig {
            slow_start: slow_start(p),
                alpha: p.get("alpha"),
                beta: p.get("beta"),
                k: p.get("k"),
                l: p.get("l"),
                literal: p.get("literal") >= 0.5,
                iw: p.get("iw").round() as usize,
            }))
        },
    },
    Entry {
        info: AlgorithmInfo {
            name: "dcm+",
            summary: "DCM+: Westwood+ estimate (ns-3's, as the paper ran), rate_CA = RTT_old/RTT_new growth, slow start tracking ssthresh",
            origin: Origin::Plugin,
            params: DCM_PLUS_PARAMS,
        },
        build: |p| dcm(Variant::DcmPlus, p),
    },
    Entry {
        info: AlgorithmInfo {
            name: "dcm",
            summary: "DCM without path switching: Westwood estimate (ns-3's, as the paper ran), equation 2 growth",
            origin: Origin::Plugin,
            params: DCM_PARAMS,
        },
        build: |p| dcm(Variant::Dcm, p),
    },
    Entry {
        info: AlgorithmInfo {
            name: "smcc",
            summary: "SMCC: Vegas with alpha and beta tuned by particle swarm optimisation, online or from a `cclab tune smcc` table",
            origin: Origin::Plugin,
            params: SMCC_PARAMS,
        },
        build: |p| {
            Controller::Plugin(Arc::new(SmccConfig {
                swarm: p.get("swarm") as usize,
                iterations: p.get("iterations") as usize,
                rounds: p.get("rounds") as u64,
                max: p.get("max"),
                delta: p.get("delta"),
                lambda: p.get("lambda"),
                seed: p.get("seed") as u64,
                flow_seed: p.get("flow_seed") >= 0.5,
                alpha_min: p.get("alpha_min"),
                loss_response: loss_response(p),
                table: p
                    .file("table")
                    .and_then(|f| crate::smcc::SmccTable::load(std::path::Path::new(f)).ok())
                    .map(Arc::new),
            }))
        },
    },
    Entry {
        info: AlgorithmInfo {
            name: "ewphcc",
            summary: "EWPHCC: Vegas-based hybrid, RMS of delay- and loss-probability windows",
            origin: Origin::Plugin,
            params: EWPHCC_PARAMS,
        },
        build: |p| {
            Controller::Plugin(Arc::new(EwphccConfig {
            slow_start: slow_start(p),
                phi: p.get("phi"),
                alpha: p.get("alpha"),
                decrease: p.get("decrease"),
                beta: p.get("beta"),
                gamma: p.get("gamma"),
                loss_factor: p.get("loss_factor"),
            }))
        },
    },
    Entry {
        info: AlgorithmInfo {
            name: "binomial",
            summary: "binomial family: increase alpha/w^k per RTT, decrease beta w^l per loss",
            origin: Origin::Plugin,
            params: AIMD_PARAMS,
        },
        build: |p| binomial("binomial", p),
    },
    Entry {
        info: AlgorithmInfo {
            name: "aimd",
            summary: "binomial preset k=0, l=1: TCP's additive increase, multiplicative decrease",
            origin: Origin::Plugin,
            params: AIMD_PARAMS,
        },
        build: |p| binomial("aimd", p),
    },
    Entry {
        info: AlgorithmInfo {
            name: "iiad",
            summary: "binomial preset k=1, l=0: inverse increase, additive decrease",
            origin: Origin::Plugin,
            params: IIAD_PARAMS,
        },
        build: |p| binomial("iiad", p),
    },
    Entry {
        info: AlgorithmInfo {
            name: "sqrt",
            summary: "binomial preset k=l=1/2",
            origin: Origin::Plugin,
            params: SQRT_PARAMS,
        },
        build: |p| binomial("sqrt", p),
    },
    Entry {
        info: AlgorithmInfo {
            name: "mimd",
            summary: "binomial member k=-1, l=1: multiplicative increase and decrease, with Scalable TCP's constants (a=0.01 per ACK, b=0.125)",
            origin: Origin::Plugin,
            params: MIMD_PARAMS,
        },
        build: |p| binomial("mimd", p),
    },
    Entry {
        info: AlgorithmInfo {
            name: "fixed",
            summary: "a constant window of `window` packets: no reaction to loss or delay (a reference flow; the example plugin of docs/writing-a-plugin.md)",
            origin: Origin::Plugin,
            params: &[
                number("window", "packets", 10.0, 2.0, 100000.0, "the congestion window"),
                ECN,
            ],
        },
        build: |p| {
            Controller::Plugin(Arc::new(crate::fixed::FixedConfig {
                window: p.get("window").round() as usize,
            }))
        },
    },
    Entry {
        info: AlgorithmInfo {
            name: "reno",
            summary: "quiche's built-in Reno",
            origin: Origin::Builtin,
            params: HYSTART_PARAMS,
        },
        build: |p| with_hystart(CongestionControlAlgorithm::Reno, p),
    },
    Entry {
        info: AlgorithmInfo {
            name: "cubic",
            summary: "quiche's built-in CUBIC (RFC 9438), quiche's default",
            origin: Origin::Builtin,
            params: CUBIC_PARAMS,
        },
        build: |p| {
            Controller::Builtin(
                CongestionControlAlgorithm::CUBIC,
                BuiltinOptions {
                    hystart: p.get("hystart") >= 0.5,
                    cubic: Some(CubicParams {
                        beta: p.get("beta"),
                        c: p.get("c"),
                    }),
                },
            )
        },
    },
    Entry {
        info: AlgorithmInfo {
            name: "bbr2",
            summary: "quiche's built-in BBRv2 (gcongestion)",
            origin: Origin::Builtin,
            params: &[],
        },
        build: |_| builtin(CongestionControlAlgorithm::Bbr2Gcongestion),
    },
    // The ECN plugins come after the built-ins, so that every algorithm
    // registered before them keeps its place, and with it its colour in
    // reports (`harness::report::palette` colours by registry position).
    Entry {
        info: AlgorithmInfo {
            name: "dctcp",
            summary: "DCTCP (RFC 8257, Linux tcp_dctcp.c): ECT(0), alpha = EWMA of the marked fraction per window, cwnd x (1 - alpha/2) on marks once per RTT, NewReno otherwise",
            origin: Origin::Plugin,
            params: DCTCP_PARAMS,
        },
        build: |p| {
            Controller::Plugin(Arc::new(crate::dctcp::DctcpConfig {
            slow_start: slow_start(p),
                g: p.get("g"),
                alpha_init: p.get("alpha_init"),
                ect1: p.get("ect") >= 0.5,
            }))
        },
    },
    Entry {
        info: AlgorithmInfo {
            name: "prague",
            summary: "Prague-style L4S sender (RFC 9331 4.3; Linux tcp_prague, draft-briscoe-iccrg-prague): ECT(1), DCTCP-like alpha response, additive increase as at a 25 ms virtual RTT when the RTT is shorter, paced at cwnd/sRTT, halving on loss",
            origin: Origin::Plugin,
            params: PRAGUE_PARAMS,
        },
        build: |p| {
            Controller::Plugin(Arc::new(crate::prague::PragueConfig {
                g: p.get("g"),
                vrtt: std::time::Duration::from_secs_f64(p.get("vrtt") / 1e3),
                transition: p.get("transition").round() as u64,
            }))
        },
    },
    Entry {
        info: AlgorithmInfo {
            name: "bbr3",
            summary: "BBRv3 as draft-ietf-ccwg-bbr-06 specifies it: max_bw and min_rtt model, STARTUP/DRAIN/PROBE_BW (DOWN, CRUISE, REFILL, UP)/PROBE_RTT, loss bounds inflight_longterm and the short-term model",
            origin: Origin::Plugin,
            params: BBR3_PARAMS,
        },
        build: bbr3,
    },
];

/// Every algorithm the registry knows: the loss- and delay-based plugins,
/// quiche's built-ins, then the ECN plugins (`dctcp`, `prague`).
pub fn algorithms() -> impl Iterator<Item = &'static AlgorithmInfo> {
    ENTRIES.iter().map(|e| &e.info)
}

/// Names of every algorithm, for error messages.
pub fn names() -> Vec<&'static str> {
    algorithms().map(|a| a.name).collect()
}

/// A parsed spec: a quiche built-in or a plugin factory.
#[derive(Clone)]
pub enum Controller {
    /// One of quiche's own algorithms, with its settings.
    Builtin(CongestionControlAlgorithm, BuiltinOptions),
    /// A plugin factory.
    Plugin(Arc<dyn CongestionControllerFactory>),
}

/// Settings of a quiche built-in besides the algorithm.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BuiltinOptions {
    /// HyStart++ in slow start (`quiche::Config::enable_hystart`); reno and
    /// cubic use it.
    pub hystart: bool,
    /// CUBIC's beta and C (`quiche::Config::set_cubic_params`), for cubic
    /// only; `None` means quiche's defaults.
    pub cubic: Option<CubicParams>,
}

impl Default for BuiltinOptions {
    /// quiche's defaults: HyStart++ on, CUBIC's constants.
    fn default() -> Self {
        BuiltinOptions {
            hystart: true,
            cubic: None,
        }
    }
}

/// The constants of quiche's built-in CUBIC (RFC 9438).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CubicParams {
    /// Multiplicative decrease factor beta_cubic, in (0, 1).
    pub beta: f64,
    /// Cubic growth constant C, positive.
    pub c: f64,
}

impl CubicParams {
    /// quiche's (and RFC 9438's) values, beta = 0.7 and C = 0.4.
    pub const QUICHE_DEFAULT: CubicParams = CubicParams { beta: 0.7, c: 0.4 };
}

impl Default for CubicParams {
    fn default() -> Self {
        CubicParams::QUICHE_DEFAULT
    }
}

impl fmt::Debug for Controller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Controller::Builtin(a, o) => {
                write!(f, "Builtin({a:?}, hystart={}", o.hystart)?;
                if let Some(c) = o.cubic {
                    write!(f, ", beta={}, c={}", c.beta, c.c)?;
                }
                write!(f, ")")
            }
            Controller::Plugin(p) => write!(f, "Plugin({})", p.name()),
        }
    }
}

impl Controller {
    /// Makes every connection built from `config` use this algorithm.
    ///
    /// # Panics
    ///
    /// If quiche refuses a built-in CUBIC's [`CubicParams`]: beta outside
    /// (0, 1) or C not positive. [`parse`] never makes such a controller.
    pub fn apply(&self, config: &mut quiche::Config) {
        match self {
            Controller::Builtin(a, o) => {
                config.set_cc_algorithm(*a);
                config.enable_hystart(o.hystart);
                if *a == CongestionControlAlgorithm::CUBIC {
                    // Always set, so that a reused config gets the defaults
                    // back.
                    let p = o.cubic.unwrap_or_default();
                    if let Err(e) = config.set_cubic_params(p.beta, p.c) {
                        panic!(
                            "quiche refused CUBIC beta={} c={} ({e:?}); beta must be in (0, 1) and c positive",
                            p.beta, p.c
                        );
                    }
                }
            }
            Controller::Plugin(f) => config.set_cc_factory(f.clone()),
        }
    }

    /// Makes one connection use this algorithm; only before it sends
    /// in-flight data. Built-ins are chosen on the `Config`, so for them this
    /// is an error unless the connection already uses that built-in.
    pub fn apply_to_connection(&self, conn: &mut quiche::Connection) -> Result<(), quiche::Error> {
        match self {
            Controller::Plugin(f) => conn.set_cc_factory(f.clone()),
            Controller::Builtin(..) => Err(quiche::Error::InvalidState),
        }
    }
}

/// Parsed `key=value` parameters, with defaults filled in.
#[derive(Debug, Clone)]
pub struct Params(BTreeMap<&'static str, f64>, BTreeMap<&'static str, String>);

impl Params {
    /// A parameter's value; every declared key is present.
    pub fn get(&self, name: &str) -> f64 {
        self.0.get(name).copied().unwrap_or(f64::NAN)
    }

    /// A file parameter, if given.
    pub fn file(&self, name: &str) -> Option<&str> {
        self.1.get(name).map(String::as_str)
    }
}

/// Why a spec was refused. Every message names what is wrong and what is
/// allowed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    /// The spec is empty.
    #[error("empty congestion-control spec; expected `name` or `name:key=value,...` with name one of: {}", .valid.join(", "))]
    Empty {
        /// Known names.
        valid: Vec<&'static str>,
    },
    /// No algorithm has this name.
    #[error("unknown congestion-control algorithm `{name}`; valid: {}", .valid.join(", "))]
    UnknownAlgorithm {
        /// The name given.
        name: String,
        /// Known names.
        valid: Vec<&'static str>,
    },
    /// A `key=value` pair has no `=`, or an empty key.
    #[error("malformed parameter `{item}` in `{spec}`; expected key=value")]
    Malformed {
        /// The spec.
        spec: String,
        /// The bad item.
        item: String,
    },
    /// The algorithm has no parameter of this name.
    #[error("`{algorithm}` has no parameter `{key}`; {}", if .valid.is_empty() { "it takes no parameters".to_string() } else { format!("valid: {}", .valid.join(", ")) })]
    UnknownParam {
        /// Algorithm name.
        algorithm: &'static str,
        /// The key given.
        key: String,
        /// Valid keys.
        valid: Vec<&'static str>,
    },
    /// A key appears twice.
    #[error("parameter `{key}` of `{algorithm}` is given twice")]
    Duplicate {
        /// Algorithm name.
        algorithm: &'static str,
        /// The key.
        key: String,
    },
    /// The value is not a finite number or is out of range.
    #[error("`{algorithm}:{key}={value}` is invalid; expected {}", expected(*.kind, *.min, *.max, .unit))]
    BadValue {
        /// Algorithm name.
        algorithm: &'static str,
        /// The key.
        key: &'static str,
        /// The value given.
        value: String,
        /// Smallest allowed.
        min: f64,
        /// Largest allowed.
        max: f64,
        /// Unit.
        unit: &'static str,
        /// How the value is written.
        kind: ParamKind,
    },
    /// A required parameter is missing.
    #[error("`{algorithm}` needs `{key}` ({unit}), e.g. `{algorithm}:{key}={example}`")]
    Missing {
        /// Algorithm name.
        algorithm: &'static str,
        /// The key.
        key: &'static str,
        /// Its unit.
        unit: &'static str,
        /// An example value.
        example: &'static str,
    },
    /// The parameters are each valid but not together.
    #[error("`{algorithm}`: {reason}")]
    Inconsistent {
        /// Algorithm name.
        algorithm: &'static str,
        /// What is wrong.
        reason: String,
    },
}

fn expected(kind: ParamKind, min: f64, max: f64, unit: &str) -> String {
    match kind {
        ParamKind::Number => format!("a number from {min} to {max} ({unit})"),
        ParamKind::Rate => format!(
            "a rate from {} to {} such as 500kbit, 40mbit or 1gbit (a bare number is bit/s)",
            crate::units::format_rate(min),
            crate::units::format_rate(max)
        ),
        ParamKind::File => format!("a file name ({unit})"),
        ParamKind::Choice(names) => format!(
            "one of {} (or its index, 0 to {})",
            names.join(", "),
            names.len().saturating_sub(1)
        ),
    }
}

/// Parses a spec such as `vegas:alpha=2,beta=4` into a controller.
pub fn parse(spec: &str) -> Result<Controller, SpecError> {
    let spec = spec.trim();
    if spec.is_empty() {
        return Err(SpecError::Empty { valid: names() });
    }
    let (name, rest) = match spec.split_once(':') {
        Some((n, r)) => (n.trim(), Some(r)),
        None => (spec, None),
    };
    let entry = ENTRIES
        .iter()
        .find(|e| e.info.name.eq_ignore_ascii_case(name))
        .ok_or_else(|| SpecError::UnknownAlgorithm {
            name: name.to_string(),
            valid: names(),
        })?;
    let info = &entry.info;
    let mut given: BTreeMap<&'static str, f64> = BTreeMap::new();
    let mut files: BTreeMap<&'static str, String> = BTreeMap::new();
    let mut rwnd: Option<usize> = None;
    for item in rest.into_iter().flat_map(|r| r.split(',')) {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let (key, value) = item
            .split_once('=')
            .filter(|(k, _)| !k.trim().is_empty())
            .ok_or_else(|| SpecError::Malformed {
                spec: spec.to_string(),
                item: item.to_string(),
            })?;
        let (key, value) = (key.trim(), value.trim());
        if key == RWND_KEY {
            // Every plugin's: a bound on its window (crate::rwnd).
            let bytes = value
                .parse::<usize>()
                .ok()
                .filter(|b| *b >= crate::rwnd::MIN_RWND)
                .ok_or_else(|| SpecError::BadValue {
                    algorithm: info.name,
                    key: RWND_KEY,
                    value: value.to_string(),
                    min: crate::rwnd::MIN_RWND as f64,
                    max: usize::MAX as f64,
                    unit: "bytes, a whole number: the receiver's advertised window",
                    kind: ParamKind::Number,
                })?;
            if rwnd.replace(bytes).is_some() {
                return Err(SpecError::Duplicate {
                    algorithm: info.name,
                    key: key.to_string(),
                });
            }
            continue;
        }
        let param =
            info.params
                .iter()
                .find(|p| p.name == key)
                .ok_or_else(|| SpecError::UnknownParam {
                    algorithm: info.name,
                    key: key.to_string(),
                    valid: info.params.iter().map(|p| p.name).collect(),
                })?;
        let bad = || SpecError::BadValue {
            algorithm: info.name,
            key: param.name,
            value: value.to_string(),
            min: param.min,
            max: param.max,
            unit: param.unit,
            kind: param.kind,
        };
        if param.kind == ParamKind::File {
            if value.is_empty() {
                return Err(bad());
            }
            if files.insert(param.name, value.to_string()).is_some() {
                return Err(SpecError::Duplicate {
                    algorithm: info.name,
                    key: key.to_string(),
                });
            }
            continue;
        }
        let v = match param.kind {
            ParamKind::Number => value.parse::<f64>().ok(),
            ParamKind::Rate => crate::units::parse_rate(value),
            ParamKind::File => None,
            ParamKind::Choice(names) => names
                .iter()
                .position(|n| n.eq_ignore_ascii_case(value))
                .map(|i| i as f64)
                .or_else(|| value.parse::<f64>().ok().filter(|v| v.fract() == 0.0)),
        }
        .ok_or_else(bad)?;
        if !v.is_finite() || v < param.min || v > param.max {
            return Err(bad());
        }
        if given.insert(param.name, v).is_some() {
            return Err(SpecError::Duplicate {
                algorithm: info.name,
                key: key.to_string(),
            });
        }
    }
    for p in info.params {
        match p.default {
            Some(d) => {
                given.entry(p.name).or_insert(d);
            }
            None if !given.contains_key(p.name) => {
                return Err(SpecError::Missing {
                    algorithm: info.name,
                    key: p.name,
                    unit: p.unit,
                    example: if p.kind == ParamKind::Rate {
                        "40mbit"
                    } else {
                        "1"
                    },
                });
            }
            None => {}
        }
    }
    let params = Params(given, files);
    if let Some(path) = params.file("table") {
        if let Err(e) = crate::smcc::SmccTable::load(std::path::Path::new(path)) {
            return Err(SpecError::Inconsistent {
                algorithm: info.name,
                reason: format!("table={path}: {e}"),
            });
        }
    }
    if info.name == "ewphcc" && params.get("gamma") > params.get("beta") {
        return Err(SpecError::Inconsistent {
            algorithm: info.name,
            reason: format!(
                "gamma ({}) must not exceed beta ({})",
                params.get("gamma"),
                params.get("beta")
            ),
        });
    }
    if info.name == "vegas" && params.get("alpha") > params.get("beta") {
        return Err(SpecError::Inconsistent {
            algorithm: info.name,
            reason: format!(
                "alpha ({}) must not exceed beta ({})",
                params.get("alpha"),
                params.get("beta")
            ),
        });
    }
    let built = (entry.build)(&params);
    let built = match built {
        Controller::Plugin(inner)
            if info.params.iter().any(|p| p.name == ECN.name) && params.get(ECN.name) >= 0.5 =>
        {
            Controller::Plugin(Arc::new(crate::ecn::ClassicEcnConfig { inner }))
        }
        other => other,
    };
    match (built, rwnd) {
        (Controller::Plugin(inner), Some(bytes)) => Ok(Controller::Plugin(Arc::new(
            crate::rwnd::RwndConfig { inner, bytes },
        ))),
        (Controller::Builtin(..), Some(_)) => Err(SpecError::Inconsistent {
            algorithm: info.name,
            reason: format!(
                "`{RWND_KEY}` bounds a plugin's window; quiche's built-in `{}` has no such bound (use the plugin `newreno` for Reno)",
                info.name
            ),
        }),
        (built, None) => Ok(built),
    }
}

/// The key every plugin takes besides its own parameters: a bound on its
/// window in bytes, as a receiver's advertised window (ns-2's `window_`).
pub const RWND_KEY: &str = "rwnd";

/// `ALG:...,table=FILE,...` with the table's entry nearest to the condition
/// written in as explicit parameters (parameters given in the spec win over
/// the table's). A spec without `table=`, or one whose algorithm declares a
/// `table` parameter of its own (SMCC picks its entry at run time), is
/// returned as it is.
pub fn resolve_spec(
    spec: &str,
    rtt_ms: f64,
    rate_bps: f64,
    loss: Option<f64>,
) -> Result<String, String> {
    let Some((name, rest)) = spec.split_once(':') else {
        return Ok(spec.to_string());
    };
    let own_table = algorithms()
        .find(|a| a.name == name.trim())
        .is_some_and(|a| a.params.iter().any(|p| p.name == "table"));
    let items: Vec<&str> = rest.split(',').map(str::trim).collect();
    let Some(file) = items.iter().find_map(|kv| kv.strip_prefix("table=")) else {
        return Ok(spec.to_string());
    };
    if own_table {
        return Ok(spec.to_string());
    }
    let table = crate::tuned::TunedTable::load(std::path::Path::new(file))?;
    if let Some(a) = table.algorithm.as_deref().filter(|a| *a != name.trim()) {
        return Err(format!(
            "`{spec}`: {file} was tuned for `{a}`, not `{}`",
            name.trim()
        ));
    }
    let (_, entry) = table.nearest(rtt_ms, rate_bps, loss);
    let given: Vec<&str> = items
        .iter()
        .copied()
        .filter(|kv| !kv.starts_with("table=") && !kv.is_empty())
        .collect();
    let mut out: Vec<String> = given.iter().map(|s| s.to_string()).collect();
    for (k, v) in &entry.params {
        if !given
            .iter()
            .any(|kv| kv.split('=').next() == Some(k.as_str()))
        {
            out.push(format!("{k}={v}"));
        }
    }
    if out.is_empty() {
        Ok(name.trim().to_string())
    } else {
        Ok(format!("{}:{}", name.trim(), out.join(",")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_and_parameters() {
        assert!(matches!(
            parse("reno"),
            Ok(Controller::Builtin(
                CongestionControlAlgorithm::Reno,
                BuiltinOptions {
                    hystart: true,
                    cubic: None
                }
            ))
        ));
        assert!(matches!(parse("bbr2"), Ok(Controller::Builtin(..))));
        assert!(matches!(
            parse("cubic:hystart=0"),
            Ok(Controller::Builtin(
                CongestionControlAlgorithm::CUBIC,
                BuiltinOptions {
                    hystart: false,
                    cubic: Some(CubicParams::QUICHE_DEFAULT)
                }
            ))
        ));
        match parse("vegas:alpha=1, beta=3").unwrap() {
            Controller::Plugin(f) => assert_eq!(f.name(), "vegas"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(parse("  newreno "), Ok(Controller::Plugin(_))));
        assert!(matches!(parse("Westwood+"), Ok(Controller::Plugin(_))));
    }

    #[test]
    fn errors_name_what_is_valid() {
        let e = parse("vegsa").unwrap_err();
        assert!(e
            .to_string()
            .contains("unknown congestion-control algorithm `vegsa`"));
        assert!(e.to_string().contains("vegas"));

        let e = parse("vegas:delta=1").unwrap_err();
        assert_eq!(
            e.to_string(),
            "`vegas` has no parameter `delta`; valid: alpha, beta, gamma, linux_slow_start, loss_response, ecn"
        );

        let e = parse("bbr2:x=1").unwrap_err();
        assert!(e.to_string().ends_with("it takes no parameters"), "{e}");
        let e = parse("newreno:x=1").unwrap_err();
        assert!(
            e.to_string().ends_with(
                "valid: ecn, slow_start, hs_min_rtt_thresh, hs_max_rtt_thresh, \
                 hs_min_rtt_divisor, hs_n_rtt_sample, hs_css_growth_divisor, hs_css_rounds, \
                 search_window_factor, search_w, search_extra_bins, search_thresh"
            ),
            "{e}"
        );
        assert!(matches!(
            parse("newreno:ecn=l4s"),
            Err(SpecError::BadValue { .. })
        ));
        // DCTCP and Prague answer marks themselves: no `ecn=`.
        assert!(matches!(
            parse("dctcp:ecn=classic"),
            Err(SpecError::UnknownParam { .. })
        ));

        let e = parse("vegas:alpha=-1").unwrap_err();
        assert!(
            e.to_string()
                .contains("expected a number from 0 to 1000 (packets)"),
            "{e}"
        );
        assert!(matches!(
            parse("vegas:alpha=NaN"),
            Err(SpecError::BadValue { .. })
        ));
        assert!(matches!(
            parse("vegas:alpha=two"),
            Err(SpecError::BadValue { .. })
        ));
        assert!(matches!(
            parse("vegas:alpha"),
            Err(SpecError::Malformed { .. })
        ));
        assert!(matches!(
            parse("vegas:alpha=1,alpha=2"),
            Err(SpecError::Duplicate { .. })
        ));
        assert!(matches!(
            parse("vegas:alpha=5,beta=4"),
            Err(SpecError::Inconsistent { .. })
        ));
        assert!(matches!(parse(""), Err(SpecError::Empty { .. })));
    }

    fn builtin_options(spec: &str) -> (CongestionControlAlgorithm, BuiltinOptions) {
        match parse(spec) {
            Ok(Controller::Builtin(a, o)) => (a, o),
            other => panic!("{spec}: {other:?}"),
        }
    }

    #[test]
    fn cubic_takes_beta_and_c() {
        let (a, o) = builtin_options("cubic:beta=0.6,c=0.5");
        assert_eq!(a, CongestionControlAlgorithm::CUBIC);
        assert_eq!(
            o,
            BuiltinOptions {
                hystart: true,
                cubic: Some(CubicParams { beta: 0.6, c: 0.5 })
            }
        );
        assert_eq!(
            format!("{:?}", parse("cubic:beta=0.6,c=0.5").unwrap()),
            "Builtin(CUBIC, hystart=true, beta=0.6, c=0.5)"
        );
        // Defaults are quiche's constants, and the ranges' ends parse.
        assert_eq!(
            builtin_options("cubic").1.cubic,
            Some(CubicParams { beta: 0.7, c: 0.4 })
        );
        assert_eq!(
            builtin_options("cubic:hystart=0, c=10, beta=0.1").1,
            BuiltinOptions {
                hystart: false,
                cubic: Some(CubicParams { beta: 0.1, c: 10.0 })
            }
        );
        assert_eq!(
            builtin_options("cubic:beta=0.95,c=0.01").1.cubic,
            Some(CubicParams {
                beta: 0.95,
                c: 0.01
            })
        );
        // Every value the registry allows, quiche accepts.
        let mut config = quiche::Config::new(quiche::PROTOCOL_VERSION).unwrap();
        for spec in algorithms()
            .find(|a| a.name == "cubic")
            .unwrap()
            .extreme_specs()
        {
            parse(&spec).unwrap().apply(&mut config);
        }
        // Reno and BBRv2 carry no CUBIC constants.
        assert_eq!(builtin_options("reno:hystart=0").1.cubic, None);
        assert_eq!(builtin_options("bbr2").1, BuiltinOptions::default());
    }

    #[test]
    fn cubic_beta_and_c_out_of_range_are_refused() {
        for spec in [
            "cubic:beta=0",
            "cubic:beta=0.05",
            "cubic:beta=0.96",
            "cubic:beta=1",
            "cubic:beta=-0.7",
            "cubic:beta=NaN",
            "cubic:c=0",
            "cubic:c=0.001",
            "cubic:c=10.5",
            "cubic:c=inf",
        ] {
            assert!(
                matches!(
                    parse(spec),
                    Err(SpecError::BadValue {
                        algorithm: "cubic",
                        ..
                    })
                ),
                "{spec}: {:?}",
                parse(spec)
            );
        }
        assert_eq!(
            parse("cubic:beta=1").unwrap_err().to_string(),
            "`cubic:beta=1` is invalid; expected a number from 0.1 to 0.95 (1)"
        );
        assert_eq!(
            parse("cubic:c=0").unwrap_err().to_string(),
            "`cubic:c=0` is invalid; expected a number from 0.01 to 10 (1)"
        );
        let e = parse("cubic:gamma=1").unwrap_err().to_string();
        assert_eq!(
            e,
            "`cubic` has no parameter `gamma`; valid: hystart, beta, c"
        );
        // Reno keeps only hystart.
        let e = parse("reno:beta=0.6").unwrap_err().to_string();
        assert_eq!(e, "`reno` has no parameter `beta`; valid: hystart");
    }

    #[test]
    fn rate_parameters_use_tc_units_and_can_be_required() {
        match parse("br-tcp:reserved=40mbit").unwrap() {
            Controller::Plugin(f) => assert_eq!(f.name(), "br-tcp"),
            other => panic!("{other:?}"),
        }
        let e = parse("br-tcp").unwrap_err().to_string();
        assert_eq!(
            e,
            "`br-tcp` needs `reserved` (bit/s), e.g. `br-tcp:reserved=40mbit`"
        );
        let e = parse("br-tcp:reserved=fast").unwrap_err().to_string();
        assert!(e.contains("such as 500kbit, 40mbit or 1gbit"), "{e}");
        assert!(parse("br-tcp:reserved=0bit").is_err());
    }

    #[test]
    fn describes_itself() {
        let all: Vec<_> = algorithms().collect();
        for name in [
            "newreno",
            "vegas",
            "westwood+",
            "br-tcp",
            "reno",
            "cubic",
            "bbr2",
        ] {
            assert!(all.iter().any(|a| a.name == name), "{name} missing");
        }
        let vegas = all.iter().find(|a| a.name == "vegas").unwrap();
        assert_eq!(
            vegas.params.iter().map(|p| p.name).collect::<Vec<_>>(),
            [
                "alpha",
                "beta",
                "gamma",
                "linux_slow_start",
                "loss_response",
                "ecn"
            ]
        );
        // Every plugin but DCTCP, Prague and BBRv3 (no ECN response in its
        // draft) takes `ecn=`; no built-in does.
        for a in &all {
            let has = a.params.iter().any(|p| p.name == "ecn");
            let expected =
                a.origin == Origin::Plugin && !matches!(a.name, "dctcp" | "prague" | "bbr3");
            assert_eq!(has, expected, "{}", a.name);
        }
        let names = |n: &str| {
            all.iter()
                .find(|a| a.name == n)
                .unwrap()
                .params
                .iter()
                .map(|p| p.name)
                .collect::<Vec<_>>()
        };
        assert_eq!(names("cubic"), ["hystart", "beta", "c"]);
        assert_eq!(names("reno"), ["hystart"]);
        // Every default is within its own range and accepted by the parser.
        for a in &all {
            let required: Vec<String> = a
                .params
                .iter()
                .filter(|p| p.default.is_none())
                .map(|p| format!("{}={}", p.name, p.min))
                .collect();
            for p in a.params.iter().filter(|p| p.kind != ParamKind::File) {
                if let Some(d) = p.default {
                    assert!(p.min <= d && d <= p.max);
                    let mut items = required.clone();
                    items.push(format!("{}={d}", p.name));
                    parse(&format!("{}:{}", a.name, items.join(","))).unwrap();
                }
            }
        }
        let json = serde_json::to_string(&all).unwrap();
        assert!(json.contains("\"unit\":\"packets\""));
    }
}

#[cfg(test)]
mod table_spec_tests {
    use super::*;

    #[test]
    fn resolves_a_spec_against_a_table() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("t.toml");
        std::fs::write(&f, crate::tuned::EXAMPLE).unwrap();
        let spec = format!("vegas:table={},gamma=2", f.display());
        let r = resolve_spec(&spec, 180.0, 6e6, None).unwrap();
        assert_eq!(r, "vegas:gamma=2,alpha=1.5,beta=3");
        // A parameter in the spec wins over the table's.
        let spec = format!("vegas:alpha=3,table={}", f.display());
        assert_eq!(
            resolve_spec(&spec, 40.0, 20e6, None).unwrap(),
            "vegas:alpha=3,beta=5"
        );
        // Tuned for another algorithm: refused, naming both.
        let e =
            resolve_spec(&format!("ewphcc:table={}", f.display()), 40.0, 20e6, None).unwrap_err();
        assert!(e.contains("vegas") && e.contains("ewphcc"), "{e}");
        // SMCC reads its table itself.
        let s = format!("smcc:table={}", f.display());
        assert_eq!(resolve_spec(&s, 40.0, 20e6, None).unwrap(), s);
        assert_eq!(resolve_spec("cubic", 40.0, 20e6, None).unwrap(), "cubic");
    }
}
