//! A study's `states` figure: one run of a controller over time, in
//! stacked panels of the sender's qlog metrics (and the link's delivered
//! rate), over coloured bands of the controller's states. What docs/bbr.md
//! shows for each of the draft's cases.
//!
//! ```toml
//! [[figure]]
//! id = "alone"
//! title = "bbr3 alone"
//! experiment = "alone"
//! kind = "states"
//! panels = [["link_rate", "bbr_max_bw_bps", "pacing_rate"],
//!           ["cwnd", "bytes_in_flight"], ["latest_rtt", "bbr_min_rtt_ms"]]
//! ```
//!
//! A panel's items are `link_rate` (the link's delivered rate in the data
//! direction, per sample interval), `cwnd`, `bytes_in_flight`,
//! `pacing_rate`, `latest_rtt`, `smoothed_rtt`, `min_rtt`, or any metric
//! the controller logs by name. A panel's unit follows its first item: a
//! rate (`link_rate`, `pacing_rate`, `*_bps`) in Mbit/s, a time (`*rtt*`,
//! `*_ms`) in ms, else bytes in kB. Values hold until the next one is
//! logged (qlog logs a metric when it changes).

use std::path::Path;

use plotters::prelude::*;

use crate::reproduce::metrics::bottleneck_signal;
use crate::reproduce::metrics::RunData;

/// A line: its name and points.
type Named = (String, Vec<(f64, f64)>);

/// The items a panel may name besides a controller's own metrics.
pub const ITEMS: &[&str] = &[
    "link_rate",
    "cwnd",
    "bytes_in_flight",
    "pacing_rate",
    "latest_rtt",
    "smoothed_rtt",
    "min_rtt",
];

/// The state bands' colours, by state name (others grey).
const STATE_COLOURS: &[(&str, RGBColor)] = &[
    ("startup", RGBColor(0xfd, 0xe0, 0xc5)),
    ("slow_start", RGBColor(0xfd, 0xe0, 0xc5)),
    ("drain", RGBColor(0xf9, 0xc6, 0xd0)),
    ("probe_bw_down", RGBColor(0xd6, 0xe9, 0xf8)),
    ("probe_bw_cruise", RGBColor(0xff, 0xff, 0xff)),
    ("congestion_avoidance", RGBColor(0xff, 0xff, 0xff)),
    ("probe_bw_refill", RGBColor(0xe3, 0xf4, 0xd7)),
    ("probe_bw_up", RGBColor(0xc8, 0xeb, 0xb0)),
    ("probe_rtt", RGBColor(0xe6, 0xdc, 0xf5)),
    ("recovery", RGBColor(0xf9, 0xc6, 0xd0)),
];

fn state_colour(s: &str) -> RGBColor {
    STATE_COLOURS
        .iter()
        .find(|(n, _)| *n == s)
        .map_or(RGBColor(0xee, 0xee, 0xee), |x| x.1)
}

/// A panel's unit: (axis label, divisor from the logged unit).
fn unit(first: &str) -> (&'static str, f64) {
    if first == "link_rate" || first == "pacing_rate" || first.ends_with("_bps") {
        ("rate (Mbit/s)", 1e6)
    } else if first.contains("rtt") || first.ends_with("_ms") {
        ("RTT (ms)", 1.0)
    } else {
        ("bytes (kB)", 1e3)
    }
}

/// The (time, value) points of `item` in the run, in the logged unit
/// (rates in bit/s), times in s from the flow's start.
fn series(
    item: &str,
    dir: &Path,
    data: &RunData,
    s: &qlog_analysis::analysis::Series,
    start: f64,
) -> Vec<(f64, f64)> {
    let from_start = |v: &[(f64, f64)]| v.iter().map(|&(t, x)| (start + t, x)).collect();
    match item {
        // What the link delivered per sample interval (a utilization
        // would be of the rate in force, which a scheduled change moves).
        "link_rate" => bottleneck_signal(dir, data, "delivered_bps"),
        "cwnd" => from_start(&s.cwnd),
        "bytes_in_flight" => from_start(&s.bytes_in_flight),
        "pacing_rate" => from_start(&s.pacing_rate_bps),
        "latest_rtt" => from_start(&s.latest_rtt_ms),
        "smoothed_rtt" => from_start(&s.smoothed_rtt_ms),
        "min_rtt" => from_start(&s.min_rtt_ms),
        other => s.extra.get(other).map_or_else(Vec::new, |v| from_start(v)),
    }
}

