//! Scheduled link changes: at a time into the run, set a direction's rate,
//! delay, loss or queue limit, black-hole it for a while, or pause it.
//!
//! ```toml
//! [[link.changes]]            # both directions (or [[link.down.changes]])
//! at = "10s"                  # when, from the run's start
//! rate = "5mbit"              # any of: rate, delay, loss, queue
//! [[link.changes]]
//! at = "20s"
//! rate = "20mbit"
//! [[link.changes]]
//! at = "30s"
//! outage = "1s"               # every arrival is lost for 1 s (a black hole)
//! [[link.changes]]
//! at = "5s"
//! every = "10s"               # again at 15 s, 25 s, ...
//! pause = "200ms"             # the link sends nothing for 200 ms; the
//!                             # queue keeps what arrives (a Wi-Fi suspension)
//! ```
//!
//! What each does, from its time on (the link's elements in
//! `elements::pipeline`):
//!
//! - `rate`: packets that start crossing the link at or after the change
//!   take the new rate; one already on the wire finishes at the old one.
//! - `delay`: packets that finish crossing at or after the change take the
//!   new one-way delay (a shorter delay lets them overtake earlier ones
//!   still in flight, as on a path that changed).
//! - `loss`: arrivals meet the new loss model (its own state restarts).
//! - `queue`: arrivals meet the new limit; packets already queued stay.
//!   `1bdp` is resolved against the direction's rate and the link's RTT
//!   as written, not as changed.
//! - `outage`: arrivals are lost (counted as `loss`) for its length.
//! - `pause`: the link starts no packet for its length; arrivals queue
//!   (and meet the queue limit) and leave when it ends.
//! - `aggregate`: packets that leave the link from then on are delivered
//!   in bursts (`period=10ms[,burst=...]`, as the direction's own
//!   `aggregate`), or one by one again with `none`.
//!
//! A change with `every` repeats at that period for as long as the run
//! lasts. Changes are applied in time order; two at the same time in the
//! order written.

use super::units::{format_duration_ns, format_rate, parse_duration_ns, parse_rate};
use super::{err, Aggregation, LinkError, LossModel, QueueLimit};

/// One scheduled change of a direction.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    /// When, ns from the run's start.
    pub at_ns: u64,
    /// Repeats at this period, if set.
    pub every_ns: Option<u64>,
    /// New rate, bit/s.
    pub rate_bps: Option<f64>,
    /// New one-way delay, ns.
    pub delay_ns: Option<u64>,
    /// New loss model.
    pub loss: Option<LossModel>,
    /// New queue limit.
    pub queue: Option<QueueLimit>,
    /// Every arrival is lost for this long, ns.
    pub outage_ns: Option<u64>,
    /// The link starts no packet for this long, ns.
    pub pause_ns: Option<u64>,
    /// New aggregation (`Some(None)`: none from then on).
    pub aggregate: Option<Option<Aggregation>>,
}

const KEYS: &[&str] = &[
    "at",
    "every",
    "rate",
    "delay",
    "loss",
    "queue",
    "outage",
    "pause",
    "aggregate",
];

/// The shortest `every`: changes more often than this are a trace's job.
const MIN_EVERY_NS: u64 = 10_000_000;

