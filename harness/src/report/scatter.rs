//! Goodput against 95th-percentile RTT, one labelled point per group, the
//! delay axis reversed as Pantheon draws it: better is up and to the right.
//!
//! What is drawn depends on what the number of repetitions n allows: every
//! repetition's own point always; from [`ELLIPSE_MIN_N`] repetitions a
//! 1-σ ellipse (the covariance of delay and goodput over the repetitions,
//! as Pantheon draws them); from [`CI_MIN_N`] the 95% confidence intervals
//! of the mean (Student t). With fewer the t factor (12.7 at n = 2, 4.3 at
//! n = 3) makes intervals that cross the whole plot and say nothing a
//! reader can use. [`legend_note`] says which were drawn.

use std::collections::BTreeMap;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::chart::{font, px, tick, title, DrawResult};
use super::data::Group;
use super::palette::{colour, shade};
use crate::run::mean_ci;

/// Height of the scatter at scale 1.
pub const HEIGHT: u32 = 600;

/// Repetitions from which a group gets its 1-σ ellipse.
pub const ELLIPSE_MIN_N: usize = 3;
/// Repetitions from which a group gets 95% confidence error bars.
pub const CI_MIN_N: usize = 5;

/// One group's point: means over repetitions, the spread ellipse and the
/// 95% half-widths where n allows them.
pub struct Point {
    pub label: String,
    pub cc: String,
    /// 95th-percentile RTT, ms.
    pub x: f64,
    /// Goodput, Mbit/s.
    pub y: f64,
    /// 95% half-width of `x`'s mean; 0 below [`CI_MIN_N`] repetitions.
    pub hx: f64,
    /// 95% half-width of `y`'s mean; 0 below [`CI_MIN_N`] repetitions.
    pub hy: f64,
    /// One (x, y) per repetition.
    pub reps: Vec<(f64, f64)>,
    /// The repetitions' 1-σ ellipse, from [`ELLIPSE_MIN_N`] repetitions.
    pub ellipse: Option<Ellipse>,
}

/// A 1-σ covariance ellipse in data coordinates: the set of points at
/// Mahalanobis distance 1 from the mean of the repetitions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ellipse {
    /// Centre (the means).
    pub cx: f64,
    pub cy: f64,
    /// Semi-axes (square roots of the covariance matrix's eigenvalues),
    /// `a` along the direction `theta` (radians from the x axis).
    pub a: f64,
    pub b: f64,
    pub theta: f64,
}

impl Ellipse {
    /// The ellipse of `reps` (sample covariance, n − 1), if there are at
    /// least [`ELLIPSE_MIN_N`] finite repetitions.
    pub fn of(reps: &[(f64, f64)]) -> Option<Ellipse> {
        let r: Vec<(f64, f64)> = reps
            .iter()
            .copied()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .collect();
        if r.len() < ELLIPSE_MIN_N {
            return None;
        }
        let n = r.len() as f64;
        let cx = r.iter().map(|p| p.0).sum::<f64>() / n;
        let cy = r.iter().map(|p| p.1).sum::<f64>() / n;
        let cov = |f: &dyn Fn(&(f64, f64)) -> f64| r.iter().map(f).sum::<f64>() / (n - 1.0);
        let sxx = cov(&|p| (p.0 - cx) * (p.0 - cx));
        let syy = cov(&|p| (p.1 - cy) * (p.1 - cy));
        let sxy = cov(&|p| (p.0 - cx) * (p.1 - cy));
        let mid = (sxx + syy) / 2.0;
        let d = (((sxx - syy) / 2.0).powi(2) + sxy * sxy).sqrt();
        Some(Ellipse {
            cx,
            cy,
            a: (mid + d).max(0.0).sqrt(),
            b: (mid - d).max(0.0).sqrt(),
            theta: 0.5 * (2.0 * sxy).atan2(sxx - syy),
        })
    }

    /// `k` points around the outline.
    pub fn outline(&self, k: usize) -> Vec<(f64, f64)> {
        let (c, s) = (self.theta.cos(), self.theta.sin());
        (0..k)
            .map(|i| {
                let t = i as f64 / k as f64 * std::f64::consts::TAU;
                let (u, v) = (self.a * t.cos(), self.b * t.sin());
                (self.cx + u * c - v * s, self.cy + u * s + v * c)
            })
            .collect()
    }