/// Draws the figure of the run in `dir` (its first repetition's first
/// flow); an error says what is missing.
pub fn draw(
    title: &str,
    dir: &Path,
    data: &RunData,
    panels: &[Vec<String>],
) -> Result<String, String> {
    qlog_analysis::plot::ensure_font().map_err(|e| e.to_string())?;
    let rep = data
        .summary
        .repetitions
        .first()
        .ok_or("the run has no repetition")?;
    let f = rep.flows.first().ok_or("the run has no flow")?;
    let c = data
        .sender(f)
        .ok_or("the flow has no readable sender qlog (a states figure needs qlog at level base)")?;
    if c.states.is_empty() {
        return Err(
            "the sender's qlog logged no state (a states figure needs qlog at level base)".into(),
        );
    }
    let lines: Vec<Vec<Named>> = panels
        .iter()
        .map(|p| {
            p.iter()
                .map(|item| {
                    (
                        item.clone(),
                        crate::report::thin(&series(item, dir, data, &c, f.start_s), 400),
                    )
                })
                .collect()
        })
        .collect();
    let t_end = lines
        .iter()
        .flatten()
        .filter_map(|(_, pts)| pts.last().map(|p| p.0))
        .fold(0.0f64, f64::max)
        .max(1e-3);
    // The report's palette, one colour per line over all the panels,
    // striding through it so that neighbours differ in hue.
    let colours: Vec<RGBColor> = crate::report::palette::all().collect();
    let mut next = 0;
    let mut svg = String::new();
    {
        let h = 40 + 170 * panels.len() as u32 + 30;
        let root = SVGBackend::with_string(&mut svg, (920, h)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let root = root
            .titled(title, ("sans-serif", 14))
            .map_err(|e| e.to_string())?;
        let (plots, legend) = root.split_horizontally(740);
        let areas = plots.split_evenly((panels.len(), 1));
        for (k, (area, panel)) in areas.iter().zip(&lines).enumerate() {
            let (ylabel, div) = unit(&panels[k][0]);
            let ymax = panel
                .iter()
                .flat_map(|(_, p)| p.iter().map(|x| x.1 / div))
                .fold(1e-9f64, f64::max)
                * 1.1;
            let mut ch = ChartBuilder::on(area)
                .margin(6)
                .x_label_area_size(if k + 1 == panels.len() { 30 } else { 12 })
                .y_label_area_size(60)
                .build_cartesian_2d(0.0..t_end, 0.0..ymax)
                .map_err(|e| e.to_string())?;
            // The states first, as bands under the lines.
            let st = &c.states;
            ch.draw_series(st.iter().enumerate().map(|(j, (t, s))| {
                let te = st.get(j + 1).map_or(t_end, |x| f.start_s + x.0);
                Rectangle::new([(f.start_s + t, 0.0), (te, ymax)], state_colour(s).filled())
            }))
            .map_err(|e| e.to_string())?;
            let mut mesh = ch.configure_mesh();
            mesh.y_desc(ylabel)
                .label_style(("sans-serif", 11))
                .disable_mesh();
            if k + 1 == panels.len() {
                mesh.x_desc("time (s); bands: state");
            }
            mesh.draw().map_err(|e| e.to_string())?;
            for (name, pts) in panel.iter() {
                let col = colours[(next * 5) % colours.len()];
                next += 1;
                // Steps: a value holds until the next one, and to the end.
                let mut steps = Vec::with_capacity(pts.len() * 2);
                for (j, &(t, v)) in pts.iter().enumerate() {
                    let next = pts.get(j + 1).map_or(t_end, |x| x.0);
                    steps.push((t, v / div));
                    steps.push((next, v / div));
                }
                ch.draw_series(LineSeries::new(steps, col.stroke_width(1)))
                    .map_err(|e| e.to_string())?
                    .label(name.clone())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 16, y)], col.stroke_width(2))
                    });
            }
            ch.configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK.mix(0.3))
                .label_font(("sans-serif", 10))
                .draw()
                .map_err(|e| e.to_string())?;
        }
        // The states' legend beside the panels.
        let mut seen: Vec<&str> = Vec::new();
        for (_, s) in &c.states {
            if !seen.contains(&s.as_str()) {
                seen.push(s);
            }
        }
        for (k, s) in seen.iter().enumerate() {
            let y = 50 + 18 * k as i32;
            legend
                .draw(&Rectangle::new(
                    [(8, y), (24, y + 12)],
                    state_colour(s).filled(),
                ))
                .map_err(|e| e.to_string())?;
            legend
                .draw(&Rectangle::new([(8, y), (24, y + 12)], BLACK.mix(0.4)))
                .map_err(|e| e.to_string())?;
            legend
                .draw(&Text::new(s.to_string(), (30, y), ("sans-serif", 11)))
                .map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}
