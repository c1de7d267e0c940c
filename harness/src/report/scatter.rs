//! Goodput against 95th-percentile RTT, one labelled point per group with
//! 95% confidence error bars over repetitions, the delay axis reversed as
//! Pantheon draws it: better is up and to the right.

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

/// One group's point: means over repetitions and 95% half-widths.
pub struct Point {
    pub label: String,
    pub cc: String,
    /// 95th-percentile RTT, ms.
    pub x: f64,
    /// Goodput, Mbit/s.
    pub y: f64,
    pub hx: f64,
    pub hy: f64,
    /// One (x, y) per repetition.
    pub reps: Vec<(f64, f64)>,
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
            Point {
                label: label.clone(),
                cc: g.cc.clone(),
                x,
                y,
                hx,
                hy,
                reps: g.reps.clone(),
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

/// Axis ranges: (x low, x high), (y low, y high), over the means and the
/// single repetitions (error bars reaching further are cut at the edge:
/// two repetitions make wide Student-t intervals that would squash the
/// points), never below 0 (neither goodput nor delay can be).
pub fn ranges(pts: &[Point]) -> ((f64, f64), (f64, f64)) {
    let xs = pts
        .iter()
        .flat_map(|p| std::iter::once(p.x).chain(p.reps.iter().map(|r| r.0)));
    let ys = pts
        .iter()
        .flat_map(|p| std::iter::once(p.y).chain(p.reps.iter().map(|r| r.1)));
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

/// Repetitions (small dots), error bars, then the means on top; returns
/// the error bars' boxes.
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
    fn points_carry_student_t_intervals() {
        let mut g = BTreeMap::new();
        g.insert("a".to_string(), group("a", &[(50.0, 10.0), (60.0, 12.0)]));
        g.insert("none".to_string(), group("b", &[]));
        let p = points(&g);
        assert_eq!(p.len(), 1, "a group without RTTs has no point");
        assert_eq!((p[0].x, p[0].y), (55.0, 11.0));
        // Two samples: t(0.975, 1) = 12.706, sd = 7.07 (x), 1.41 (y).
        assert!((p[0].hx - 12.706 * 5.0).abs() < 0.01, "{}", p[0].hx);
        assert!((p[0].hy - 12.706 * 1.0).abs() < 0.01, "{}", p[0].hy);
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