    /// Half the extent along x and along y (the bounding box's half-sizes).
    pub fn half_extent(&self) -> (f64, f64) {
        let (c, s) = (self.theta.cos(), self.theta.sin());
        (
            ((self.a * c).powi(2) + (self.b * s).powi(2)).sqrt(),
            ((self.a * s).powi(2) + (self.b * c).powi(2)).sqrt(),
        )
    }
}

/// What the scatter draws for these points, for its caption.
pub fn legend_note(pts: &[Point]) -> String {
    let ns: Vec<usize> = pts.iter().map(|p| p.reps.len()).collect();
    let (lo, hi) = (
        ns.iter().copied().min().unwrap_or(0),
        ns.iter().copied().max().unwrap_or(0),
    );
    let n = if lo == hi {
        format!(
            "n = {lo} repetition{} per point",
            if lo == 1 { "" } else { "s" }
        )
    } else {
        format!("n = {lo} to {hi} repetitions per point")
    };
    let ellipses = if hi >= ELLIPSE_MIN_N {
        format!(
            "Shaded ellipses: one standard deviation of the repetitions around the mean \
             (their covariance of delay and goodput), drawn where n \u{2265} {ELLIPSE_MIN_N}. "
        )
    } else {
        format!("No spread ellipses (they need n \u{2265} {ELLIPSE_MIN_N}). ")
    };
    let bars = if hi >= CI_MIN_N {
        format!(
            "Error bars: 95% confidence intervals of the mean (Student t), drawn where \
             n \u{2265} {CI_MIN_N}."
        )
    } else {
        format!(
            "No confidence intervals: with n < {CI_MIN_N} the Student t factor (12.7 at n = 2, \
             4.3 at n = 3) makes them wider than the plot."
        )
    };
    format!(
        "Each large dot is the mean over repetitions; small dots are single repetitions \
         ({n}). {ellipses}{bars}"
    )
}

/// The points of every group that measured an RTT.
pub fn points(groups: &BTreeMap<String, Group>) -> Vec<Point> {
    groups
        .iter()
        .filter(|(_, g)| !g.reps.is_empty())
        .map(|(label, g)| {
            let xs: Vec<f64> = g.reps.iter().map(|r| r.0).collect();
            let ys: Vec<f64> = g.reps.iter().map(|r| r.1).collect();
            let ((x, hx), (y, hy)) = (mean_ci(&xs), mean_ci(&ys));
            let ci = g.reps.len() >= CI_MIN_N;
            Point {
                label: label.clone(),
                cc: g.cc.clone(),
                x,
                y,
                hx: if ci { hx } else { 0.0 },
                hy: if ci { hy } else { 0.0 },
                reps: g.reps.clone(),
                ellipse: Ellipse::of(&g.reps),
            }
        })
        .collect()
}

/// An axis range around `vals`, padded by `pad` of the span on each side;
/// from 0 when the values are not far from it.
fn span(vals: impl Iterator<Item = f64>, pad: f64) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::MAX, f64::MIN);
    for v in vals.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi {
        return (0.0, 1.0);
    }
    let w = (hi - lo).max(hi.abs() * 0.1).max(1e-3);
    let (mut a, b) = (lo - w * pad, hi + w * pad);
    if lo >= 0.0 && (a < 0.0 || lo < 0.35 * hi) {
        a = 0.0;
    }
    (a, b)
}

/// Axis ranges: (x low, x high), (y low, y high), over the means, the
/// single repetitions and the ellipses (error bars reaching further are
/// cut at the edge), never below 0 (neither goodput nor delay can be).
pub fn ranges(pts: &[Point]) -> ((f64, f64), (f64, f64)) {
    let ext = |p: &Point| p.ellipse.map_or((0.0, 0.0), |e| e.half_extent());
    let xs = pts.iter().flat_map(|p| {
        let (ex, _) = ext(p);
        [p.x, p.x - ex, p.x + ex]
            .into_iter()
            .chain(p.reps.iter().map(|r| r.0))
    });
    let ys = pts.iter().flat_map(|p| {
        let (_, ey) = ext(p);
        [p.y, p.y - ey, p.y + ey]
            .into_iter()
            .chain(p.reps.iter().map(|r| r.1))
    });
    let ((x0, x1), (y0, y1)) = (span(xs, 0.12), span(ys, 0.12));
    ((x0.max(0.0), x1), (y0.max(0.0), y1))
}

