//! Drawing helpers shared by the report's figures, and the small
//! multiples. Every figure is drawn by code generic over the plotters
//! backend, so the SVG in the page, the SVG file and the PNG file are the
//! same drawing; `s` scales every length (1 for SVG, 2 for a PNG that
//! prints sharp).

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::palette::{colour, shade};
use super::series::{Multiples, Panel};

/// Width of every figure at scale 1 (the page's text width).
pub const WIDTH: u32 = 960;
const TITLE_H: f64 = 30.0;
const LEGEND_ROW_H: f64 = 18.0;
const PANEL_H: f64 = 150.0;

pub type DrawResult = Result<(), String>;

/// A length at scale `s`.
pub fn px(s: f64, v: f64) -> i32 {
    (v * s).round() as i32
}

/// A font of `size` points at scale `s`.
pub fn font(s: f64, size: f64) -> FontDesc<'static> {
    ("sans-serif", size * s).into_font()
}

/// A tick label: integers without decimals, else as few as tell ticks apart.
pub fn tick(v: f64) -> String {
    let a = v.abs();
    if (v - v.round()).abs() < 1e-9 * a.max(1.0) {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 0.1 {
        format!("{v:.2}").trim_end_matches('0').to_string()
    } else {
        format!("{v:.3}").trim_end_matches('0').to_string()
    }
}

/// Columns of a grid of `n` panels in [`WIDTH`].
pub fn columns(n: usize) -> usize {
    match n {
        0 | 1 => 1,
        2 | 4 => 2,
        3 | 5 | 6 | 9 => 3,
        _ => 4,
    }
}

/// Rows the legend strip takes (entries of about 110 px each).
fn legend_rows(n: usize) -> usize {
    n.div_ceil(8)
}

/// Size at scale 1 of a figure of small multiples.
pub fn multiples_size(m: &Multiples) -> (u32, u32) {
    let n = m.panels.len().max(1);
    let rows = n.div_ceil(columns(n));
    let panel_h = if n == 1 { PANEL_H * 1.6 } else { PANEL_H };
    let h = TITLE_H + legend_rows(m.legend.len()) as f64 * LEGEND_ROW_H + rows as f64 * panel_h;
    (WIDTH, h.ceil() as u32)
}

/// The figure's title, top left.
pub fn title<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, text: &str, s: f64) -> DrawResult {
    let style = font(s, 16.0).style(FontStyle::Bold).color(&BLACK);
    area.draw(&Text::new(
        text.to_string(),
        (px(s, 8.0), px(s, 7.0)),
        style,
    ))
    .map_err(|e| e.to_string())
}

/// A row of colour swatches and names, wrapping, from `y` down.
pub fn legend_strip<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    specs: &[String],
    y: f64,
    s: f64,
) -> DrawResult {
    let (w, _) = area.dim_in_pixel();
    let (mut x, mut y) = (px(s, 8.0), px(s, y + LEGEND_ROW_H / 2.0));
    for spec in specs {
        let style = font(s, 12.0)
            .color(&BLACK)
            .pos(Pos::new(HPos::Left, VPos::Center));
        let tw = area
            .estimate_text_size(spec, &style)
            .map_or(60, |t| t.0 as i32);
        if x + px(s, 24.0) + tw > w as i32 && x > px(s, 8.0) {
            x = px(s, 8.0);
            y += px(s, LEGEND_ROW_H);
        }
        let c = colour(spec);
        let line = PathElement::new(
            vec![(x, y), (x + px(s, 18.0), y)],
            c.stroke_width(px(s, 3.0) as u32),
        );
        area.draw(&line).map_err(|e| e.to_string())?;
        area.draw(&Text::new(spec.clone(), (x + px(s, 22.0), y), style))
            .map_err(|e| e.to_string())?;
        x += px(s, 22.0) + tw + px(s, 16.0);
    }
    Ok(())
}

/// The largest x and y over every panel (both axes start at 0).
fn extent(panels: &[Panel]) -> (f64, f64) {
    let (mut x, mut y) = (0.0f64, 0.0f64);
    for p in panels {
        for &(a, b) in p.traces.iter().flat_map(|t| t.pts.iter()) {
            if a.is_finite() && b.is_finite() {
                x = x.max(a);
                y = y.max(b);
            }
        }
    }
    (
        if x > 0.0 { x } else { 1.0 },
        if y > 0.0 { y * 1.05 } else { 1.0 },
    )
}

