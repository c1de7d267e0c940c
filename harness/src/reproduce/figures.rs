//! The redrawn figures of a reproduction (SVG): one line per series
//! label, in the same colour in every figure of the paper.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::expr::Stat;
use super::manifest::{Experiment, Figure, Manifest, Selector};
use super::metrics::{bottleneck_signal, selects, RunData};
use super::JobView;

/// A line: label, points, and 95% half-widths (metric figures).
type Line = (String, Vec<(f64, f64)>, Vec<f64>);

/// One colour per label, the same in every figure of a paper: a label
/// that names an algorithm takes the algorithm's colour in every cclab
/// report (`report::palette`); any other label takes, in alphabetical
/// order, a palette colour no algorithm label of the paper uses.
fn colours(m: &Manifest) -> BTreeMap<String, RGBColor> {
    use crate::report::palette;
    let labels: std::collections::BTreeSet<&String> =
        m.figures.iter().flat_map(|f| f.series.keys()).collect();
    let mut out: BTreeMap<String, RGBColor> = labels
        .iter()
        .filter_map(|l| palette::known(l).map(|c| ((*l).clone(), c)))
        .collect();
    let used: Vec<RGBColor> = out.values().copied().collect();
    let mut free = palette::all().filter(|c| !used.contains(c));
    for l in labels {
        if !out.contains_key(l) {
            let c = free.next().unwrap_or_else(|| palette::colour(l));
            out.insert(l.clone(), c);
        }
    }
    out
}

/// Draws the paper's figures; returns the file names written.
pub(crate) fn figures(
    m: &Manifest,
    jobs: &JobView<'_>,
    data: &BTreeMap<PathBuf, Result<RunData, String>>,
    out: &Path,
) -> Vec<String> {
    let mut written = Vec::new();
    if qlog_analysis::plot::ensure_font().is_err() {
        return written;
    }
    let palette = colours(m);
    for f in &m.figures {
        let Some(exp) = m.experiments.iter().position(|e| e.id == f.experiment) else {
            continue;
        };
        let lines = match f.kind.strip_prefix("metric:") {
            Some(metric) => metric_lines(m, f, exp, metric, jobs, data),
            None => signal_lines(f, exp, jobs, data),
        };
        if lines.iter().all(|l| l.1.is_empty()) {
            continue;
        }
        let (xd, yd) = axes_desc(m, f);
        let name = format!("fig-{}.svg", f.id);
        // A study (no paper) titles its figures itself.
        let title = if m.seed.is_empty() {
            f.source.clone()
        } else {
            format!("{} (ours): {}", f.source, f.experiment)
        };
        if let Ok(svg) = chart(&title, &xd, &yd, &lines, &palette) {
            let tmp = out.join(format!(".{name}.tmp"));
            if std::fs::write(&tmp, svg).is_ok() && std::fs::rename(&tmp, out.join(&name)).is_ok() {
                written.push(name);
            }
        }
    }
    written
}

fn axes_desc(m: &Manifest, f: &Figure) -> (String, String) {
    match f.kind.strip_prefix("metric:") {
        Some(metric) => (
            f.along.clone().unwrap_or_default(),
            metric_unit(metric).to_string(),
        ),
        None => {
            let _ = m;
            (
                "time (s)".into(),
                match f.kind.as_str() {
                    "queue_pkts" => "queue (packets)",
                    "utilization" => "utilization (%)",
                    "drops" => "drops (cumulative)",
                    "cwnd" => "cwnd (KB)",
                    "rtt" => "RTT (ms)",
                    _ => "goodput (Mbit/s)",
                }
                .into(),
            )
        }
    }
}

/// The unit of a metric, for axes and tables.
pub(super) fn metric_unit(m: &str) -> &'static str {
    match m {
        "drops" => "drops (packets)",
        "utilization" => "utilization (%)",
        "queue_delay_ms" => "queueing delay (ms)",
        "queue_pkts" => "mean queue (packets)",
        "loss_rate" => "loss rate (%)",
        "delivery_ratio" => "delivery ratio (%)",
        "delivery_first" => "delivery ratio, first flow of each link (%)",
        "queue_delay_first_ms" => "queueing delay, first flow of each link (ms)",
        "smcc_alpha" | "smcc_alpha_min" | "smcc_alpha_max" => "SMCC's alpha at the end",
        "jain" => "Jain's index",
        "goodput_mbps" => "goodput (Mbit/s)",
        "data_mb" => "data received (MB)",
        "rtt_ms" => "RTT (ms)",
        "rtt_p95_ms" => "p95 RTT (ms)",
        "cwnd_cv" => "cwnd CoV",
        "cwnd_kb" => "mean cwnd (KB)",
        "lost" => "packets lost",
        "completion_s" => "completion time (s)",
        "goodput_cv" => "goodput CoV",
        "eq7_mbps" => "equation-7 throughput (Mbit/s)",
        "utilization_steady" => "utilization after 1 s (%)",
        _ => "",
    }
}