/// An error bar in data coordinates, cut to the axis ranges: its two
/// ends, and whether each is the interval's own end (it gets a cap) or
/// the cut.
type Bar = ((f64, f64), (f64, f64), bool, bool);

/// The horizontal and vertical 95% bars of `p` within the ranges.
pub fn bars(p: &Point, (xr, yr): ((f64, f64), (f64, f64))) -> Vec<Bar> {
    let cut = |lo: f64, hi: f64, (a, b): (f64, f64)| (lo.max(a), hi.min(b), lo >= a, hi <= b);
    let mut out = Vec::new();
    if p.hx > 0.0 {
        let (a, b, ca, cb) = cut(p.x - p.hx, p.x + p.hx, xr);
        out.push(((a, p.y), (b, p.y), ca, cb));
    }
    if p.hy > 0.0 {
        let (a, b, ca, cb) = cut(p.y - p.hy, p.y + p.hy, yr);
        out.push(((p.x, a), (p.x, b), ca, cb));
    }
    out
}

/// A box in pixels: left, top, right, bottom.
pub type Boxed = (i32, i32, i32, i32);

fn overlaps(a: Boxed, b: Boxed) -> bool {
    a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
}

/// Where a label goes: its box and whether it needs a leader line.
#[derive(Clone, Copy, Debug)]
pub struct Placed {
    pub rect: Boxed,
    pub leader: bool,
}

/// The label's box at `r` pixels from `(x, y)` in direction `deg`
/// (clockwise from the right; y grows down), on the side facing away.
fn candidate((x, y): (i32, i32), (w, h): (i32, i32), r: f64, deg: f64) -> Boxed {
    let (c, s) = (deg.to_radians().cos(), deg.to_radians().sin());
    let (ax, ay) = (x + (r * c).round() as i32, y + (r * s).round() as i32);
    let left = if c > 0.25 {
        ax
    } else if c < -0.25 {
        ax - w
    } else {
        ax - w / 2
    };
    let top = if s > 0.25 {
        ay
    } else if s < -0.25 {
        ay - h
    } else {
        ay - h / 2
    };
    (left, top, left + w, top + h)
}

/// Greedy label placement: each label takes the first spot, nearest first,
/// that stays inside `bounds` and clear of every marker and placed label.
/// Soft obstacles (error bars) are avoided when some spot allows.
pub fn place_labels(
    anchors: &[(i32, i32)],
    sizes: &[(i32, i32)],
    soft: &[Boxed],
    bounds: Boxed,
    marker: i32,
) -> Vec<Placed> {
    const RADII: [f64; 8] = [8.0, 14.0, 24.0, 36.0, 52.0, 72.0, 96.0, 128.0];
    const ANGLES: [f64; 12] = [
        0.0, 180.0, -30.0, 30.0, 150.0, -150.0, -90.0, 90.0, -60.0, 60.0, -120.0, 120.0,
    ];
    let mut taken: Vec<Boxed> = anchors
        .iter()
        .map(|&(x, y)| (x - marker, y - marker, x + marker, y + marker))
        .collect();
    let inside =
        |b: Boxed| b.0 >= bounds.0 && b.1 >= bounds.1 && b.2 <= bounds.2 && b.3 <= bounds.3;
    let mut out = Vec::with_capacity(anchors.len());
    for (&a, &size) in anchors.iter().zip(sizes) {
        let spots = || {
            RADII
                .iter()
                .flat_map(|&r| ANGLES.iter().map(move |&d| (r, d)))
                .map(|(r, d)| (r, candidate(a, size, r + marker as f64 * 0.5, d)))
                .filter(|&(_, b)| inside(b) && !taken.iter().any(|&t| overlaps(t, b)))
        };
        let best = spots()
            .find(|&(_, b)| !soft.iter().any(|&t| overlaps(t, b)))
            .or_else(|| spots().next());
        let placed = match best {
            Some((r, rect)) => Placed {
                rect,
                leader: r > 14.0,
            },
            None => {
                let b = candidate(a, size, 8.0, 0.0);
                let dx = (bounds.2 - b.2).min(0) + (bounds.0 - b.0).max(0);
                Placed {
                    rect: (b.0 + dx, b.1, b.2 + dx, b.3),
                    leader: false,
                }
            }
        };
        taken.push(placed.rect);
        out.push(placed);
    }
    out
}

