//! A token-bucket policer on a direction's arrivals
//! ([`crate::link::Policer`] describes it).
//!
//! Tokens are kept exactly, in bit·ns per second units (a byte is worth
//! `8·10⁹`, and the bucket gains `rate` per ns), so no rounding drifts
//! over a long run.

/// The bucket.
#[derive(Clone, Debug)]
pub struct TokenBucket {
    rate_bps: u128,
    cap: u128,
    tokens: u128,
    last_ns: u64,
}

const BYTE: u128 = 8 * 1_000_000_000;

impl TokenBucket {
    /// A full bucket of `burst_bytes` that fills at `rate_bps`.
    pub fn new(rate_bps: f64, burst_bytes: u64) -> TokenBucket {
        let cap = burst_bytes as u128 * BYTE;
        TokenBucket {
            rate_bps: rate_bps.round().max(1.0) as u128,
            cap,
            tokens: cap,
            last_ns: 0,
        }
    }

    /// Whether a packet of `len` bytes arriving at `now` conforms; if it
    /// does it takes its tokens. Times must not go backwards (an earlier
    /// one is taken as the last).
    pub fn conform(&mut self, len: usize, now: u64) -> bool {
        if now > self.last_ns {
            let gained = self.rate_bps * (now - self.last_ns) as u128;
            self.tokens = self.tokens.saturating_add(gained).min(self.cap);
            self.last_ns = now;
        }
        let cost = len as u128 * BYTE;
        if self.tokens >= cost {
            self.tokens -= cost;
            true
        } else {
            false
        }
    }

    /// Bytes in the bucket at the last arrival.
    pub fn tokens_bytes(&self) -> u64 {
        (self.tokens / BYTE) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_bucket_passes_its_burst_then_the_rate() {
        // 8 Mbit/s = 1000 bytes per ms; a 10,000-byte bucket.
        let mut b = TokenBucket::new(8e6, 10_000);
        let passed = (0..20).filter(|_| b.conform(1000, 0)).count();
        assert_eq!(passed, 10);
        // Offered at twice the rate from then on: half conforms.
        let mut ok = 0;
        for i in 1..=2000u64 {
            if b.conform(1000, i * 500_000) {
                ok += 1;
            }
        }
        assert_eq!(ok, 1000);
        // Idle for long: the bucket holds its depth, not more.
        b.conform(0, 10_000_000_000);
        assert_eq!(b.tokens_bytes(), 10_000);
        // A packet larger than what is left is dropped and takes nothing.
        let mut b = TokenBucket::new(8e6, 1500);
        assert!(b.conform(1000, 0));
        assert!(!b.conform(1000, 0));
        assert_eq!(b.tokens_bytes(), 500);
        assert!(b.conform(1000, 500_000));
    }
}