/// Draws a figure of small multiples.
pub fn draw_multiples<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    m: &Multiples,
    s: f64,
) -> DrawResult {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    title(
        &root,
        &format!("{} ({}) {}", m.title, m.y_unit, m.x_desc),
        s,
    )?;
    legend_strip(&root, &m.legend, TITLE_H - 4.0, s)?;
    let head = TITLE_H + legend_rows(m.legend.len()) as f64 * LEGEND_ROW_H;
    let (_, body) = root.split_vertically(px(s, head));
    let n = m.panels.len();
    let cols = columns(n);
    let rows = n.div_ceil(cols).max(1);
    let areas = body.split_evenly((rows, cols));
    let (xmax, ymax) = extent(&m.panels);
    for (i, (p, area)) in m.panels.iter().zip(&areas).enumerate() {
        let at = Place {
            left: i % cols == 0,
            bottom: i + cols >= n,
        };
        draw_panel(area, p, (xmax, ymax), at, s)?;
    }
    root.present().map_err(|e| e.to_string())
}

/// Where a panel sits: only the left column and the bottom row carry tick
/// labels (the axes are shared).
#[derive(Clone, Copy)]
struct Place {
    left: bool,
    bottom: bool,
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    p: &Panel,
    (xmax, ymax): (f64, f64),
    at: Place,
    s: f64,
) -> DrawResult {
    let caption = font(s, 12.5)
        .style(FontStyle::Bold)
        .color(&shade(p.colour, -0.25));
    let mut chart = ChartBuilder::on(area)
        .margin_top(px(s, 2.0))
        .margin_right(px(s, 10.0))
        .margin_bottom(px(s, 2.0))
        .caption(&p.title, caption)
        .x_label_area_size(px(s, 18.0))
        .y_label_area_size(px(s, 40.0))
        .build_cartesian_2d(0.0..xmax, 0.0..ymax)
        .map_err(|e| e.to_string())?;
    let fx = |v: &f64| if at.bottom { tick(*v) } else { String::new() };
    let fy = |v: &f64| if at.left { tick(*v) } else { String::new() };
    chart
        .configure_mesh()
        .x_labels(6)
        .y_labels(4)
        .max_light_lines(0)
        .bold_line_style(RGBColor(232, 232, 232))
        .axis_style(RGBColor(150, 150, 150))
        .label_style(font(s, 10.5).color(&RGBColor(80, 80, 80)))
        .x_label_formatter(&fx)
        .y_label_formatter(&fy)
        .draw()
        .map_err(|e| e.to_string())?;
    let width = px(s, 1.3).max(1) as u32;
    let mut drawn = 0;
    for t in p.traces.iter().filter(|t| !t.pts.is_empty()) {
        chart
            .draw_series(LineSeries::new(
                t.pts.iter().copied(),
                t.colour.stroke_width(width),
            ))
            .map_err(|e| e.to_string())?;
        drawn += 1;
    }
    let tick_style = RGBColor(40, 40, 40).stroke_width(width);
    chart
        .draw_series(
            p.marks
                .iter()
                .map(|&t| PathElement::new(vec![(t, ymax), (t, ymax * 0.93)], tick_style)),
        )
        .map_err(|e| e.to_string())?;
    if drawn == 0 {
        let style = font(s, 12.0)
            .color(&RGBColor(120, 120, 120))
            .pos(Pos::new(HPos::Center, VPos::Center));
        chart
            .draw_series(std::iter::once(Text::new(
                "no data",
                (xmax / 2.0, ymax / 2.0),
                style,
            )))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_read_naturally() {
        assert_eq!(tick(200.0), "200");
        assert_eq!(tick(0.0), "0");
        assert_eq!(tick(12.5), "12.5");
        assert_eq!(tick(0.25), "0.25");
        assert_eq!(tick(2.5), "2.5");
        assert_eq!(tick(0.005), "0.005");
    }

    #[test]
    fn grids_fit_the_page() {
        assert_eq!(columns(1), 1);
        assert_eq!(columns(3), 3);
        assert_eq!(columns(4), 2);
        assert_eq!(columns(18), 4);
        assert_eq!(legend_rows(0), 0);
        assert_eq!(legend_rows(9), 2);
    }
}