/// The point of `r` nearest to `(x, y)`.
fn nearest(r: Boxed, (x, y): (i32, i32)) -> (i32, i32) {
    (x.clamp(r.0, r.2), y.clamp(r.1, r.3))
}

/// Draws the scatter.
pub fn draw_scatter<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    pts: &[Point],
    s: f64,
) -> DrawResult {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    title(&root, "Goodput vs 95th-percentile RTT", s)?;
    let r = ranges(pts);
    let ((x0, x1), (y0, y1)) = r;
    let mut chart = ChartBuilder::on(&root)
        .margin(px(s, 12.0))
        .margin_top(px(s, 34.0))
        .x_label_area_size(px(s, 44.0))
        .y_label_area_size(px(s, 60.0))
        .build_cartesian_2d(x1..x0, y0..y1)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .max_light_lines(0)
        .bold_line_style(RGBColor(235, 235, 235))
        .axis_style(RGBColor(120, 120, 120))
        .x_desc("95th-percentile RTT (ms), reversed")
        .y_desc("goodput (Mbit/s)")
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .label_style(font(s, 12.0))
        .axis_desc_style(font(s, 13.0))
        .draw()
        .map_err(|e| e.to_string())?;
    let soft = draw_points(&root, &mut chart, pts, r, s)?;
    let anchors: Vec<(i32, i32)> = pts
        .iter()
        .map(|p| chart.backend_coord(&(p.x, p.y)))
        .collect();
    let (xr, yr) = chart.plotting_area().get_pixel_range();
    let bounds = (xr.start, yr.start, xr.end, yr.end);
    draw_labels(&root, pts, &anchors, &soft, bounds, s)?;
    better_arrow(&root, (xr.end, yr.start), s)?;
    root.present().map_err(|e| e.to_string())
}

/// Ellipses, repetitions (small dots), error bars, then the means on top;
/// returns the error bars' boxes.
fn draw_points<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &mut Chart<'_, DB>,
    pts: &[Point],
    r: ((f64, f64), (f64, f64)),
    s: f64,
) -> Result<Vec<Boxed>, String> {
    // Bars thin and translucent: with 18 algorithms they cross; the means and
    // labels must stay on top.
    let width = px(s, 1.2).max(1) as u32;
    let mut boxes = Vec::new();
    for p in pts {
        let c = colour(&p.cc);
        if let Some(e) = p.ellipse {
            let outline: Vec<(i32, i32)> = e
                .outline(72)
                .iter()
                .map(|q| chart.backend_coord(q))
                .collect();
            root.draw(&Polygon::new(outline.clone(), c.mix(0.12).filled()))
                .map_err(|e| e.to_string())?;
            let mut closed = outline;
            closed.push(closed[0]);
            root.draw(&PathElement::new(closed, c.mix(0.5).stroke_width(width)))
                .map_err(|e| e.to_string())?;
        }
        chart
            .draw_series(
                p.reps
                    .iter()
                    .map(|&r| Circle::new(r, px(s, 2.5), c.mix(0.35).filled())),
            )
            .map_err(|e| e.to_string())?;
        let segments: Vec<_> = bars(p, r)
            .into_iter()
            .map(|(a, b, ca, cb)| (chart.backend_coord(&a), chart.backend_coord(&b), ca, cb))
            .collect();
        boxes.extend(draw_error_bars(
            root,
            &segments,
            c.mix(0.55).stroke_width(width),
            s,
        )?);
    }
    for p in pts {
        chart
            .draw_series([
                Circle::new((p.x, p.y), px(s, 5.5), WHITE.filled()),
                Circle::new((p.x, p.y), px(s, 4.5), colour(&p.cc).filled()),
            ])
            .map_err(|e| e.to_string())?;
    }
    Ok(boxes)
}

