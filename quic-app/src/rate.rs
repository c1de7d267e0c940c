//! Application rate limits: a sender that writes its body no faster than a
//! given rate, so the congestion controller under it is application-limited
//! whenever that rate is below the share the network would give it.
//!
//! The rate travels in the request's query, `/bytes/N?rate=BPS` (the server
//! sends) or `/upload?rate=BPS` (the client sends), in bits per second, so
//! the binaries and the simulator apply the same limit from the same text.
//!
//! The limit is a token bucket over body bytes, kept in integer bit·ns so
//! it neither drifts nor depends on how often it is asked: credit accrues
//! at `rate` and is capped at the bucket's depth; the application writes
//! only when at least one piece is available and then writes what the
//! credit allows. A piece is 1000 bytes, or 1 ms of the rate when that is
//! more (so a fast limit wakes the application at most ~1000 times a
//! second); the depth is two pieces or 10 ms of the rate, whichever is
//! more. Over any interval of length `T` the application writes at most
//! `depth + rate·T` bytes, and exactly `rate·T` in the long run when
//! nothing else holds it back.

use std::time::{Duration, Instant};

/// The smallest rate accepted, bit/s.
pub const MIN_RATE_BPS: u64 = 1_000;
/// The largest rate accepted, bit/s.
pub const MAX_RATE_BPS: u64 = 100_000_000_000;

/// bit·ns per byte.
const SCALE: u128 = 8 * 1_000_000_000;

/// A token bucket over body bytes.
#[derive(Clone, Debug)]
pub struct RateLimit {
    rate_bps: u64,
    /// Credit, bit·ns (bytes × 8·10⁹).
    credit: u128,
    /// The bucket's depth, bit·ns.
    cap: u128,
    piece: u64,
    last: Option<Instant>,
}

impl RateLimit {
    /// A full bucket for `rate_bps` bit/s (clamped to the accepted range).
    pub fn new(rate_bps: u64) -> RateLimit {
        let rate_bps = rate_bps.clamp(MIN_RATE_BPS, MAX_RATE_BPS);
        let per_ms = rate_bps / 8 / 1000;
        let piece = per_ms.max(1000);
        let depth = (2 * piece).max(10 * per_ms);
        let cap = depth as u128 * SCALE;
        RateLimit {
            rate_bps,
            credit: cap,
            cap,
            piece,
            last: None,
        }
    }

    /// The rate, bit/s.
    pub fn rate_bps(&self) -> u64 {
        self.rate_bps
    }

    /// The smallest write, bytes (unless less is left to write).
    pub fn piece(&self) -> u64 {
        self.piece
    }

    fn refill(&mut self, now: Instant) {
        if let Some(last) = self.last {
            let dt = now.saturating_duration_since(last).as_nanos();
            self.credit = (self.credit + dt * self.rate_bps as u128).min(self.cap);
        }
        if self.last.is_none_or(|l| now > l) {
            self.last = Some(now);
        }
    }

    /// How many of `left` bytes may be written at `now`: none until a whole
    /// piece (or all of `left`) is available, then all the credit allows.
    pub fn allowed(&mut self, now: Instant, left: u64) -> u64 {
        self.refill(now);
        let avail = (self.credit / SCALE).min(u64::MAX as u128) as u64;
        if avail >= self.piece.min(left) {
            avail.min(left)
        } else {
            0
        }
    }

    /// `n` bytes were written.
    pub fn consume(&mut self, n: u64) {
        self.credit = self.credit.saturating_sub(n as u128 * SCALE);
    }

    /// When a write of `min(piece, left)` bytes becomes possible (`now` or
    /// later), as of the last [`allowed`](Self::allowed) call.
    pub fn next_write(&self, now: Instant, left: u64) -> Instant {
        let want = self.piece.min(left).max(1) as u128 * SCALE;
        let last = self.last.unwrap_or(now);
        if self.credit >= want {
            return last.max(now);
        }
        let ns = (want - self.credit).div_ceil(self.rate_bps as u128);
        (last + Duration::from_nanos(ns.min(u64::MAX as u128) as u64)).max(now)
    }
}