fn metric_lines(
    m: &Manifest,
    f: &Figure,
    exp: usize,
    metric: &str,
    jobs: &JobView<'_>,
    data: &BTreeMap<PathBuf, Result<RunData, String>>,
) -> Vec<Line> {
    let e = &m.experiments[exp];
    let along = f.along.as_deref().unwrap_or("");
    let Some(a) = e.axes.iter().find(|a| a.name == along) else {
        return Vec::new();
    };
    let mut lines = Vec::new();
    for (label, s) in &f.series {
        let Ok(sel) = Selector::parse(s) else {
            continue;
        };
        let (mut pts, mut ci) = (Vec::new(), Vec::new());
        for i in 0..a.values.len() {
            let l = Experiment::label(a, i);
            let hit: Vec<_> = jobs
                .iter()
                .filter(|(x, p, _)| {
                    *x == exp && p.matches(&sel) && p.coord(along) == Some(l.as_str())
                })
                .collect();
            let [(_, _, dir)] = hit.as_slice() else {
                continue;
            };
            let Some(Ok(d)) = data.get(*dir) else {
                continue;
            };
            let Ok(v) = d.values_on(metric, sel.flow.as_deref(), sel.link.as_deref()) else {
                continue;
            };
            if let Some(st) = Stat::of(&v) {
                pts.push((Experiment::x(a, i), st.mean));
                ci.push(st.ci95);
            }
        }
        lines.push((label.clone(), pts, ci));
    }
    lines
}

fn signal_lines(
    f: &Figure,
    exp: usize,
    jobs: &JobView<'_>,
    data: &BTreeMap<PathBuf, Result<RunData, String>>,
) -> Vec<Line> {
    let mut lines = Vec::new();
    for (label, s) in &f.series {
        let Ok(sel) = Selector::parse(s) else {
            continue;
        };
        let hit: Vec<_> = jobs
            .iter()
            .filter(|(x, p, _)| *x == exp && p.matches(&sel))
            .collect();
        let [(_, _, dir)] = hit.as_slice() else {
            continue;
        };
        let Some(Ok(d)) = data.get(*dir) else {
            continue;
        };
        let pts = match f.kind.as_str() {
            "queue_pkts" | "utilization" | "drops" => bottleneck_signal(dir, d, &f.kind),
            other => flow_signal(dir, d, sel.flow.as_deref(), other),
        };
        lines.push((label.clone(), thin(pts, 2000), Vec::new()));
    }
    lines
}

/// Keeps at most `n` points (every k-th), so figures stay small.
fn thin(pts: Vec<(f64, f64)>, n: usize) -> Vec<(f64, f64)> {
    if pts.len() <= n {
        return pts;
    }
    let k = pts.len().div_ceil(n);
    pts.into_iter().step_by(k).collect()
}

