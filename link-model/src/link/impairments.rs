//! What a direction of the link does to packets besides queueing them:
//! jitter's distribution and the loss model.

use super::units::parse_probability;
use super::{err, format_prob, key_values, LinkError};

/// How jitter is drawn (netem's distribution tables, computed directly).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum JitterDistribution {
    /// Uniform in [-jitter, +jitter] (netem's default).
    #[default]
    Uniform,
    /// Normal with standard deviation `jitter`.
    Normal,
    /// Pareto with scale `jitter` (heavy tail, always late).
    Pareto,
    /// netem's "paretonormal": 1/4 pareto plus 3/4 normal.
    ParetoNormal,
}

impl JitterDistribution {
    pub(super) const NAMES: &'static str = "uniform, normal, pareto, paretonormal";

    pub(super) fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "uniform" => Some(Self::Uniform),
            "normal" => Some(Self::Normal),
            "pareto" => Some(Self::Pareto),
            "paretonormal" => Some(Self::ParetoNormal),
            _ => None,
        }
    }

    /// The name users (and tc) write.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Uniform => "uniform",
            Self::Normal => "normal",
            Self::Pareto => "pareto",
            Self::ParetoNormal => "paretonormal",
        }
    }
}

/// Which packets the link loses before they reach the queue.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum LossModel {
    /// No random loss.
    #[default]
    None,
    /// Each packet independently with this probability.
    Random(f64),
    /// The Gilbert-Elliott two-state model, as netem's `loss gemodel p r
    /// 1-h 1-k`: `p` = P(good→bad), `r` = P(bad→good), `bad` = loss
    /// probability in the bad state (1-h), `good` = in the good state (1-k).
    GilbertElliott {
        /// P(good → bad) per packet.
        p: f64,
        /// P(bad → good) per packet.
        r: f64,
        /// Loss probability in the bad state.
        bad: f64,
        /// Loss probability in the good state.
        good: f64,
    },
}

impl LossModel {
    const ALLOWED: &'static str =
        "a probability (`1%`, `0.01`) or Gilbert-Elliott `ge:p=1%,r=30%,bad=100%,good=0%`";

    /// The long-run loss rate.
    pub fn mean_rate(&self) -> f64 {
        match *self {
            LossModel::None => 0.0,
            LossModel::Random(p) => p,
            LossModel::GilbertElliott { p, r, bad, good } => {
                if p + r == 0.0 {
                    good
                } else {
                    let pi_bad = p / (p + r);
                    pi_bad * bad + (1.0 - pi_bad) * good
                }
            }
        }
    }

    pub(super) fn parse(field: &str, s: &str) -> Result<LossModel, LinkError> {
        let t = s.trim();
        let Some(rest) = t
            .strip_prefix("ge:")
            .or_else(|| t.strip_prefix("gilbert-elliott:"))
        else {
            return match parse_probability(t) {
                Some(0.0) => Ok(LossModel::None),
                Some(p) => Ok(LossModel::Random(p)),
                None => Err(err(field, format!("`{s}` is not {}", Self::ALLOWED))),
            };
        };
        let (mut p, mut r, mut bad, mut good) = (None, None, 1.0, 0.0);
        for (k, v) in key_values(field, rest, &["p", "r", "bad", "good"])? {
            let prob = parse_probability(&v).ok_or_else(|| {
                err(
                    field,
                    format!("`{k}={v}`: {k} must be a probability such as 5% or 0.05"),
                )
            })?;
            match k.as_str() {
                "p" => p = Some(prob),
                "r" => r = Some(prob),
                "bad" => bad = prob,
                _ => good = prob,
            }
        }
        let (Some(p), Some(r)) = (p, r) else {
            return Err(err(
                field,
                format!("`{s}`: Gilbert-Elliott needs both p and r"),
            ));
        };
        Ok(LossModel::GilbertElliott { p, r, bad, good })
    }

    /// The model as a link description writes it.
    pub fn to_spec(self) -> String {
        match self {
            LossModel::None => "0%".into(),
            LossModel::Random(p) => format_prob(p),
            LossModel::GilbertElliott { p, r, bad, good } => format!(
                "ge:p={},r={},bad={},good={}",
                format_prob(p),
                format_prob(r),
                format_prob(bad),
                format_prob(good)
            ),
        }
    }
}