/// The `rate` of a request path's query (`/bytes/1000?rate=2000000`), in
/// bit/s: `Ok(None)` without one, an error naming the value and what is
/// allowed when it is not a whole number of bit/s in range.
pub fn rate_from_path(path: &str) -> Result<Option<u64>, String> {
    let Some((_, query)) = path.split_once('?') else {
        return Ok(None);
    };
    let mut rate = None;
    for pair in query.split('&') {
        if let Some(v) = pair.strip_prefix("rate=") {
            let r = v
                .parse::<u64>()
                .ok()
                .filter(|r| (MIN_RATE_BPS..=MAX_RATE_BPS).contains(r))
                .ok_or_else(|| {
                    format!(
                        "rate=`{v}` is not a rate in bit/s from {MIN_RATE_BPS} to {MAX_RATE_BPS} (a whole number, e.g. rate=2000000)"
                    )
                })?;
            rate = Some(r);
        }
    }
    Ok(rate)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Writes as a sender would: whenever woken, all that is allowed;
    /// then sleeps until the next write is possible. Returns (bytes
    /// written by `end`, wake-ups).
    fn run(rate: u64, left: u64, end: Duration) -> (u64, u64, Vec<(Duration, u64)>) {
        let t0 = Instant::now();
        let mut rl = RateLimit::new(rate);
        let (mut now, mut written, mut wakes) = (t0, 0u64, 0u64);
        let mut writes = Vec::new();
        while now < t0 + end && written < left {
            let n = rl.allowed(now, left - written);
            if n > 0 {
                rl.consume(n);
                written += n;
                writes.push((now - t0, n));
            }
            wakes += 1;
            let next = rl.next_write(now, left - written);
            assert!(next > now || written == left, "a wake-up that cannot write");
            now = next;
        }
        (written, wakes, writes)
    }

    #[test]
    fn long_run_rate_is_exact() {
        // 2 Mbit/s for 10 s: 2.5 MB, plus the bucket's depth (10 ms of
        // the rate, 2500 B) written at once at the start.
        let (written, wakes, writes) = run(2_000_000, u64::MAX, Duration::from_secs(10));
        let want = 2_000_000 / 8 * 10 + 2500;
        assert!(
            written.abs_diff(want) <= 1000,
            "{written} B, want {want} ± one piece"
        );
        // One 1000-byte piece every 4 ms, after the initial burst.
        assert_eq!(writes[0], (Duration::ZERO, 2500));
        assert!(writes[1..].iter().all(|&(_, n)| n == 1000));
        assert_eq!(writes[2].0 - writes[1].0, 4 * MS);
        assert!((2400..2600).contains(&wakes), "{wakes}");
        // A fast limit writes in 1 ms pieces: 800 Mbit/s = 100 kB per ms.
        let (written, wakes, _) = run(800_000_000, u64::MAX, Duration::from_secs(1));
        let want = 100_000_000 + 1_000_000;
        assert!(written.abs_diff(want) <= 100_000, "{written}");
        assert!(wakes <= 1001, "{wakes}");
    }

    #[test]
    fn the_bucket_caps_bursts_and_the_tail_is_not_held_back() {
        let t0 = Instant::now();
        let mut rl = RateLimit::new(8_000_000); // 1 MB/s: 1 kB per ms.
        assert_eq!(rl.allowed(t0, u64::MAX), 10_000); // depth: 10 ms.
        rl.consume(10_000);
        assert_eq!(rl.allowed(t0 + MS / 2, u64::MAX), 0);
        assert_eq!(rl.next_write(t0 + MS / 2, u64::MAX), t0 + MS);
        // A long stall (flow control) does not bank more than the depth.
        assert_eq!(rl.allowed(t0 + 10 * 1000 * MS, u64::MAX), 10_000);
        rl.consume(10_000);
        // The last 300 bytes need not wait for a whole piece.
        let t1 = t0 + 10 * 1000 * MS;
        assert_eq!(rl.next_write(t1, 300), t1 + MS * 3 / 10);
        assert_eq!(rl.allowed(t1 + MS * 3 / 10, 300), 300);
    }

    #[test]
    fn rates_in_paths() {
        assert_eq!(rate_from_path("/bytes/100"), Ok(None));
        assert_eq!(
            rate_from_path("/bytes/100?rate=2000000"),
            Ok(Some(2_000_000))
        );
        assert_eq!(rate_from_path("/upload?x=1&rate=5000"), Ok(Some(5000)));
        for bad in ["/bytes/1?rate=2mbit", "/bytes/1?rate=10", "/upload?rate="] {
            let e = rate_from_path(bad).unwrap_err();
            assert!(e.contains("bit/s from 1000"), "{bad}: {e}");
        }
    }
}
