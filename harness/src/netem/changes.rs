//! Scheduled link changes (`[[link.changes]]`, [`crate::link::changes::Change`]) on
//! the kernel's qdiscs: at each change's time the netem sampler's thread
//! runs the `tc` commands that give the direction its new rate, delay,
//! loss or queue, or pause or black-hole it, and logs when they took
//! effect (`link-changes.jsonl` beside the samples).
//!
//! What each change becomes, on one link (the [`super`] layout):
//!
//! - `rate`: the shaper's new rate (`tbf` at the root changed in place, or
//!   the `htb` class alone), and netem's queue `limit`, which follows the
//!   rate;
//! - `queue`: the shaper's new byte limit (`tbf`, or the `htb` leaf:
//!   `bfifo`, `pfifo`, `red`, `codel`, `fq_codel` or `pie` changed in
//!   place), a BDP multiple resolved against the rate and RTT as written,
//!   as on the emulator. Unlike the emulator, the kernel's RED restarts its
//!   queue and average on a change, and CoDel, fq_codel and PIE drop from
//!   the head what a lowered limit no longer holds;
//! - `delay`, `loss`: netem's new delay or loss model (netem changed in
//!   place, its queued packets kept; installed with its segmenter at the
//!   first change that needs it);
//! - `outage`: netem loses every packet (`loss random 100%`) for the
//!   outage's length, then takes the direction's loss model back;
//! - `pause`: the shaper's rate drops to [`PAUSE_RATE_BPS`] for the
//!   pause's length, then comes back to the rate in force (a rate change
//!   within the pause takes effect at its end). Its queue keeps taking
//!   packets up to its limit, as on sim and emu. Where the kernel differs:
//!   a `tbf` refills its bucket when changed, so up to two packets may
//!   leave as the pause begins (an `htb` class keeps its tokens and lets
//!   none), and as it ends a full bucket lets the shaper's burst (1 ms of
//!   the rate on a host, 10 ms in the guest) leave at once, where sim and
//!   emu resume at the rate.
//!
//! A change of `aggregate` has no kernel counterpart here and is refused
//! by [`super::check_link`], as are changes on several links.
//!
//! The commands go through the sampler's `tc -batch` processes (one per
//! namespace, already running), and a query of the changed device follows
//! them: its answer comes once the kernel has taken the change, which is
//! the time logged as `applied_s`.

use super::tc::{needs_netem, netem_args, segmenter_args, shaper_args_for};
use crate::link::changes::Schedule;
use crate::link::{Dir, DirectionSpec, LinkSpec, LossModel};

/// The log of when each change took effect, beside the samples: one
/// [`Applied`] per line.
pub const LOG: &str = "link-changes.jsonl";

/// One line of [`LOG`]: a change of one direction and when the kernel had
/// taken it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Applied {
    /// When it was due, s from the samples' start.
    pub at_s: f64,
    /// When the kernel had taken it (the answer to the query that
    /// followed its commands), s from the same start.
    pub applied_s: f64,
    /// `up` or `down`.
    pub dir: String,
    /// What changed, as the scenario says it (`rate=5mbit`).
    pub what: String,
    /// The tc lines that made it.
    pub commands: Vec<String>,
}