impl Change {
    /// Parses one `[[...changes]]` table; `field` names it in errors
    /// (`link.changes[0]`).
    pub(super) fn from_toml(field: &str, t: &toml::Table) -> Result<Change, LinkError> {
        for k in t.keys() {
            if !KEYS.contains(&k.as_str()) {
                return Err(err(
                    &format!("{field}.{k}"),
                    format!("unknown field; allowed: {}", KEYS.join(", ")),
                ));
            }
        }
        let text = |k: &str| -> Result<Option<(String, String)>, LinkError> {
            let f = format!("{field}.{k}");
            t.get(k).map(|v| Ok((super::scalar(&f, v)?, f))).transpose()
        };
        let time = |k: &str, what: &str| -> Result<Option<u64>, LinkError> {
            match text(k)? {
                None => Ok(None),
                Some((s, f)) => parse_duration_ns(&s)
                    .filter(|&v| v <= 86_400_000_000_000)
                    .map(Some)
                    .ok_or_else(|| err(&f, format!("`{s}` is not {what}"))),
            }
        };
        let at_ns =
            time("at", "a time from the run's start such as 10s or 2.5s")?.ok_or_else(|| {
                err(
                    &format!("{field}.at"),
                    "missing: when the change happens, such as at = \"10s\"",
                )
            })?;
        let every_ns = time("every", "a period such as 10s")?;
        if let Some(e) = every_ns {
            if e < MIN_EVERY_NS {
                return Err(err(
                    &format!("{field}.every"),
                    format!(
                        "`{}` is shorter than {}; a capacity that changes faster is a trace (trace = \"...\")",
                        format_duration_ns(e),
                        format_duration_ns(MIN_EVERY_NS)
                    ),
                ));
            }
        }
        let rate_bps = match text("rate")? {
            None => None,
            Some((s, f)) => Some(
                parse_rate(&s)
                    .filter(|&r| (1000.0..=1e11).contains(&r))
                    .ok_or_else(|| {
                        err(
                            &f,
                            format!("`{s}` is not a rate between 1kbit and 100gbit, such as 5mbit"),
                        )
                    })?,
            ),
        };
        let delay_ns = match text("delay")? {
            None => None,
            Some((s, f)) => Some(
                parse_duration_ns(&s)
                    .filter(|&v| v <= 10_000_000_000)
                    .ok_or_else(|| {
                        err(
                            &f,
                            format!("`{s}` is not a one-way delay up to 10s, such as 100ms"),
                        )
                    })?,
            ),
        };
        let loss = match text("loss")? {
            None => None,
            Some((s, f)) => Some(LossModel::parse(&f, &s)?),
        };
        let queue = match text("queue")? {
            None => None,
            Some((s, f)) => Some(super::units::parse_queue_field(&f, &s)?),
        };
        let aggregate = match text("aggregate")? {
            None => None,
            Some((s, f)) => Some(Aggregation::parse(&f, &s)?),
        };
        let outage_ns = time("outage", "a length such as 1s or 200ms")?;
        let pause_ns = time("pause", "a length such as 1s or 200ms")?;
        for (k, v) in [("outage", outage_ns), ("pause", pause_ns)] {
            if v == Some(0) {
                return Err(err(&format!("{field}.{k}"), "must be longer than 0"));
            }
            if let (Some(v), Some(e)) = (v, every_ns) {
                if v >= e {
                    return Err(err(
                        &format!("{field}.{k}"),
                        format!(
                            "`{}` is not shorter than every = \"{}\": the link would never come back",
                            format_duration_ns(v),
                            format_duration_ns(e)
                        ),
                    ));
                }
            }
        }
        let c = Change {
            at_ns,
            every_ns,
            rate_bps,
            delay_ns,
            loss,
            queue,
            outage_ns,
            pause_ns,
            aggregate,
        };
        if c.is_empty() {
            return Err(err(
                field,
                "changes nothing: give at least one of rate, delay, loss, queue, outage, pause, aggregate",
            ));
        }
        Ok(c)
    }

    fn is_empty(&self) -> bool {
        self.rate_bps.is_none()
            && self.delay_ns.is_none()
            && self.loss.is_none()
            && self.queue.is_none()
            && self.outage_ns.is_none()
            && self.pause_ns.is_none()
            && self.aggregate.is_none()
    }

    /// The table [`Change::from_toml`] reads back to the same change.
    pub fn to_toml(&self) -> toml::Table {
        let mut t = toml::Table::new();
        t.insert("at".into(), format_duration_ns(self.at_ns).into());
        if let Some(e) = self.every_ns {
            t.insert("every".into(), format_duration_ns(e).into());
        }
        if let Some(r) = self.rate_bps {
            t.insert("rate".into(), format_rate(r).into());
        }
        if let Some(d) = self.delay_ns {
            t.insert("delay".into(), format_duration_ns(d).into());
        }
        if let Some(l) = self.loss {
            t.insert("loss".into(), l.to_spec().into());
        }
        if let Some(q) = self.queue {
            t.insert("queue".into(), q.to_spec().into());
        }
        if let Some(o) = self.outage_ns {
            t.insert("outage".into(), format_duration_ns(o).into());
        }
        if let Some(p) = self.pause_ns {
            t.insert("pause".into(), format_duration_ns(p).into());
        }
        if let Some(a) = self.aggregate {
            let spec = a.map_or_else(|| "none".to_string(), |a| a.to_spec());
            t.insert("aggregate".into(), spec.into());
        }
        t
    }

