//! Time series for the small multiples: cwnd, RTT and goodput per flow
//! from the qlogs, queue and drops from the bottleneck log, all of the
//! first repetition, thinned to what a panel can show.

use std::collections::BTreeMap;

use plotters::style::RGBColor;

use super::data::{group_key, runs_per_cc, Run};
use super::palette::{colour, shade};

/// Points kept per line: a panel is a few hundred pixels wide.
const MAX_POINTS_PER_LINE: usize = 400;
/// Panels per figure; more runs than this are left out (and said so).
pub const MAX_PANELS: usize = 48;
/// Lines per panel.
const MAX_LINES: usize = 16;

/// One line of a panel.
pub struct Trace {
    pub colour: RGBColor,
    pub pts: Vec<(f64, f64)>,
}

/// One small multiple.
pub struct Panel {
    pub title: String,
    pub colour: RGBColor,
    pub traces: Vec<Trace>,
    /// Times to mark with a tick along the top (bottleneck drops).
    pub marks: Vec<f64>,
}

/// A figure of small multiples sharing both axes.
pub struct Multiples {
    /// File name stem and HTML id.
    pub name: &'static str,
    pub title: &'static str,
    pub y_unit: &'static str,
    /// What the x axis shows, after the title (`over time (s)`).
    pub x_desc: &'static str,
    pub note: String,
    pub panels: Vec<Panel>,
    /// Algorithm specs drawn, for the legend strip (empty: titles suffice).
    pub legend: Vec<String>,
}

/// What one flow's qlogs give.
struct FlowSeries {
    cc: String,
    index: u64,
    cwnd: Vec<(f64, f64)>,
    rtt: Vec<(f64, f64)>,
    goodput: Vec<(f64, f64)>,
    /// The receiver's goodput per bin, not thinned: (bin start in the
    /// run's time, s; bin length, s; Mbit/s). Empty for Linux TCP flows.
    bins: Vec<(f64, f64, f64)>,
}

/// What one link of a run gives: its queue and the samples with drops.
struct LinkSeries {
    /// Its name (empty for a single-link run's one link).
    name: String,
    queue: Vec<(f64, f64)>,
    drops: Vec<f64>,
}

/// What one run gives (first repetition).
struct RunSeries {
    title: String,
    colour: RGBColor,
    /// Every link, in the scenario's order.
    links: Vec<LinkSeries>,
    flows: Vec<FlowSeries>,
}

/// Keeps the first, lowest, highest and last point of each of `buckets`
/// equal slices of the x range, in their original order: the line's
/// envelope survives (spikes stay), the point count is bounded.
pub fn thin(pts: &[(f64, f64)], buckets: usize) -> Vec<(f64, f64)> {
    if pts.len() <= buckets * 4 || buckets == 0 {
        return pts.to_vec();
    }
    let (x0, x1) = (pts[0].0, pts[pts.len() - 1].0);
    let width = (x1 - x0).max(1e-12) / buckets as f64;
    let mut keep = Vec::with_capacity(buckets * 4);
    let mut start = 0;
    while start < pts.len() {
        let b = ((pts[start].0 - x0) / width).floor();
        let mut end = start + 1;
        while end < pts.len() && ((pts[end].0 - x0) / width).floor() <= b {
            end += 1;
        }
        let slice = &pts[start..end];
        let lo = (0..slice.len()).min_by(|&i, &j| slice[i].1.total_cmp(&slice[j].1));
        let hi = (0..slice.len()).max_by(|&i, &j| slice[i].1.total_cmp(&slice[j].1));
        let mut idx = vec![0, slice.len() - 1];
        idx.extend(lo);
        idx.extend(hi);
        idx.sort_unstable();
        idx.dedup();
        keep.extend(idx.into_iter().map(|i| slice[i]));
        start = end;
    }
    keep
}