type Chart<'a, DB> = ChartContext<
    'a,
    DB,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// An error bar in pixels, ends capped or not (see [`Bar`]).
type Segment = ((i32, i32), (i32, i32), bool, bool);

/// Draws `p`'s error bars (pixel segments from `bars`); returns their
/// boxes, for the labels to avoid.
fn draw_error_bars<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    segments: &[Segment],
    style: ShapeStyle,
    s: f64,
) -> Result<Vec<Boxed>, String> {
    let cap = px(s, 4.0);
    let mut boxes = Vec::new();
    for &(a, b, ca, cb) in segments {
        root.draw(&PathElement::new(vec![a, b], style))
            .map_err(|e| e.to_string())?;
        let vertical = a.0 == b.0;
        for (end, capped) in [(a, ca), (b, cb)] {
            if capped {
                let c = if vertical {
                    vec![(end.0 - cap, end.1), (end.0 + cap, end.1)]
                } else {
                    vec![(end.0, end.1 - cap), (end.0, end.1 + cap)]
                };
                root.draw(&PathElement::new(c, style))
                    .map_err(|e| e.to_string())?;
            }
        }
        let w = px(s, 2.0);
        boxes.push((
            a.0.min(b.0) - w,
            a.1.min(b.1) - w,
            a.0.max(b.0) + w,
            a.1.max(b.1) + w,
        ));
    }
    Ok(boxes)
}

