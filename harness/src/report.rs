//! `cclab report`: one self-contained HTML file (or Markdown) from result
//! directories: a per-algorithm table with 95% confidence intervals, the
//! throughput / delay scatter with one-sigma ellipses per algorithm (as
//! Pantheon draws it: delay axis reversed, so better is up and right),
//! cwnd, RTT and goodput over time per flow, and the bottleneck's queue and
//! drops over time. Charts are inline SVG; nothing is fetched from a CDN.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plotters::prelude::*;
use serde_json::Value;

use crate::run::mean_ci;

/// A chart line: label, points, colour.
type Line = (String, Vec<(f64, f64)>, RGBColor);

/// A run found under the given directories.
struct Run {
    dir: PathBuf,
    summary: Value,
}

/// Finds run directories (those with a summary.json) at or one or two
/// levels below each path.
fn find_runs(dirs: &[PathBuf]) -> Vec<Run> {
    let mut out = Vec::new();
    let mut visit = |d: &Path| {
        if let Ok(text) = std::fs::read_to_string(d.join("summary.json")) {
            if let Ok(summary) = serde_json::from_str(&text) {
                out.push(Run {
                    dir: d.to_path_buf(),
                    summary,
                });
            }
        }
    };
    for d in dirs {
        visit(d);
        let mut subs: Vec<PathBuf> = std::fs::read_dir(d)
            .map(|r| {
                r.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.is_dir())
                    .collect()
            })
            .unwrap_or_default();
        subs.sort();
        for s in subs {
            visit(&s);
            let mut subs2: Vec<PathBuf> = std::fs::read_dir(&s)
                .map(|r| {
                    r.filter_map(|e| e.ok().map(|e| e.path()))
                        .filter(|p| p.is_dir() && p.join("summary.json").exists())
                        .collect()
                })
                .unwrap_or_default();
            subs2.sort();
            for s2 in subs2 {
                visit(&s2);
            }
        }
    }
    out
}

#[derive(Default)]
struct Alg {
    goodput: Vec<f64>,
    rtt_mean: Vec<f64>,
    rtt_p95: Vec<f64>,
    lost: Vec<f64>,
    util: Vec<f64>,
    queue: Vec<f64>,
    jain: Vec<f64>,
    points: Vec<(f64, f64)>,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn num(v: &Value) -> Option<f64> {
    v.as_f64()
}

fn collect(runs: &[Run]) -> BTreeMap<String, Alg> {
    let mut algs: BTreeMap<String, Alg> = BTreeMap::new();
    for r in runs {
        let Some(reps) = r.summary["repetitions"].as_array() else {
            continue;
        };
        for rep in reps {
            let util = num(&rep["bottleneck"]["utilization"]);
            let queue = num(&rep["bottleneck"]["queue_delay_ms_mean"]);
            let jain = num(&rep["jain_fairness"]);
            let mut seen = Vec::new();
            for f in rep["flows"].as_array().into_iter().flatten() {
                let cc = f["cc"].as_str().unwrap_or("?").to_string();
                let a = algs.entry(cc.clone()).or_default();
                let g = num(&f["goodput_bps"]).unwrap_or(0.0);
                a.goodput.push(g);
                if let Some(m) = num(&f["rtt_ms"]["mean"]) {
                    a.rtt_mean.push(m);
                }
                if let Some(p) = num(&f["rtt_ms"]["p95"]) {
                    a.rtt_p95.push(p);
                    a.points.push((p, g / 1e6));
                }
                a.lost.push(num(&f["lost_packets"]).unwrap_or(0.0));
                if !seen.contains(&cc) {
                    seen.push(cc.clone());
                    if let Some(u) = util {
                        a.util.push(u);
                    }
                    if let Some(q) = queue {
                        a.queue.push(q);
                    }
                    if let Some(j) = jain {
                        a.jain.push(j);
                    }
                }
            }
        }
    }
    algs
}

fn fmt_ci(xs: &[f64], scale: f64, digits: usize) -> String {
    if xs.is_empty() {
        return "–".into();
    }
    let (m, h) = mean_ci(xs);
    if xs.len() > 1 {
        format!("{:.*} ± {:.*}", digits, m * scale, digits, h * scale)
    } else {
        format!("{:.*}", digits, m * scale)
    }
}

fn color(i: usize) -> RGBColor {
    let c = Palette99::pick(i).to_rgba();
    RGBColor(c.0, c.1, c.2)
}

/// One-sigma ellipse of points: (center, radii along the principal axes, angle).
fn ellipse(points: &[(f64, f64)]) -> Option<Vec<(f64, f64)>> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx = points.iter().map(|p| (p.0 - mx).powi(2)).sum::<f64>() / (n - 1.0);
    let syy = points.iter().map(|p| (p.1 - my).powi(2)).sum::<f64>() / (n - 1.0);
    let sxy = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>() / (n - 1.0);
    // Eigen-decomposition of the 2×2 covariance.
    let tr = sxx + syy;
    let det = sxx * syy - sxy * sxy;
    let disc = (tr * tr / 4.0 - det).max(0.0).sqrt();
    let (l1, l2) = (tr / 2.0 + disc, (tr / 2.0 - disc).max(0.0));
    let theta = if sxy.abs() < 1e-12 {
        if sxx >= syy {
            0.0
        } else {
            std::f64::consts::FRAC_PI_2
        }
    } else {
        (l1 - sxx).atan2(sxy)
    };
    let (a, b) = (l1.sqrt(), l2.sqrt());
    Some(
        (0..=64)
            .map(|k| {
                let t = k as f64 / 64.0 * std::f64::consts::TAU;
                let (x, y) = (a * t.cos(), b * t.sin());
                (
                    mx + x * theta.cos() - y * theta.sin(),
                    my + x * theta.sin() + y * theta.cos(),
                )
            })
            .collect(),
    )
}