/// The mean of `bins` (start, length, value) over [t0, t1), weighted by
/// overlap; None unless the bins cover the whole window.
fn window_mean(bins: &[(f64, f64, f64)], t0: f64, t1: f64) -> Option<f64> {
    let first = bins.first()?;
    let last = bins.last()?;
    if first.0 > t0 + 1e-9 || last.0 + last.1 < t1 - 1e-9 {
        return None;
    }
    let mut sum = 0.0;
    for &(s, len, v) in bins {
        let overlap = (s + len).min(t1) - s.max(t0);
        if overlap > 0.0 {
            sum += v * overlap;
        }
    }
    Some(sum / (t1 - t0))
}

/// A value holds until the next update: extends the last one to `end`
/// (a window that stopped changing still exists).
fn hold_to(mut pts: Vec<(f64, f64)>, end: f64) -> Vec<(f64, f64)> {
    if let Some(&(t, v)) = pts.last() {
        if end > t {
            pts.push((end, v));
        }
    }
    pts
}

/// The smoothed RTT from the first RTT sample on: before it, quiche
/// reports its initial guess (333 ms), which is no measurement and would
/// set the shared axis.
fn measured(s: &qlog_analysis::analysis::Series) -> Vec<(f64, f64)> {
    let first = s.latest_rtt_ms.first().map_or(f64::MIN, |p| p.0);
    s.smoothed_rtt_ms
        .iter()
        .copied()
        .filter(|p| p.0 >= first)
        .collect()
}

fn analyse(path: &std::path::Path) -> Option<qlog_analysis::analysis::Connection> {
    let mut a = qlog_analysis::analysis::Analyzer::new(0.2, true);
    qlog_analysis::read_file(path, &mut a).ok()?;
    a.connections.into_iter().next()
}

fn flow_series(run: &Run, f: &crate::run::FlowResult) -> FlowSeries {
    let start = f.start_s;
    let shift = |pts: Vec<(f64, f64)>| -> Vec<(f64, f64)> {
        thin(&pts, MAX_POINTS_PER_LINE / 4)
            .into_iter()
            .map(|(t, v)| (t + start, v))
            .collect()
    };
    let mut fs = FlowSeries {
        cc: f.cc.clone(),
        index: f.index as u64,
        cwnd: Vec::new(),
        rtt: Vec::new(),
        goodput: Vec::new(),
        bins: Vec::new(),
    };
    if let Some(rel) = f.tcp_records.get("sender") {
        let [cwnd, rtt, goodput] = tcp_series(&run.dir.join(rel));
        fs.cwnd = shift(cwnd);
        fs.rtt = shift(rtt);
        fs.goodput = shift(goodput);
        return fs;
    }
    let qlog = |role: &str| f.qlog.get(role).map(|rel| run.dir.join(rel));
    if let Some(conn) = qlog("sender").and_then(|p| analyse(&p)) {
        let end = conn.end_s;
        fs.cwnd = shift(hold_to(
            qlog_analysis::plot::steps(&conn.series.cwnd, 1e-3),
            end,
        ));
        fs.rtt = shift(hold_to(measured(&conn.series), end));
    }
    if let Some(conn) = qlog("receiver").and_then(|p| analyse(&p)) {
        let bin = conn.bin_s;
        // Each bin (its start from the flow's start, length, Mbit/s):
        // the goodput line at bin midpoints, and the bins themselves in
        // the run's time for Jain's index.
        let rel: Vec<(f64, f64, f64)> = conn
            .bins
            .iter()
            .enumerate()
            .map(|(i, b)| (i as f64 * bin, bin, b.app_received as f64 * 8.0 / bin / 1e6))
            .collect();
        fs.goodput = shift(rel.iter().map(|&(t, l, v)| (t + l / 2.0, v)).collect());
        fs.bins = rel.into_iter().map(|(t, l, v)| (t + start, l, v)).collect();
    }
    fs
}