/// A flow's cwnd (KB) or latest RTT (ms) from its sender's qlog, or its
/// goodput (Mbit/s) from the client's interval reports; repetition 1, the
/// first selected flow.
fn flow_signal(dir: &Path, d: &RunData, flow: Option<&str>, signal: &str) -> Vec<(f64, f64)> {
    let Some(f) = d
        .summary
        .repetitions
        .first()
        .and_then(|r| r.flows.iter().find(|f| selects(flow, f)))
    else {
        return Vec::new();
    };
    let start = f.start_s;
    if signal == "goodput" {
        let i = f.index;
        let p = dir
            .join("rep-1")
            .join(format!("flow-{i}"))
            .join("client.json");
        let v: serde_json::Value = std::fs::read(p)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        return v["intervals"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| {
                        Some((
                            start + x["end_s"].as_f64()?,
                            x["goodput_bps"].as_f64()? / 1e6,
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
    }
    // A Linux TCP flow: its sender's TCP_INFO samples.
    if let Some(rel) = f.tcp_records.get("sender") {
        let recs = crate::scenario::tcp::read_records(&dir.join(rel));
        return crate::scenario::tcp::sender_samples(&recs)
            .iter()
            .filter_map(|x| match signal {
                "cwnd" => Some((start + x.t_s, x.cwnd_bytes / 1e3)),
                "rtt" => Some((start + x.t_s, x.srtt_ms)),
                _ => None,
            })
            .collect();
    }
    let Some(series) = d.sender(f) else {
        return Vec::new();
    };
    match signal {
        "cwnd" => series
            .cwnd
            .iter()
            .map(|&(t, w)| (start + t, w / 1e3))
            .collect(),
        _ => series
            .latest_rtt_ms
            .iter()
            .map(|&(t, r)| (start + t, r))
            .collect(),
    }
}

/// The x range (padded by 5% when points carry error bars) and the
/// largest y (with its error bar) of `lines`.
fn bounds(lines: &[Line]) -> (std::ops::Range<f64>, f64) {
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
    for (_, pts, ci) in lines {
        for (k, &(x, y)) in pts.iter().enumerate() {
            if x.is_finite() && y.is_finite() {
                x0 = x0.min(x);
                x1 = x1.max(x);
                y1 = y1.max(y + ci.get(k).copied().unwrap_or(0.0));
            }
        }
    }
    if x0 > x1 {
        (x0, x1) = (0.0, 1.0);
    }
    if x1 - x0 < 1e-9 {
        x1 = x0 + 1.0;
    }
    let pad = if lines.iter().any(|l| !l.2.is_empty()) {
        (x1 - x0) * 0.05
    } else {
        0.0
    };
    ((x0 - pad)..(x1 + pad), y1)
}

fn chart(
    title: &str,
    xd: &str,
    yd: &str,
    lines: &[Line],
    palette: &BTreeMap<String, RGBColor>,
) -> Result<String, String> {
    let colour = |l: &str| palette.get(l).copied().unwrap_or(BLACK);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (760, 380)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let (plot, legend) = root.split_horizontally(620);
        let (xs, y1) = bounds(lines);
        let mut c = ChartBuilder::on(&plot)
            .caption(title, ("sans-serif", 15))
            .margin(8)
            .x_label_area_size(34)
            .y_label_area_size(56)
            .build_cartesian_2d(xs, 0.0..(y1 * 1.08).max(1e-6))
            .map_err(|e| e.to_string())?;
        c.configure_mesh()
            .x_desc(xd)
            .y_desc(yd)
            .label_style(("sans-serif", 11))
            .draw()
            .map_err(|e| e.to_string())?;
        for (label, pts, ci) in lines {
            draw_line(&mut c, pts, ci, colour(label))?;
        }
        // The legend beside the plot, never over the data.
        for (k, (label, _, _)) in lines.iter().enumerate() {
            let y = 40 + 20 * k as i32;
            let col = colour(label);
            legend
                .draw(&PathElement::new(
                    vec![(6, y), (26, y)],
                    col.stroke_width(3),
                ))
                .map_err(|e| e.to_string())?;
            legend
                .draw(&Text::new(label.clone(), (32, y - 7), ("sans-serif", 12)))
                .map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// One series: its line, and with half-widths `ci` a dot and an error
/// bar at each point.
fn draw_line<DB: DrawingBackend>(
    c: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    pts: &[(f64, f64)],
    ci: &[f64],
    col: RGBColor,
) -> Result<(), String> {
    c.draw_series(LineSeries::new(pts.iter().copied(), col.stroke_width(2)))
        .map_err(|e| e.to_string())?;
    if ci.is_empty() {
        return Ok(());
    }
    c.draw_series(pts.iter().map(|&p| Circle::new(p, 3, col.filled())))
        .map_err(|e| e.to_string())?;
    c.draw_series(
        pts.iter()
            .zip(ci)
            .filter(|(_, h)| **h > 0.0)
            .map(|(&(x, y), h)| {
                PathElement::new(vec![(x, y - h), (x, y + h)], col.stroke_width(1))
            }),
    )
    .map_err(|e| e.to_string())?;
    Ok(())
}
