//! What the report shows, read from result directories: runs, the groups
//! of flows that make a table row and a scatter point, and the time series
//! of the small multiples.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::run::{RepResult, RunSummary};

/// A run found under the given directories.
pub struct Run {
    pub dir: PathBuf,
    pub summary: RunSummary,
    /// A short name: the directory's name without a sweep's `0003-` prefix.
    pub label: String,
}

fn subdirs(d: &Path) -> Vec<PathBuf> {
    let mut subs: Vec<PathBuf> = std::fs::read_dir(d)
        .map(|r| {
            r.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    subs.sort();
    subs
}

fn run_label(dir: &Path) -> String {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string());
    match name.split_once('-') {
        Some((idx, rest)) if !rest.is_empty() && idx.bytes().all(|b| b.is_ascii_digit()) => {
            rest.to_string()
        }
        _ => name,
    }
}

/// Finds run directories (those with a summary.json) at or up to three
/// levels below each path (a sweep keeps its runs in `<out>/runs/<point>`).
pub fn find_runs(dirs: &[PathBuf]) -> Vec<Run> {
    fn visit(d: &Path, depth: usize, out: &mut Vec<Run>) {
        if d.join("summary.json").is_file() {
            match RunSummary::load(d) {
                Ok(summary) => {
                    out.push(Run {
                        dir: d.to_path_buf(),
                        summary,
                        label: run_label(d),
                    });
                    return;
                }
                // Not a run's summary: said, and the directory's own
                // subdirectories are still looked at.
                Err(e) => eprintln!("cclab report: left out: {e}"),
            }
        }
        if depth > 0 {
            for s in subdirs(d) {
                visit(&s, depth - 1, out);
            }
        }
    }
    let mut out = Vec::new();
    for d in dirs {
        visit(d, 3, &mut out);
    }
    out
}

/// Flows of one algorithm in one run, or of one algorithm across runs
/// where it appears in only one: a table row and a scatter point.
#[derive(Default)]
pub struct Group {
    /// The algorithm spec (the colour's key).
    pub cc: String,
    /// Per flow and repetition.
    pub goodput: Vec<f64>,
    pub rtt_mean: Vec<f64>,
    pub rtt_p95: Vec<f64>,
    pub lost: Vec<f64>,
    /// Linux TCP flows: segments retransmitted (they count no losses).
    pub retransmitted: Vec<f64>,
    /// Per repetition.
    pub util: Vec<f64>,
    pub queue: Vec<f64>,
    pub jain: Vec<f64>,
    /// Per repetition: (p95 RTT ms, goodput Mbit/s), each the mean over
    /// the group's flows in that repetition.
    pub reps: Vec<(f64, f64)>,
}

/// The name of the group of algorithm `cc` in `run`: the algorithm alone
/// when it appears in one run only, else with the run's label.
pub fn group_key(cc: &str, run: &Run, runs_per_cc: &BTreeMap<String, usize>) -> String {
    if runs_per_cc.get(cc).copied().unwrap_or(0) > 1 {
        format!("{cc} ({})", run.label)
    } else {
        cc.to_string()
    }
}

/// How many runs each algorithm spec appears in.
pub fn runs_per_cc(runs: &[Run]) -> BTreeMap<String, usize> {
    let mut n: BTreeMap<String, usize> = BTreeMap::new();
    for r in runs {
        let mut ccs: Vec<&str> = r
            .summary
            .repetitions
            .iter()
            .flat_map(|rep| rep.flows.iter().map(|f| f.cc.as_str()))
            .collect();
        ccs.sort_unstable();
        ccs.dedup();
        for cc in ccs {
            *n.entry(cc.to_string()).or_default() += 1;
        }
    }
    n
}

fn add_rep(
    groups: &mut BTreeMap<String, Group>,
    run: &Run,
    rep: &RepResult,
    rpc: &BTreeMap<String, usize>,
) {
    let mut per_group: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for f in &rep.flows {
        let cc = f.cc.as_str();
        let key = group_key(cc, run, rpc);
        let g = groups.entry(key.clone()).or_default();
        g.cc = cc.to_string();
        let goodput = f.goodput_bps;
        g.goodput.push(goodput);
        // Null (not measured: no qlog) stays out of the mean; a group
        // with no measured losses shows none.
        if let Some(l) = f.lost_packets {
            g.lost.push(l as f64);
        }
        if let Some(l) = f.retransmitted_packets {
            g.retransmitted.push(l as f64);
        }
        if let Some(r) = &f.rtt_ms {
            g.rtt_mean.push(r.mean);
            g.rtt_p95.push(r.p95);
            per_group
                .entry(key)
                .or_default()
                .push((r.p95, goodput / 1e6));
        }
    }
    for (key, pts) in per_group {
        let g = groups.get_mut(&key).expect("group made above");
        let n = pts.len() as f64;
        g.reps.push((
            pts.iter().map(|p| p.0).sum::<f64>() / n,
            pts.iter().map(|p| p.1).sum::<f64>() / n,
        ));
        g.util.push(rep.bottleneck.utilization);
        g.queue.push(rep.bottleneck.queue_delay_ms_mean);
        if let Some(j) = rep.jain_fairness {
            g.jain.push(j);
        }
    }
}

/// The groups of every run, by name.
pub fn groups(runs: &[Run]) -> BTreeMap<String, Group> {
    let rpc = runs_per_cc(runs);
    let mut groups = BTreeMap::new();
    for r in runs {
        for rep in &r.summary.repetitions {
            add_rep(&mut groups, r, rep, &rpc);
        }
    }
    groups
}