/// A Linux TCP flow's series from its sender's `TCP_INFO` samples: cwnd
/// (kB, as steps), smoothed RTT (ms), and goodput (Mbit/s per 200 ms bin)
/// from the bytes the receiver acknowledged.
fn tcp_series(sender: &std::path::Path) -> [Vec<(f64, f64)>; 3] {
    let s = crate::scenario::tcp::sender_samples(&crate::scenario::tcp::read_records(sender));
    let end = s.last().map_or(0.0, |x| x.t_s);
    let cwnd: Vec<(f64, f64)> = s.iter().map(|x| (x.t_s, x.cwnd_bytes)).collect();
    let rtt = s
        .iter()
        .filter(|x| x.srtt_ms > 0.0)
        .map(|x| (x.t_s, x.srtt_ms))
        .collect();
    let bin = 0.2;
    let nbins = (end / bin).ceil() as usize;
    let mut acked = vec![0u64; nbins];
    for w in s.windows(2) {
        let i = ((w[1].t_s / bin) as usize).min(nbins.saturating_sub(1));
        if let Some(a) = acked.get_mut(i) {
            *a += w[1].bytes_acked.saturating_sub(w[0].bytes_acked);
        }
    }
    let goodput = acked
        .iter()
        .enumerate()
        .map(|(i, b)| ((i as f64 + 0.5) * bin, *b as f64 * 8.0 / bin / 1e6))
        .collect();
    [
        hold_to(qlog_analysis::plot::steps(&cwnd, 1e-3), end),
        rtt,
        goodput,
    ]
}

/// A run's links, in its scenario's order, each with the directory that
/// holds its samples: the first at `rep-1/`, the others at
/// `rep-1/links/NAME/` (single-link runs: one, unnamed).
fn link_dirs(run: &Run) -> Vec<(String, std::path::PathBuf)> {
    let rep = run.dir.join("rep-1");
    let names: Vec<String> = std::fs::read_to_string(run.dir.join("scenario.toml"))
        .ok()
        .and_then(|t| t.parse::<toml::Table>().ok())
        .and_then(|t| t.get("links").and_then(|l| l.as_array()).cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|l| l.get("name").and_then(|n| n.as_str()).map(String::from))
        .collect();
    if names.is_empty() {
        return vec![(String::new(), rep)];
    }
    names
        .into_iter()
        .enumerate()
        .map(|(i, n)| {
            let d = if i == 0 {
                rep.clone()
            } else {
                rep.join("links").join(&n)
            };
            (n, d)
        })
        .collect()
}

fn run_series(run: &Run, title: String, colour: RGBColor) -> RunSeries {
    let dir = match run.summary.bottleneck.direction.as_str() {
        "" => "down",
        d => d,
    };
    let links = link_dirs(run)
        .into_iter()
        .map(|(name, d)| {
            let samples = crate::bottleneck::read_samples(&d.join("bottleneck-samples.jsonl"))
                .unwrap_or_default();
            let s: Vec<_> = samples.iter().filter(|s| s.dir == dir).collect();
            LinkSeries {
                name,
                queue: s
                    .iter()
                    .map(|s| (s.t_s, s.queue_bytes as f64 / 1e3))
                    .collect(),
                drops: s.iter().filter(|s| s.drops > 0).map(|s| s.t_s).collect(),
            }
        })
        .collect();
    let flows = run
        .summary
        .repetitions
        .first()
        .map(|r| r.flows.as_slice())
        .unwrap_or_default();
    RunSeries {
        title,
        colour,
        links,
        flows: flows
            .iter()
            .take(MAX_LINES)
            .map(|f| flow_series(run, f))
            .collect(),
    }
}

/// A run's panel title and colour: its group's when it runs one
/// algorithm, else its label in neutral grey.
fn run_heading(run: &Run, rpc: &BTreeMap<String, usize>) -> (String, RGBColor) {
    let mut ccs: Vec<&str> = run
        .summary
        .repetitions
        .first()
        .map(|r| r.flows.iter().map(|f| f.cc.as_str()).collect())
        .unwrap_or_default();
    ccs.sort_unstable();
    ccs.dedup();
    match ccs.as_slice() {
        [cc] => (group_key(cc, run, rpc), colour(cc)),
        _ => (run.label.clone(), RGBColor(0x44, 0x44, 0x44)),
    }
}