fn draw_labels<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    pts: &[Point],
    anchors: &[(i32, i32)],
    soft: &[Boxed],
    bounds: Boxed,
    s: f64,
) -> DrawResult {
    let style = |c: RGBColor| {
        font(s, 12.5)
            .color(&shade(c, -0.3))
            .pos(Pos::new(HPos::Left, VPos::Top))
    };
    let sizes: Vec<(i32, i32)> = pts
        .iter()
        .map(|p| {
            let (w, h) = root
                .estimate_text_size(&p.label, &style(BLACK))
                .unwrap_or((60, 14));
            (w as i32 + px(s, 4.0), h as i32 + px(s, 2.0))
        })
        .collect();
    let placed = place_labels(anchors, &sizes, soft, bounds, px(s, 6.0));
    for ((p, &a), pl) in pts.iter().zip(anchors).zip(&placed) {
        let c = colour(&p.cc);
        if pl.leader {
            let to = nearest(pl.rect, a);
            let line = PathElement::new(
                vec![a, to],
                shade(c, -0.1)
                    .mix(0.8)
                    .stroke_width(px(s, 1.0).max(1) as u32),
            );
            root.draw(&line).map_err(|e| e.to_string())?;
        }
        // A translucent white backing keeps the text legible over bars.
        let r = pl.rect;
        root.draw(&Rectangle::new(
            [(r.0, r.1), (r.2, r.3)],
            WHITE.mix(0.8).filled(),
        ))
        .map_err(|e| e.to_string())?;
        let at = (r.0 + px(s, 2.0), r.1 + px(s, 1.0));
        root.draw(&Text::new(p.label.clone(), at, style(c)))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// "better" with an arrow pointing up and right, in the plot's corner.
fn better_arrow<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    (x, y): (i32, i32),
    s: f64,
) -> DrawResult {
    let grey = RGBColor(110, 110, 110);
    let (tip, tail) = (
        (x - px(s, 12.0), y + px(s, 12.0)),
        (x - px(s, 52.0), y + px(s, 52.0)),
    );
    let style = grey.stroke_width(px(s, 2.0) as u32);
    root.draw(&PathElement::new(vec![tail, tip], style))
        .map_err(|e| e.to_string())?;
    let head = vec![
        (tip.0 - px(s, 10.0), tip.1),
        tip,
        (tip.0, tip.1 + px(s, 10.0)),
    ];
    root.draw(&PathElement::new(head, style))
        .map_err(|e| e.to_string())?;
    let text = font(s, 12.0)
        .color(&grey)
        .pos(Pos::new(HPos::Right, VPos::Top));
    root.draw(&Text::new(
        "better",
        (tail.0 - px(s, 2.0), tail.1 - px(s, 4.0)),
        text,
    ))
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(cc: &str, reps: &[(f64, f64)]) -> Group {
        Group {
            cc: cc.into(),
            reps: reps.to_vec(),
            ..Group::default()
        }
    }

    #[test]
    fn intervals_and_ellipses_only_where_n_allows() {
        let mut g = BTreeMap::new();
        g.insert("a".to_string(), group("a", &[(50.0, 10.0), (60.0, 12.0)]));
        let five = [
            (50.0, 10.0),
            (60.0, 12.0),
            (55.0, 11.0),
            (52.0, 10.0),
            (58.0, 12.0),
        ];
        g.insert("c".to_string(), group("c", &five));
        g.insert("none".to_string(), group("b", &[]));
        let p = points(&g);
        assert_eq!(p.len(), 2, "a group without RTTs has no point");
        assert_eq!((p[0].x, p[0].y), (55.0, 11.0));
        // Two repetitions: one point each, no ellipse, no 95% bars (t = 12.7).
        assert_eq!(p[0].reps.len(), 2);
        assert!(p[0].ellipse.is_none());
        assert_eq!((p[0].hx, p[0].hy), (0.0, 0.0));
        assert!(bars(&p[0], ((0.0, 100.0), (0.0, 20.0))).is_empty());
        // Five: an ellipse and Student-t bars, t(0.975, 4) = 2.776.
        let sd_x = {
            let m = 55.0;
            (five.iter().map(|r| (r.0 - m) * (r.0 - m)).sum::<f64>() / 4.0).sqrt()
        };
        assert!(
            (p[1].hx - 2.776 * sd_x / 5f64.sqrt()).abs() < 0.01,
            "{}",
            p[1].hx
        );
        assert!(p[1].ellipse.is_some());
        assert_eq!(bars(&p[1], ((0.0, 100.0), (0.0, 20.0))).len(), 2);
        let note = legend_note(&p);
        assert!(note.contains("n = 2 to 5"), "{note}");
        assert!(
            note.contains("ellipses") && note.contains("95% confidence"),
            "{note}"
        );
        let two = legend_note(&p[..1]);
        assert!(
            two.contains("No confidence intervals") && two.contains("No spread ellipses"),
            "{two}"
        );
    }

    #[test]
    fn the_ellipse_is_the_covariance_at_one_sigma() {
        // Along a line y = 2x: all spread on one axis, b = 0.
        let line = [(1.0, 2.0), (2.0, 4.0), (3.0, 6.0)];
        let e = Ellipse::of(&line).unwrap();
        assert!((e.cx - 2.0).abs() < 1e-12 && (e.cy - 4.0).abs() < 1e-12);
        // var x = 1, var y = 4, so the major semi-axis is sqrt(5).
        assert!(
            (e.a - 5f64.sqrt()).abs() < 1e-9 && e.b.abs() < 1e-9,
            "{e:?}"
        );
        assert!((e.theta - 2f64.atan()).abs() < 1e-9, "{e:?}");
        // Uncorrelated, var x = 4, var y = 1: axes 2 and 1 along x and y.
        let e = Ellipse::of(&[(-2.0, 0.0), (2.0, 0.0), (0.0, -1.0), (0.0, 1.0)]).unwrap();
        let (sx, sy) = (8.0f64 / 3.0, 2.0f64 / 3.0);
        assert!(
            (e.a - sx.sqrt()).abs() < 1e-9 && (e.b - sy.sqrt()).abs() < 1e-9,
            "{e:?}"
        );
        assert!(e.theta.abs() < 1e-9);
        assert_eq!(e.half_extent(), (e.a, e.b));
        // Every outline point is at Mahalanobis distance 1.
        for (x, y) in e.outline(16) {
            let d = x * x / sx + y * y / sy;
            assert!((d - 1.0).abs() < 1e-9, "{d}");
        }
        assert!(Ellipse::of(&[(1.0, 1.0), (2.0, 2.0)]).is_none());
        assert!(Ellipse::of(&[(1.0, f64::NAN), (2.0, 2.0), (3.0, 1.0)]).is_none());
    }

    #[test]
    fn ranges_pad_and_start_at_zero_when_near() {
        let p = |x, y| Point {
            label: String::new(),
            cc: String::new(),
            x,
            y,
            hx: 0.0,
            hy: 0.0,
            reps: vec![],
            ellipse: None,
        };
        let ((x0, x1), (y0, y1)) = ranges(&[p(40.0, 18.0), p(80.0, 19.0)]);
        let wide = Point {
            hy: 50.0,
            ..p(40.0, 5.0)
        };
        let (_, (w0, w1)) = ranges(&[wide, p(60.0, 6.0)]);
        assert!(
            w0 >= 0.0 && w1 < 10.0,
            "error bars do not stretch the axes: {w0} {w1}"
        );
        assert!(x0 < 40.0 && x0 > 30.0 && x1 > 80.0, "{x0} {x1}");
        assert!(
            y0 > 10.0 && y1 > 19.0,
            "a tight cluster is not squashed against 0: {y0}"
        );
        let (_, (y0, _)) = ranges(&[p(40.0, 1.0), p(80.0, 19.0)]);
        assert_eq!(y0, 0.0);
    }

    #[test]
    fn labels_of_a_cluster_do_not_overlap() {
        // Nine points within a few pixels of each other.
        let anchors: Vec<(i32, i32)> = (0..9)
            .map(|i| (400 + (i % 3) * 3, 300 + (i / 3) * 3))
            .collect();
        let sizes = vec![(70, 16); 9];
        let bounds = (0, 0, 900, 600);
        let placed = place_labels(&anchors, &sizes, &[], bounds, 6);
        for (i, a) in placed.iter().enumerate() {
            let r = a.rect;
            assert!(
                r.0 >= 0 && r.1 >= 0 && r.2 <= 900 && r.3 <= 600,
                "{r:?} outside"
            );
            for b in &placed[i + 1..] {
                assert!(!overlaps(r, b.rect), "{r:?} overlaps {:?}", b.rect);
            }
            for &(x, y) in &anchors {
                assert!(
                    !overlaps(r, (x - 6, y - 6, x + 6, y + 6)),
                    "{r:?} covers a marker"
                );
            }
        }
        assert!(
            placed.iter().any(|p| p.leader),
            "far labels get leader lines"
        );
    }

    #[test]
    fn a_lone_label_sits_right_next_to_its_point() {
        let placed = place_labels(&[(100, 100)], &[(50, 14)], &[], (0, 0, 900, 600), 6);
        let r = placed[0].rect;
        assert!(r.0 > 100 && r.0 < 120 && r.1 < 100 && r.3 > 100, "{r:?}");
        assert!(!placed[0].leader);
        // At the right edge it goes left.
        let placed = place_labels(&[(890, 100)], &[(50, 14)], &[], (0, 0, 900, 600), 6);
        assert!(placed[0].rect.2 < 890, "{:?}", placed[0].rect);
        // An error bar through the right-hand spot pushes the label off it.
        let bar = (90, 98, 300, 102);
        let placed = place_labels(&[(100, 100)], &[(50, 14)], &[bar], (0, 0, 900, 600), 6);
        assert!(!overlaps(placed[0].rect, bar), "{:?}", placed[0].rect);
    }

    #[test]
    fn error_bars_are_cut_at_the_axes() {
        let p = Point {
            label: String::new(),
            cc: String::new(),
            x: 50.0,
            y: 10.0,
            hx: 5.0,
            hy: 30.0,
            reps: vec![],
            ellipse: None,
        };
        let b = bars(&p, ((0.0, 100.0), (0.0, 20.0)));
        assert_eq!(b[0], ((45.0, 10.0), (55.0, 10.0), true, true));
        assert_eq!(
            b[1],
            ((50.0, 0.0), (50.0, 20.0), false, false),
            "cut ends get no cap"
        );
    }
}