    /// Its times up to `until` ns (inclusive), in order.
    pub fn times_until(&self, until: u64) -> impl Iterator<Item = u64> + '_ {
        let every = self.every_ns;
        std::iter::successors(Some(self.at_ns), move |&t| {
            every.and_then(|e| t.checked_add(e))
        })
        .take_while(move |&t| t <= until)
    }
}

/// Parses a direction's `changes` (an array of tables), sorted by time
/// (stable: changes at one time keep the order written).
pub(super) fn parse_changes(field: &str, v: &toml::Value) -> Result<Vec<Change>, LinkError> {
    let arr = v.as_array().ok_or_else(|| {
        err(
            field,
            "expected an array of tables, such as [[link.changes]] with at = \"10s\" and rate = \"5mbit\"",
        )
    })?;
    let mut out = Vec::with_capacity(arr.len());
    for (i, item) in arr.iter().enumerate() {
        let f = format!("{field}[{i}]");
        let t = item
            .as_table()
            .ok_or_else(|| err(&f, "expected a table with at and what changes"))?;
        out.push(Change::from_toml(&f, t)?);
    }
    out.sort_by_key(|c| c.at_ns);
    Ok(out)
}

/// Checks a direction's changes against a run of `duration_ns`: none may
/// come at or after the run's end (it would never happen), and no two
/// outages, nor two pauses, may overlap (the second would silently merge
/// into the first). `field` names the direction's changes in errors
/// (`link.down.changes`).
pub fn check_within(field: &str, changes: &[Change], duration_ns: u64) -> Result<(), LinkError> {
    for c in changes {
        if c.at_ns >= duration_ns {
            return Err(err(
                field,
                format!(
                    "the change at {} is at or after the run's end ({}): it would never happen; allowed: at from 0 to less than the duration",
                    format_duration_ns(c.at_ns),
                    format_duration_ns(duration_ns)
                ),
            ));
        }
    }
    type Len = fn(&Change) -> Option<u64>;
    let kinds: [(&str, &str, Len); 2] = [
        ("outage", "an", |c| c.outage_ns),
        ("pause", "a", |c| c.pause_ns),
    ];
    for (kind, article, len) in kinds {
        let mut spans: Vec<(u64, u64)> = changes
            .iter()
            .filter_map(|c| len(c).map(|l| (c, l)))
            .flat_map(|(c, l)| {
                c.times_until(duration_ns)
                    .map(move |t| (t, t.saturating_add(l)))
            })
            .collect();
        spans.sort_unstable();
        if let Some(w) = spans.windows(2).find(|w| w[1].0 < w[0].1) {
            return Err(err(
                field,
                format!(
                    "the {kind} from {} to {} overlaps the {kind} from {}: give each its own time ({article} {kind} may not begin before the last one ends)",
                    format_duration_ns(w[0].0),
                    format_duration_ns(w[0].1),
                    format_duration_ns(w[1].0)
                ),
            ));
        }
    }
    Ok(())
}

/// The pending times of a direction's changes, earliest first.
#[derive(Clone, Debug, Default)]
pub struct Schedule {
    changes: Vec<Change>,
    /// The next time of each change (`u64::MAX` when it is done).
    next: Vec<u64>,
    /// The earliest of `next` (`u64::MAX`: nothing pending), so that a
    /// link without changes pays one comparison per packet.
    earliest: u64,
}

impl Schedule {
    /// The schedule of `changes`, none yet applied.
    pub fn new(changes: &[Change]) -> Schedule {
        let next: Vec<u64> = changes.iter().map(|c| c.at_ns).collect();
        Schedule {
            earliest: next.iter().copied().min().unwrap_or(u64::MAX),
            next,
            changes: changes.to_vec(),
        }
    }

    /// When the next change is due, if any is.
    pub fn due(&self) -> Option<u64> {
        (self.earliest != u64::MAX).then_some(self.earliest)
    }

    /// The next change due at or before `now` (the earliest; the first
    /// written among equals) and its time, advanced past.
    pub fn pop(&mut self, now: u64) -> Option<(u64, &Change)> {
        if self.earliest > now {
            return None;
        }
        let (i, t) = self
            .next
            .iter()
            .copied()
            .enumerate()
            .filter(|&(_, t)| t <= now && t != u64::MAX)
            .min_by_key(|&(i, t)| (t, i))?;
        self.next[i] = match self.changes[i].every_ns {
            Some(e) => t.saturating_add(e),
            None => u64::MAX,
        };
        self.earliest = self.next.iter().copied().min().unwrap_or(u64::MAX);
        Some((t, &self.changes[i]))
    }
}