/// Reads the series of up to [`MAX_PANELS`] runs, on every core.
fn load(runs: &[Run]) -> Vec<RunSeries> {
    let rpc = runs_per_cc(runs);
    let runs = &runs[..runs.len().min(MAX_PANELS)];
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = runs.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = runs
            .chunks(chunk)
            .map(|part| {
                let rpc = &rpc;
                s.spawn(move || {
                    part.iter()
                        .map(|r| {
                            let (t, c) = run_heading(r, rpc);
                            run_series(r, t, c)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    })
}

/// Colours of a panel's flows: the algorithm's, shaded for a second or
/// later flow of the same algorithm in the panel.
fn flow_colours(flows: &[FlowSeries]) -> Vec<RGBColor> {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    flows
        .iter()
        .map(|f| {
            let k = seen.entry(f.cc.as_str()).or_default();
            let c = shade(colour(&f.cc), [0.0, 0.4, -0.35, 0.6, -0.5][*k % 5]);
            *k += 1;
            c
        })
        .collect()
}

/// A flow's time series.
#[derive(Clone, Copy)]
pub enum Signal {
    /// The sender's congestion window.
    Cwnd,
    /// The sender's smoothed RTT.
    Rtt,
    /// The receiver's goodput.
    Goodput,
}

impl Signal {
    fn of(self, f: &FlowSeries) -> &Vec<(f64, f64)> {
        match self {
            Signal::Cwnd => &f.cwnd,
            Signal::Rtt => &f.rtt,
            Signal::Goodput => &f.goodput,
        }
    }
}

/// The series of the first repetition of up to [`MAX_PANELS`] runs, read
/// once for every figure of small multiples.
pub struct Series {
    rs: Vec<RunSeries>,
    /// Runs in the report (some may be left out).
    runs: usize,
}

impl Series {
    /// Reads the runs' series, on every core.
    pub fn load(runs: &[Run]) -> Series {
        Series {
            rs: load(runs),
            runs: runs.len(),
        }
    }

    /// What a panel stands for: a flow (one run of several flows) or a run.
    fn per(&self) -> &'static str {
        if self.rs.len() == 1 && self.rs[0].flows.len() > 1 {
            "flow"
        } else {
            "run"
        }
    }

    /// Says so when runs were left out.
    pub fn left_out(&self) -> String {
        if self.runs > MAX_PANELS {
            format!(
                " Only the first {MAX_PANELS} of {} runs are drawn.",
                self.runs
            )
        } else {
            String::new()
        }
    }

    /// What every figure of flow panels says of its panels.
    pub fn shared_note(&self) -> String {
        format!(
            "One panel per {}, first repetition; all panels share both axes.{}",
            self.per(),
            self.left_out()
        )
    }

    /// The legend of a figure of flow panels: the algorithms drawn when
    /// some run mixes several (per-flow panels are titled with their
    /// algorithm, and one-algorithm runs with theirs: no legend).
    pub fn legend(&self) -> Vec<String> {
        if self.per() == "flow" {
            return Vec::new();
        }
        let rs = &self.rs;
        let mixed = rs
            .iter()
            .any(|r| r.flows.iter().any(|f| f.cc != r.flows[0].cc));
        if !mixed {
            return Vec::new();
        }
        let mut ccs: Vec<String> = rs
            .iter()
            .flat_map(|r| r.flows.iter().map(|f| f.cc.clone()))
            .collect();
        ccs.sort();
        ccs.dedup();
        ccs
    }

    /// One panel of `signal` per run (several runs) or per flow (one run).
    pub fn flow_panels(&self, signal: Signal) -> Vec<Panel> {
        if let [one] = self.rs.as_slice() {
            if one.flows.len() > 1 {
                let colours = flow_colours(&one.flows);
                return one
                    .flows
                    .iter()
                    .zip(colours)
                    .map(|(f, c)| Panel {
                        title: format!("flow {}: {}", f.index, f.cc),
                        colour: c,
                        traces: vec![Trace {
                            colour: c,
                            pts: signal.of(f).clone(),
                        }],
                        marks: Vec::new(),
                    })
                    .collect();
            }
        }
        self.rs
            .iter()
            .map(|r| Panel {
                title: r.title.clone(),
                colour: r.colour,
                traces: r
                    .flows
                    .iter()
                    .zip(flow_colours(&r.flows))
                    .map(|(f, c)| Trace {
                        colour: c,
                        pts: signal.of(f).clone(),
                    })
                    .collect(),
                marks: Vec::new(),
            })
            .collect()
    }

    /// One panel of the bottleneck queue per run and link (a run of
    /// several links has one per link, titled with its name), with its
    /// drops marked.
    pub fn queue_panels(&self) -> Vec<Panel> {
        self.rs
            .iter()
            .flat_map(|r| {
                r.links.iter().map(|l| Panel {
                    title: if l.name.is_empty() {
                        r.title.clone()
                    } else {
                        format!("{}: link {}", r.title, l.name)
                    },
                    colour: r.colour,
                    traces: vec![Trace {
                        colour: r.colour,
                        pts: l.queue.clone(),
                    }],
                    marks: l.drops.clone(),
                })
            })
            .take(MAX_PANELS)
            .collect()
    }

    /// Jain's index over the flows of each run with several, per window of
    /// `window_s`: each flow's mean goodput over the window, from its
    /// receiver's bins, for the flows whose bins cover the whole window
    /// (those running through it). One panel per run.
    pub fn jain_panels(&self, window_s: f64) -> Vec<Panel> {
        self.rs
            .iter()
            .filter(|r| r.flows.iter().filter(|f| !f.bins.is_empty()).count() > 1)
            .map(|r| {
                let end = r
                    .flows
                    .iter()
                    .filter_map(|f| f.bins.last().map(|b| b.0 + b.1))
                    .fold(0.0, f64::max);
                let mut pts = Vec::new();
                let mut t = 0.0;
                while t + window_s <= end + 1e-9 {
                    let rates: Vec<f64> = r
                        .flows
                        .iter()
                        .filter_map(|f| window_mean(&f.bins, t, t + window_s))
                        .collect();
                    if rates.len() > 1 {
                        if let Some(j) = qlog_analysis::summary::jain(&rates) {
                            pts.push((t + window_s, j));
                        }
                    }
                    t += window_s;
                }
                Panel {
                    title: r.title.clone(),
                    colour: r.colour,
                    traces: vec![Trace {
                        colour: r.colour,
                        pts,
                    }],
                    marks: Vec::new(),
                }
            })
            .filter(|p| !p.traces[0].pts.is_empty())
            .take(MAX_PANELS)
            .collect()
    }

    /// Whether some run has several links (the queue figure then has a
    /// panel per link).
    pub fn multi_link(&self) -> bool {
        self.rs.iter().any(|r| r.links.len() > 1)
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn window_means_weigh_bins_by_overlap_and_need_full_cover() {
        // Bins of 0.2 s from 0.5 s: 10, 20, 30, 40, 50 Mbit/s.
        let bins: Vec<(f64, f64, f64)> = (0..5)
            .map(|i| (0.5 + 0.2 * i as f64, 0.2, 10.0 * (i + 1) as f64))
            .collect();
        let m = window_mean(&bins, 0.6, 1.0).unwrap();
        // Half of the first bin, the second, the third: (5·0.1 + ... ) / 0.4.
        assert!(
            (m - (10.0 * 0.1 + 20.0 * 0.2 + 30.0 * 0.1) / 0.4).abs() < 1e-9,
            "{m}"
        );
        assert_eq!(window_mean(&bins, 0.0, 1.0), None);
        assert_eq!(window_mean(&bins, 1.0, 2.0), None);
        assert_eq!(window_mean(&[], 0.0, 1.0), None);
    }

    use super::*;

    #[test]
    fn thinning_bounds_points_and_keeps_extremes() {
        let pts: Vec<(f64, f64)> = (0..10_000)
            .map(|i| {
                (
                    i as f64 * 1e-3,
                    if i == 5_003 { 99.0 } else { (i % 7) as f64 },
                )
            })
            .collect();
        let t = thin(&pts, 100);
        assert!(t.len() <= 400, "{}", t.len());
        assert!(t.contains(&(5.003, 99.0)), "the spike is kept");
        assert_eq!(t.first(), pts.first());
        assert_eq!(t.last(), pts.last());
        assert!(t.windows(2).all(|w| w[0].0 <= w[1].0), "order kept");
        // Short series are left alone.
        assert_eq!(thin(&pts[..50], 100), pts[..50].to_vec());
    }
}