fn svg_chart(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    lines: &[Line],
    reversed_x: bool,
) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 420)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
        for (_, pts, _) in lines {
            for &(x, y) in pts {
                if x.is_finite() && y.is_finite() {
                    x0 = x0.min(x);
                    x1 = x1.max(x);
                    y1 = y1.max(y);
                }
            }
        }
        if x0 > x1 {
            x0 = 0.0;
            x1 = 1.0;
        }
        if x1 - x0 < 1e-9 {
            x1 = x0 + 1.0;
        }
        let pad = (x1 - x0) * 0.05;
        let (xa, xb) = if reversed_x {
            (x1 + pad, (x0 - pad).max(0.0))
        } else {
            (x0.min(0.0), x1)
        };
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(60)
            .build_cartesian_2d(xa..xb, 0.0..(y1 * 1.1).max(1e-6))
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .label_style(("sans-serif", 12))
            .draw()
            .map_err(|e| e.to_string())?;
        for (label, pts, c) in lines {
            if pts.is_empty() {
                continue;
            }
            let style = c.stroke_width(2);
            if label.ends_with("·") {
                // Points only (the scatter's samples).
                chart
                    .draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.mix(0.5).filled())))
                    .map_err(|e| e.to_string())?;
                continue;
            }
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), style))
                .map_err(|e| e.to_string())?
                .label(label.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], style));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 11))
            .draw()
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// Writes the report for the runs under `dirs` to `out` (`.md` for
/// Markdown, anything else HTML).
pub fn write(dirs: &[PathBuf], out: &Path) -> Result<usize, String> {
    let runs = find_runs(dirs);
    if runs.is_empty() {
        return Err(format!(
            "no results (summary.json) under {}",
            dirs.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let algs = collect(&runs);
    let markdown = out.extension().is_some_and(|e| e == "md");
    let mut table = String::new();
    if markdown {
        table += "| algorithm | flows | goodput (Mbit/s) | RTT mean (ms) | RTT p95 (ms) | utilization (%) | queueing delay (ms) | lost packets | Jain's index |\n|---|---|---|---|---|---|---|---|---|\n";
    } else {
        table += "<table><tr><th>algorithm</th><th>flows</th><th>goodput (Mbit/s)</th><th>RTT mean (ms)</th><th>RTT p95 (ms)</th><th>utilization (%)</th><th>queueing delay (ms)</th><th>lost packets</th><th>Jain's index</th></tr>\n";
    }
    for (cc, a) in &algs {
        let cells = [
            cc.clone(),
            a.goodput.len().to_string(),
            fmt_ci(&a.goodput, 1e-6, 2),
            fmt_ci(&a.rtt_mean, 1.0, 1),
            fmt_ci(&a.rtt_p95, 1.0, 1),
            fmt_ci(&a.util, 100.0, 1),
            fmt_ci(&a.queue, 1.0, 1),
            fmt_ci(&a.lost, 1.0, 0),
            fmt_ci(&a.jain, 1.0, 3),
        ];
        if markdown {
            let _ = writeln!(table, "| {} |", cells.join(" | "));
        } else {
            let _ = writeln!(
                table,
                "<tr>{}</tr>",
                cells
                    .iter()
                    .map(|c| format!("<td>{}</td>", esc(c)))
                    .collect::<String>()
            );
        }
    }
    if !markdown {
        table += "</table>\n";
    }
    let note = "Values are means over flows (goodput, RTT, loss) or repetitions (utilization, queueing delay, fairness) with 95% confidence half-widths (Student t) where there is more than one.";
    if markdown {
        let doc = format!("# cclab report\n\n{} run(s).\n\n{table}\n{note}\n\nCharts are in the HTML report (`cclab report ... --out report.html`).\n", runs.len());
        write_atomic(out, doc.as_bytes())?;
        return Ok(runs.len());
    }
    qlog_analysis::plot::ensure_font().map_err(|e| e.to_string())?;
    let mut charts = String::new();
    // Throughput vs p95 delay with one-sigma ellipses.
    let mut lines = Vec::new();
    for (i, (cc, a)) in algs.iter().enumerate() {
        lines.push((format!("{cc}·"), a.points.clone(), color(i)));
        match ellipse(&a.points) {
            Some(e) => lines.push((cc.clone(), e, color(i))),
            None => {
                if let Some(&(x, y)) = a.points.first() {
                    lines.push((cc.clone(), vec![(x, y), (x, y)], color(i)));
                }
            }
        }
    }
    charts += &section("Throughput and delay", "Each dot is one flow of one repetition; the ellipse is one standard deviation around the algorithm's mean. The delay axis is reversed: better is up and to the right.", svg_chart("Goodput vs 95th-percentile RTT", "RTT p95 (ms)", "goodput (Mbit/s)", &lines, true)?);
    // Per-flow time series from the qlogs (first 16 flows).
    let mut cwnd = Vec::new();
    let mut rtt = Vec::new();
    let mut tput = Vec::new();
    let mut queue = Vec::new();
    let mut drops = Vec::new();
    let mut k = 0;
    for r in &runs {
        let name = r.summary["scenario"].as_str().unwrap_or("run").to_string();
        let rep1 = r.dir.join("rep-1");
        if let Ok(samples) = crate::bottleneck::read_samples(&rep1.join("bottleneck-samples.jsonl"))
        {
            let dir = r.summary["bottleneck"]["direction"]
                .as_str()
                .unwrap_or("down");
            let s: Vec<_> = samples.iter().filter(|s| s.dir == dir).collect();
            queue.push((
                name.clone(),
                s.iter()
                    .map(|s| (s.t_s, s.queue_bytes as f64 / 1e3))
                    .collect(),
                color(queue.len()),
            ));
            drops.push((
                name.clone(),
                s.iter().map(|s| (s.t_s, s.drops as f64)).collect(),
                color(drops.len()),
            ));
        }
        let flows = r.summary["repetitions"][0]["flows"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for f in flows {
            if k >= 16 {
                break;
            }
            let label = if runs.len() > 1 {
                format!("{name}/{}", f["cc"].as_str().unwrap_or(""))
            } else {
                format!("flow {} {}", f["index"], f["cc"].as_str().unwrap_or(""))
            };
            let c = color(k);
            k += 1;
            for (role, into) in [("sender", 0), ("receiver", 1)] {
                let Some(rel) = f["qlog"][role].as_str() else {
                    continue;
                };
                let p = r.dir.join(rel);
                let mut a = qlog_analysis::analysis::Analyzer::new(0.2, true);
                if qlog_analysis::read_file(&p, &mut a).is_err() {
                    continue;
                }
                let Some(conn) = a.connections.first() else {
                    continue;
                };
                if into == 0 {
                    cwnd.push((
                        label.clone(),
                        qlog_analysis::plot::steps(&conn.series.cwnd, 1e-3),
                        c,
                    ));
                    rtt.push((label.clone(), conn.series.smoothed_rtt_ms.clone(), c));
                } else {
                    let pts: Vec<(f64, f64)> = conn
                        .bins
                        .iter()
                        .enumerate()
                        .map(|(i, b)| {
                            (
                                (i as f64 + 0.5) * conn.bin_s,
                                b.app_received as f64 * 8.0 / conn.bin_s / 1e6,
                            )
                        })
                        .collect();
                    tput.push((label.clone(), pts, c));
                }
            }
        }
    }
    charts += &section(
        "Congestion window",
        "The sender's cwnd from its qlog.",
        svg_chart("cwnd", "time (s)", "kB", &cwnd, false)?,
    );
    charts += &section(
        "Round-trip time",
        "The sender's smoothed RTT from its qlog.",
        svg_chart("smoothed RTT", "time (s)", "ms", &rtt, false)?,
    );
    charts += &section(
        "Goodput",
        "Application bytes delivered, per 200 ms, from the receiver's qlog.",
        svg_chart("goodput", "time (s)", "Mbit/s", &tput, false)?,
    );
    charts += &section(
        "Bottleneck queue",
        "Queue occupancy at the end of each 100 ms sample (first repetition).",
        svg_chart("queue", "time (s)", "kB", &queue, false)?,
    );
    charts += &section(
        "Bottleneck drops",
        "Packets dropped per 100 ms sample (first repetition).",
        svg_chart("drops", "time (s)", "packets", &drops, false)?,
    );
    let run_list: String = runs
        .iter()
        .map(|r| {
            format!(
                "<li><code>{}</code>: {} ({}, {:.0} Mbit/s, {:.0} ms RTT, {})</li>",
                esc(&r.dir.display().to_string()),
                esc(r.summary["scenario"].as_str().unwrap_or("")),
                esc(r.summary["link"]["backend"].as_str().unwrap_or("")),
                r.summary["link"]["rate_bps"].as_f64().unwrap_or(0.0) / 1e6,
                r.summary["link"]["rtt_ms"].as_f64().unwrap_or(0.0),
                esc(r.summary["status"].as_str().unwrap_or(""))
            )
        })
        .collect();
    let html = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>cclab report</title><style>\nbody{{font-family:sans-serif;max-width:960px;margin:2em auto;color:#222}}table{{border-collapse:collapse;font-size:14px}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}td:first-child,th:first-child{{text-align:left}}h2{{margin-top:2em}}.note{{color:#555;font-size:13px}}\n</style></head><body>\n<h1>cclab report</h1>\n<p>Generated {} from {} run(s).</p>\n<h2>Per algorithm</h2>\n{table}<p class=\"note\">{note}</p>\n{charts}\n<h2>Runs</h2><ul>{run_list}</ul>\n</body></html>\n",
        crate::run::now_rfc3339(),
        runs.len()
    );
    write_atomic(out, html.as_bytes())?;
    Ok(runs.len())
}

fn section(title: &str, note: &str, svg: String) -> String {
    format!(
        "<h2>{}</h2>\n<p class=\"note\">{}</p>\n{svg}\n",
        esc(title),
        esc(note)
    )
}

fn write_atomic(out: &Path, bytes: &[u8]) -> Result<(), String> {
    if let Some(p) = out.parent() {
        if !p.as_os_str().is_empty() {
            std::fs::create_dir_all(p).map_err(|e| format!("{}: {e}", p.display()))?;
        }
    }
    let tmp = out.with_extension("part");
    std::fs::write(&tmp, bytes).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, out).map_err(|e| format!("{}: {e}", out.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sigma_ellipse() {
        // Points spread ±1 in x only: the ellipse spans x ± sd, y fixed.
        let pts = [(9.0, 5.0), (11.0, 5.0), (9.0, 5.0), (11.0, 5.0)];
        let e = ellipse(&pts).unwrap();
        let sd = (4.0f64 / 3.0).sqrt();
        let xmax = e.iter().map(|p| p.0).fold(f64::MIN, f64::max);
        assert!((xmax - (10.0 + sd)).abs() < 1e-9, "{xmax}");
        assert!(e.iter().all(|p| (p.1 - 5.0).abs() < 1e-9));
        assert!(ellipse(&[(1.0, 1.0)]).is_none());
    }
}