impl Applied {
    /// The lines of a log that read as changes (others are skipped).
    pub fn read(log: &str) -> Vec<Applied> {
        log.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

/// The shaper's rate during a pause, 1 kbit/s: a 1392-byte frame needs
/// 11 s of it, so nothing leaves in a pause of any sensible length
/// (tc's token bucket needs a rate above zero).
pub const PAUSE_RATE_BPS: f64 = 1000.0;

/// Where one direction's qdiscs are: the shaper's namespace and device,
/// and netem's (the sending endpoint's).
#[derive(Clone, Debug)]
pub struct Place {
    /// The shaper's namespace.
    pub shaper_ns: String,
    /// The shaper's device.
    pub shaper_dev: String,
    /// netem's namespace.
    pub netem_ns: String,
    /// netem's device.
    pub netem_dev: String,
}

/// One change as `tc` commands.
#[derive(Clone, Debug, PartialEq)]
pub struct TcChange {
    /// When, ns from the run's start (the sampler's start).
    pub at_ns: u64,
    /// The direction it changes.
    pub dir: Dir,
    /// What changed, as the scenario says it (`rate=5mbit`).
    pub what: String,
    /// (namespace, arguments after `-n NAMESPACE`), in order.
    pub commands: Vec<(String, Vec<String>)>,
}

/// One direction's changes, turned into commands one due time at a time
/// (a change with `every` repeats for as long as the run lasts).
#[derive(Clone, Debug)]
struct DirPlan {
    dir: Dir,
    place: Place,
    /// The link as written (BDP multiples resolve against it).
    link: LinkSpec,
    /// The direction now.
    now: DirectionSpec,
    sched: Schedule,
    /// When the outage under way ends.
    outage_end: Option<u64>,
    /// When the pause under way ends.
    pause_end: Option<u64>,
    /// Whether netem is installed.
    netem_on: bool,
    seed: Option<u64>,
    mtu: u64,
}

impl DirPlan {
    fn due(&self) -> Option<u64> {
        [self.sched.due(), self.outage_end, self.pause_end]
            .into_iter()
            .flatten()
            .min()
    }

    /// The commands due at the earliest time.
    fn fire(&mut self) -> Option<TcChange> {
        let t = self.due()?;
        let mut what = Vec::new();
        let (mut shaper, mut netem, mut rate_only) = (false, false, false);
        if self.outage_end.is_some_and(|e| e <= t) {
            // The outage ends first when a change comes at the same time.
            self.outage_end = None;
            netem = true;
            what.push("outage ends".to_string());
        } else if self.pause_end.is_some_and(|e| e <= t) {
            // So does a pause: the shaper takes the rate in force again.
            self.pause_end = None;
            (shaper, rate_only) = (true, true);
            what.push("pause ends".to_string());
        } else {
            let (_, c) = self.sched.pop(t)?;
            let c = c.clone();
            if let Some(r) = c.rate_bps {
                self.now.rate_bps = r;
                rate_only = c.queue.is_none();
                shaper = true;
                // netem's limit follows the rate.
                netem = self.netem_on;
                what.push(format!("rate={}", crate::link::units::format_rate(r)));
            }
            if let Some(x) = c.delay_ns {
                self.now.delay_ns = x;
                netem = true;
                what.push(format!(
                    "delay={}",
                    crate::link::units::format_duration_ns(x)
                ));
            }
            if let Some(l) = c.loss {
                what.push(format!("loss={}", l.to_spec()));
                self.now.loss = l;
                netem = true;
            }
            if let Some(q) = c.queue {
                self.now.queue = q;
                shaper = true;
                what.push(format!("queue={}", q.to_spec()));
            }
            if let Some(ps) = c.pause_ns {
                self.pause_end = Some(t.saturating_add(ps));
                shaper = true;
                rate_only = c.queue.is_none();
                what.push(format!(
                    "pause={}",
                    crate::link::units::format_duration_ns(ps)
                ));
            }
            if let Some(o) = c.outage_ns {
                self.outage_end = Some(t.saturating_add(o));
                netem = true;
                what.push(format!(
                    "outage={}",
                    crate::link::units::format_duration_ns(o)
                ));
            }
        }
        let p = &self.place;
        let mut cmds = Vec::new();
        if shaper {
            let limit = self.link.limit_bytes(self.dir, self.now.queue, self.mtu);
            // In a pause the shaper runs at PAUSE_RATE_BPS: its queue
            // keeps taking packets, and none leaves.
            let mut shaped = self.now.clone();
            if self.pause_end.is_some() {
                shaped.rate_bps = PAUSE_RATE_BPS;
            }
            let mut s = shaper_args_for(&p.shaper_ns, &p.shaper_dev, &shaped, limit, self.mtu);
            // With htb the class and the leaf change; the root (which
            // has no parameters to change, and no change operation)
            // stays; a new rate alone changes the class only (changing a
            // leaf restarts RED's queue and average in the kernel).
            if s.len() == 3 {
                s.remove(0);
                if rate_only {
                    s.truncate(1);
                }
            }
            cmds.extend(s);
        }
        if netem {
            let mut e = self.now.clone();
            if self.outage_end.is_some() {
                e.loss = LossModel::Random(1.0);
            }
            if !self.netem_on {
                cmds.push(segmenter_args(&p.netem_ns, &p.netem_dev));
                self.netem_on = true;
            }
            cmds.push(netem_args(&p.netem_ns, &p.netem_dev, &e, self.seed));
        }
        let commands: Vec<(String, Vec<String>)> = cmds
            .into_iter()
            .map(|c| (c[1].clone(), c[2..].to_vec()))
            .collect();
        Some(TcChange {
            at_ns: t,
            dir: self.dir,
            what: what.join(" "),
            commands,
        })
    }
}

/// A link's changes in both directions, earliest first.
#[derive(Clone, Debug, Default)]
pub struct Planner {
    dirs: Vec<DirPlan>,
}

impl Planner {
    /// The changes of `link` on the qdiscs at `place(dir)`; `impairments`:
    /// whether the link has its netem qdiscs (a link built with its shapers
    /// only has none, and takes no delay, loss or outage change); `seeded`:
    /// whether netem takes a seed (as [`super::KernelNet::setup`] gave it).
    pub fn new(
        link: &LinkSpec,
        mtu: u64,
        impairments: bool,
        seeded: bool,
        place: impl Fn(Dir) -> Place,
    ) -> Planner {
        let dirs = [Dir::Up, Dir::Down]
            .into_iter()
            .filter(|&dir| !link.dir(dir).changes.is_empty())
            .map(|dir| {
                let d = link.dir(dir);
                DirPlan {
                    dir,
                    place: place(dir),
                    link: link.clone(),
                    now: d.clone(),
                    sched: Schedule::new(&d.changes),
                    outage_end: None,
                    pause_end: None,
                    netem_on: impairments && needs_netem(d),
                    seed: seeded.then_some(link.seed ^ dir as u64),
                    mtu,
                }
            })
            .collect();
        Planner { dirs }
    }

    /// When the next change is due, ns from the start.
    pub fn due(&self) -> Option<u64> {
        self.dirs.iter().filter_map(DirPlan::due).min()
    }

    /// The next change (of the direction whose change is due first; up
    /// before down at the same time).
    pub fn fire(&mut self) -> Option<TcChange> {
        let t = self.due()?;
        self.dirs.iter_mut().find(|d| d.due() == Some(t))?.fire()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(text: &str) -> LinkSpec {
        let t: toml::Table = toml::from_str(text).unwrap();
        LinkSpec::from_toml(&t, std::path::Path::new("."), "link").unwrap()
    }

    fn place(dir: Dir) -> Place {
        let s = dir.as_str();
        Place {
            shaper_ns: "r".into(),
            shaper_dev: format!("sh-{s}"),
            netem_ns: "e".into(),
            netem_dev: format!("ne-{s}"),
        }
    }

    fn lines(c: &TcChange) -> Vec<String> {
        c.commands
            .iter()
            .map(|(ns, a)| format!("{ns}: {}", a.join(" ")))
            .collect()
    }

    #[test]
    fn a_rate_step_down_and_back_changes_the_shaper_in_place() {
        let l = link(
            "rate = \"20mbit\"\nrtt = \"40ms\"\nqueue = \"1bdp\"\n[[down.changes]]\nat = \"5s\"\nrate = \"5mbit\"\n[[down.changes]]\nat = \"10s\"\nrate = \"20mbit\"\n",
        );
        let mut p = Planner::new(&l, 1500, true, false, place);
        assert_eq!(p.due(), Some(5_000_000_000));
        let c = p.fire().unwrap();
        assert_eq!(
            (c.at_ns, c.dir, c.what.as_str()),
            (5_000_000_000, Dir::Down, "rate=5mbit")
        );
        // Drop-tail with a byte limit is a tbf, changed in place; the
        // queue keeps its 1 BDP of the rate as written (100 000 bytes),
        // and netem (the link's delay) takes a limit for the new rate.
        let l1 = lines(&c);
        assert!(
            l1[0].starts_with("r: qdisc replace dev sh-down root handle 1: tbf rate 5000000bit"),
            "{l1:?}"
        );
        assert!(l1[0].ends_with("limit 100000"), "{l1:?}");
        assert!(
            l1[1].starts_with("e: qdisc replace dev ne-down parent 1:1 handle 10: netem"),
            "{l1:?}"
        );
        let c = p.fire().unwrap();
        assert_eq!((c.at_ns, c.what.as_str()), (10_000_000_000, "rate=20mbit"));
        assert_eq!(p.fire(), None);
    }

    #[test]
    fn under_htb_the_class_and_leaf_change_and_the_root_stays() {
        let l = link(
            "rate = \"20mbit\"\nrtt = \"40ms\"\nqueue = \"1bdp\"\naqm = \"codel\"\n[[changes]]\nat = \"1s\"\nrate = \"10mbit\"\nqueue = \"50pkt\"\n",
        );
        let mut p = Planner::new(&l, 1500, true, false, place);
        let up = p.fire().unwrap();
        let down = p.fire().unwrap();
        assert_eq!((up.dir, down.dir), (Dir::Up, Dir::Down));
        let l1 = lines(&down);
        assert!(
            l1[0].starts_with(
                "r: class replace dev sh-down parent 1: classid 1:1 htb rate 10000000bit"
            ),
            "{l1:?}"
        );
        assert!(
            l1[1].starts_with("r: qdisc replace dev sh-down parent 1:1 handle 10: codel limit 50 "),
            "{l1:?}"
        );
        assert!(!l1.iter().any(|c| c.contains(" htb default ")), "{l1:?}");
        // A new rate alone changes the class only: changing the leaf
        // would restart RED's queue and average in the kernel.
        let l = link(
            "rate = \"20mbit\"\nrtt = \"40ms\"\naqm = \"red\"\n[[down.changes]]\nat = \"1s\"\nrate = \"10mbit\"\n",
        );
        let c = Planner::new(&l, 1500, true, false, place).fire().unwrap();
        let l1 = lines(&c);
        assert!(l1[0].starts_with("r: class replace dev sh-down"), "{l1:?}");
        assert!(!l1.iter().any(|c| c.contains(" red ")), "{l1:?}");
    }

    #[test]
    fn an_outage_loses_everything_then_gives_the_loss_model_back() {
        let l = link(
            "rate = \"20mbit\"\nrtt = \"40ms\"\nloss = \"1%\"\n[[down.changes]]\nat = \"2s\"\nevery = \"5s\"\noutage = \"1s\"\n",
        );
        let mut p = Planner::new(&l, 1500, true, true, place);
        let times: Vec<(u64, String)> = (0..4)
            .map(|_| p.fire().unwrap())
            .map(|c| {
                let netem = lines(&c).last().unwrap().clone();
                (c.at_ns / 1_000_000, netem)
            })
            .collect();
        assert_eq!(
            times.iter().map(|t| t.0).collect::<Vec<_>>(),
            [2000, 3000, 7000, 8000]
        );
        assert!(times[0].1.contains("loss random 100%"), "{times:?}");
        assert!(times[1].1.contains("loss random 1%"), "{times:?}");
        assert!(times[1].1.contains(" seed "), "{times:?}");
        // It repeats for as long as the run lasts.
        assert_eq!(p.due(), Some(12_000_000_000));
    }

    #[test]
    fn a_pause_cuts_the_shapers_rate_and_gives_it_back() {
        // Paused 100 ms every 2 s from 1 s; the rate goes to 5 Mbit/s at
        // 3.05 s, in the second pause: that pause still holds, and its end
        // gives the new rate. netem is not touched.
        let l = link(
            "rate = \"20mbit\"\nrtt = \"40ms\"\naqm = \"codel\"\n[[down.changes]]\nat = \"1s\"\nevery = \"2s\"\npause = \"100ms\"\n[[down.changes]]\nat = \"3050ms\"\nrate = \"5mbit\"\n",
        );
        let mut p = Planner::new(&l, 1500, true, false, place);
        let got: Vec<(u64, String, Vec<String>)> = (0..5)
            .map(|_| p.fire().unwrap())
            .map(|c| (c.at_ns / 1_000_000, c.what.clone(), lines(&c)))
            .collect();
        let at: Vec<(u64, &str)> = got.iter().map(|g| (g.0, g.1.as_str())).collect();
        assert_eq!(
            at,
            [
                (1000, "pause=100ms"),
                (1100, "pause ends"),
                (3000, "pause=100ms"),
                (3050, "rate=5mbit"),
                (3100, "pause ends")
            ]
        );
        let class = |i: usize| got[i].2[0].clone();
        assert!(
            class(0).contains("htb rate 1000bit ceil 1000bit"),
            "{got:?}"
        );
        assert!(class(1).contains("htb rate 20000000bit"), "{got:?}");
        assert!(class(3).contains("htb rate 1000bit"), "{got:?}");
        assert!(class(4).contains("htb rate 5000000bit"), "{got:?}");
        // The pause changes the class alone; the rate change in it takes
        // netem's limit along, as every rate change does.
        assert_eq!(got[0].2.len(), 1, "{got:?}");
        assert!(got[3].2.iter().any(|c| c.starts_with("e: ")), "{got:?}");
    }

    #[test]
    fn a_delay_jump_installs_netem_where_there_was_none() {
        let l = link("rate = \"20mbit\"\ndelay = \"0ms\"\n[[down.changes]]\nat = \"1s\"\ndelay = \"100ms\"\n");
        let mut p = Planner::new(&l, 1500, true, false, place);
        let c = p.fire().unwrap();
        let l1 = lines(&c);
        assert_eq!(l1.len(), 2, "{l1:?}");
        assert!(
            l1[0].starts_with("e: qdisc replace dev ne-down root handle 1: tbf"),
            "{l1:?}"
        );
        assert!(l1[1].contains("delay 100ms"), "{l1:?}");
    }
}
