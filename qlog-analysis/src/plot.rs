//! Plots with plotters, as PNG and SVG: cwnd, bytes in flight and ssthresh
//! over time; RTTs over time; goodput over time. Several connections are
//! overlaid, one colour each.
//!
//! Text needs a TrueType font. The first of these is used: the file named
//! by `QLOG_ANALYSIS_FONT`, DejaVu Sans or Liberation Sans in the usual
//! places, or what `fc-match sans-serif` names.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::analysis::Connection;

/// A connection to draw, with its legend label.
pub struct Flow<'a> {
    /// Legend label.
    pub label: String,
    /// The analysed connection (with series kept).
    pub conn: &'a Connection,
}

/// Why plotting failed.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// No usable font.
    #[error("no TrueType font found for plot labels: set QLOG_ANALYSIS_FONT to a .ttf file, or install one (Debian: fonts-dejavu-core)")]
    NoFont,
    /// Drawing or writing failed.
    #[error("{path}: {why}")]
    Draw {
        /// The output file.
        path: String,
        /// What went wrong.
        why: String,
    },
}

fn find_font() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("QLOG_ANALYSIS_FONT") {
        return Some(PathBuf::from(p));
    }
    for p in [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
        "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
        "/usr/share/fonts/liberation/LiberationSans-Regular.ttf",
        "/Library/Fonts/Arial.ttf",
    ] {
        if Path::new(p).exists() {
            return Some(PathBuf::from(p));
        }
    }
    let out = std::process::Command::new("fc-match")
        .args(["-f", "%{file}", "sans-serif"])
        .output()
        .ok()?;
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim().to_string());
    (p.extension().is_some_and(|e| e == "ttf") && p.exists()).then_some(p)
}

/// Registers a TrueType font with plotters (once).
pub fn ensure_font() -> Result<(), PlotError> {
    static FONT: OnceLock<bool> = OnceLock::new();
    let ok = *FONT.get_or_init(|| {
        let Some(path) = find_font() else {
            return false;
        };
        let Ok(bytes) = std::fs::read(&path) else {
            return false;
        };
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(PlotError::NoFont)
    }
}

type Line<'a> = (String, &'a [(f64, f64)], RGBColor, u32);
/// A line owning its points: label, points, colour, width.
type OwnedLine = (String, Vec<(f64, f64)>, RGBColor, u32);

fn extent(lines: &[Line]) -> (f64, f64, f64) {
    let mut x1: f64 = 0.0;
    let mut y1: f64 = 0.0;
    for (_, pts, _, _) in lines {
        for &(x, y) in pts.iter() {
            if x.is_finite() && y.is_finite() {
                x1 = x1.max(x);
                y1 = y1.max(y);
            }
        }
    }
    (0.0, x1.max(1e-3), (y1 * 1.05).max(1e-9))
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    y_label: &str,
    lines: &[Line],
) -> Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (x0, x1, y1) = extent(lines);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1, 0.0..y1)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc(y_label)
        .label_style(("sans-serif", 13))
        .draw()
        .map_err(|e| e.to_string())?;
    for (label, pts, color, width) in lines {
        if pts.is_empty() {
            continue;
        }
        let style = color.stroke_width(*width);
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), style))
            .map_err(|e| e.to_string())?
            .label(label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

fn lighter(c: RGBColor, f: f64) -> RGBColor {
    let m = |v: u8| (v as f64 + (255.0 - v as f64) * f) as u8;
    RGBColor(m(c.0), m(c.1), m(c.2))
}

/// A value holds until the next update: draw it as steps, not slopes
/// (values scaled by `k`).
pub fn steps(pts: &[(f64, f64)], k: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(pts.len() * 2);
    for (i, &(t, v)) in pts.iter().enumerate() {
        if i > 0 {
            out.push((t, pts[i - 1].1 * k));
        }
        out.push((t, v * k));
    }
    out
}

/// Writes `cwnd`, `rtt` and `throughput` plots, PNG and SVG, into `dir`;
/// returns the files written.
pub fn plot_all(flows: &[Flow], dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    ensure_font()?;
    std::fs::create_dir_all(dir).map_err(|e| PlotError::Draw {
        path: dir.display().to_string(),
        why: e.to_string(),
    })?;
    let color = |i: usize| {
        let c = Palette99::pick(i).to_rgba();
        RGBColor(c.0, c.1, c.2)
    };
    let mut owned: Vec<OwnedLine> = Vec::new();
    let mut charts: Vec<(&str, &str, &str, Vec<OwnedLine>)> = Vec::new();
    // cwnd, bytes in flight, ssthresh (kB).
    for (i, f) in flows.iter().enumerate() {
        let s = &f.conn.series;
        let c = color(i);
        owned.push((format!("{} cwnd", f.label), steps(&s.cwnd, 1e-3), c, 2));
        owned.push((
            format!("{} in flight", f.label),
            steps(&s.bytes_in_flight, 1e-3),
            lighter(c, 0.55),
            1,
        ));
        owned.push((
            format!("{} ssthresh", f.label),
            steps(&s.ssthresh, 1e-3),
            lighter(c, 0.3),
            1,
        ));
    }
    charts.push((
        "cwnd",
        "Congestion window, bytes in flight, ssthresh",
        "kB",
        std::mem::take(&mut owned),
    ));
    for (i, f) in flows.iter().enumerate() {
        let s = &f.conn.series;
        let c = color(i);
        owned.push((
            format!("{} latest", f.label),
            s.latest_rtt_ms.clone(),
            lighter(c, 0.5),
            1,
        ));
        owned.push((
            format!("{} smoothed", f.label),
            s.smoothed_rtt_ms.clone(),
            c,
            2,
        ));
        owned.push((
            format!("{} min", f.label),
            s.min_rtt_ms.clone(),
            lighter(c, 0.25),
            1,
        ));
    }
    charts.push(("rtt", "Round-trip time", "ms", std::mem::take(&mut owned)));
    for (i, f) in flows.iter().enumerate() {
        let c = f.conn;
        let use_recv = c.app.received >= c.app.acked;
        let pts: Vec<(f64, f64)> = c
            .bins
            .iter()
            .enumerate()
            .map(|(k, b)| {
                let bytes = if use_recv {
                    b.app_received
                } else {
                    b.app_acked
                };
                (
                    (k as f64 + 0.5) * c.bin_s,
                    bytes as f64 * 8.0 / c.bin_s / 1e6,
                )
            })
            .collect();
        owned.push((format!("{} goodput", f.label), pts, color(i), 2));
    }
    charts.push(("throughput", "Goodput", "Mbit/s", owned));
    let mut written = Vec::new();
    for (name, title, unit, lines) in &charts {
        let refs: Vec<Line> = lines
            .iter()
            .map(|(l, p, c, w)| (l.clone(), p.as_slice(), *c, *w))
            .collect();
        let png = dir.join(format!("{name}.png"));
        let svg = dir.join(format!("{name}.svg"));
        let err = |p: &Path| {
            let p = p.display().to_string();
            move |why: String| PlotError::Draw { path: p, why }
        };
        draw(
            BitMapBackend::new(&png, (1200, 600)).into_drawing_area(),
            title,
            unit,
            &refs,
        )
        .map_err(err(&png))?;
        draw(
            SVGBackend::new(&svg, (1200, 600)).into_drawing_area(),
            title,
            unit,
            &refs,
        )
        .map_err(err(&svg))?;
        written.push(png);
        written.push(svg);
    }
    Ok(written)
}
