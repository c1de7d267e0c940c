//! Random loss before the queue: independent (Bernoulli) or bursty
//! (Gilbert-Elliott), as netem's `loss random` and `loss gemodel`.
//!
//! `Random(p)` is a per-packet error rate: each packet, whatever its
//! size, is lost with probability `p`, independently — the semantics of
//! ns-3's `RateErrorModel` with `ERROR_UNIT_PACKET` (a uniform draw per
//! packet compared with the rate). One difference: ns-3 applies its error
//! model at the receiving device, after the packet has used the link's
//! time, while a packet lost here never reaches the queue; at an error
//! rate `p` a saturated link therefore has about `p` more capacity left
//! for the surviving packets than in ns-3.

use super::rng::Rng;
use crate::link::LossModel;

/// Decides, packet by packet, which ones the link loses.
#[derive(Clone, Debug)]
pub struct Loss {
    model: LossModel,
    rng: Rng,
    /// Gilbert-Elliott: currently in the bad state.
    bad: bool,
    /// Packets offered.
    pub offered: u64,
    /// Packets lost.
    pub lost: u64,
}

impl Loss {
    /// A loss element with its own random stream.
    pub fn new(model: LossModel, rng: Rng) -> Loss {
        Loss {
            model,
            rng,
            bad: false,
            offered: 0,
            lost: 0,
        }
    }

    /// Arrivals from now on meet `model` (a Gilbert-Elliott state
    /// restarts good); the random stream goes on.
    pub fn set_model(&mut self, model: LossModel) {
        self.model = model;
        self.bad = false;
    }

    /// True if this packet is lost. In the Gilbert-Elliott model the state
    /// moves first, then the packet is lost with the new state's
    /// probability (netem's order).
    pub fn drop_next(&mut self) -> bool {
        self.offered += 1;
        let lose = match self.model {
            LossModel::None => false,
            LossModel::Random(p) => self.rng.chance(p),
            LossModel::GilbertElliott { p, r, bad, good } => {
                if self.bad {
                    if self.rng.chance(r) {
                        self.bad = false;
                    }
                } else if self.rng.chance(p) {
                    self.bad = true;
                }
                self.rng.chance(if self.bad { bad } else { good })
            }
        };
        self.lost += lose as u64;
        lose
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_rate() {
        let mut l = Loss::new(LossModel::Random(0.02), Rng::new(3, 0));
        let n = 100_000;
        let lost = (0..n).filter(|_| l.drop_next()).count();
        // 99% binomial interval around 2000: ±2.576·sqrt(n p (1-p)) ≈ ±114.
        assert!((1886..=2114).contains(&lost), "{lost}");
        assert_eq!((l.offered, l.lost), (n, lost as u64));
        let mut none = Loss::new(LossModel::None, Rng::new(3, 0));
        assert!(!(0..1000).any(|_| none.drop_next()));
    }

    #[test]
    fn gilbert_elliott_is_bursty_with_the_stationary_rate() {
        let model = LossModel::GilbertElliott {
            p: 0.01,
            r: 0.3,
            bad: 1.0,
            good: 0.0,
        };
        let mut l = Loss::new(model, Rng::new(5, 0));
        let n = 400_000;
        let seq: Vec<bool> = (0..n).map(|_| l.drop_next()).collect();
        let rate = seq.iter().filter(|&&x| x).count() as f64 / n as f64;
        assert!(
            (rate - model.mean_rate()).abs() < 0.003,
            "{rate} vs {}",
            model.mean_rate()
        );
        // Mean burst length is 1/r ≈ 3.3 packets: far from independent loss.
        let bursts = seq.windows(2).filter(|w| !w[0] && w[1]).count() as f64;
        let mean_burst = rate * n as f64 / bursts;
        assert!((mean_burst - 1.0 / 0.3).abs() < 0.3, "{mean_burst}");
    }
}
