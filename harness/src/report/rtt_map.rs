//! The RTT-fairness map: from runs of two flows of one algorithm that
//! differ in round-trip time (a sweep over a flow's `rtt` and the link's
//! queue, such as `scenarios/sweeps/rtt-fairness-map.toml`), the shorter
//! flow's share of the two flows' goodput at each RTT ratio and buffer
//! size, one grid per algorithm (and queue management). 50% is a fair
//! split; NewReno's textbook bias gives the short flow about
//! `ratio / (1 + ratio)`.

use std::collections::BTreeMap;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::chart::{font, px, title, DrawResult, WIDTH};
use super::data::Run;
use crate::link::{Dir, QueueLimit};

/// One cell: every run at one RTT ratio and buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    /// The longer base RTT over the shorter, rounded to 0.01.
    pub ratio: f64,
    /// The bottleneck's queue limit in BDPs of the link's own round trip,
    /// rounded to 0.01.
    pub buffer_bdp: f64,
    /// The shorter-RTT flow's share of the two flows' goodput, %, per
    /// repetition (of every run in the cell).
    pub shares: Vec<f64>,
}

impl Cell {
    /// The mean share, %.
    pub fn mean(&self) -> f64 {
        self.shares.iter().sum::<f64>() / self.shares.len().max(1) as f64
    }
}

/// The grid of one algorithm (and queue management).
#[derive(Clone, Debug, PartialEq)]
pub struct Map {
    /// `cubic`, or `cubic, codel` when the runs' queue management differs.
    pub title: String,
    /// The cells, by ratio then buffer.
    pub cells: Vec<Cell>,
}

impl Map {
    /// The ratios and buffers present, ascending.
    pub fn axes(&self) -> (Vec<f64>, Vec<f64>) {
        let mut r: Vec<f64> = self.cells.iter().map(|c| c.ratio).collect();
        let mut b: Vec<f64> = self.cells.iter().map(|c| c.buffer_bdp).collect();
        for v in [&mut r, &mut b] {
            v.sort_by(f64::total_cmp);
            v.dedup();
        }
        (r, b)
    }

    fn cell(&self, ratio: f64, buffer: f64) -> Option<&Cell> {
        self.cells
            .iter()
            .find(|c| c.ratio == ratio && c.buffer_bdp == buffer)
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// A map's key: the algorithm and the queue management.
type Key = (String, String);

/// What a run contributes: its key, and its cell (one ratio and buffer,
/// its repetitions' shares); `None` unless it has two flows of one
/// algorithm with base RTTs known and both moved data.
fn point(r: &Run) -> Option<(Key, Cell)> {
    let s = &r.summary;
    if s.flows.len() != 2 || s.flows[0].cc != s.flows[1].cc {
        return None;
    }
    let sc = crate::scenario::Scenario::load(&r.dir.join("scenario.toml")).ok()?;
    // Packet limits count 1500-byte packets, as the links do; the BDP is
    // the link's own (its rate and round trip).
    let bdp = sc.link.limit_bytes(Dir::Down, QueueLimit::Bdp(1.0), 1500) as f64;
    let buffer = round2(sc.link.queue_bytes(Dir::Down, 1500) as f64 / bdp);
    let mut ratio = None;
    let mut shares = Vec::new();
    for rep in &s.repetitions {
        let [a, b] = rep.flows.as_slice() else {
            return None;
        };
        let (ra, rb) = (a.base_rtt_ms?, b.base_rtt_ms?);
        let total = a.goodput_bps + b.goodput_bps;
        if !(ra > 0.0 && rb > 0.0 && total > 0.0) {
            return None;
        }
        // The base RTTs are the path's, the same in every repetition.
        ratio.get_or_insert(round2(ra.max(rb) / ra.min(rb)));
        let short = if ra <= rb { a } else { b };
        shares.push(100.0 * short.goodput_bps / total);
    }
    let ratio = ratio?;
    let key = (s.flows[0].cc.clone(), s.link.aqm.clone());
    Some((
        key,
        Cell {
            ratio,
            buffer_bdp: buffer,
            shares,
        },
    ))
}

/// The maps the runs make: one per algorithm (and queue management) with
/// at least two cells; empty when no runs fit.
pub fn maps(runs: &[Run]) -> Vec<Map> {
    let mut by_key: BTreeMap<Key, Vec<Cell>> = BTreeMap::new();
    for (key, cell) in runs.iter().filter_map(point) {
        let cells = by_key.entry(key).or_default();
        match cells
            .iter_mut()
            .find(|c| c.ratio == cell.ratio && c.buffer_bdp == cell.buffer_bdp)
        {
            Some(c) => c.shares.extend(cell.shares),
            None => cells.push(cell),
        }
    }
    let aqms: std::collections::BTreeSet<&String> = by_key.keys().map(|(_, a)| a).collect();
    let several_aqms = aqms.len() > 1;
    by_key
        .iter()
        .filter(|(_, cells)| cells.len() >= 2)
        .map(|((cc, aqm), cells)| {
            let mut cells = cells.clone();
            cells.sort_by(|a, b| {
                a.ratio
                    .total_cmp(&b.ratio)
                    .then(a.buffer_bdp.total_cmp(&b.buffer_bdp))
            });
            Map {
                title: if several_aqms {
                    format!("{cc}, {aqm}")
                } else {
                    cc.clone()
                },
                cells,
            }
        })
        .collect()
}

/// A table cell: the mean share, and the repetitions' range when there
/// are several (two flows of one RTT can lock into an unequal split, and a
/// mean of 50 may be 20 and 80).
fn cell_text(c: &Cell) -> String {
    let lo = c.shares.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = c.shares.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if c.shares.len() > 1 {
        format!("{:.1} ({lo:.0}–{hi:.0})", c.mean())
    } else {
        format!("{:.1}", c.mean())
    }
}

/// The maps as Markdown tables: a row per RTT ratio, a column per buffer.
pub fn markdown(maps: &[Map]) -> String {
    let mut out = String::new();
    for m in maps {
        let (ratios, buffers) = m.axes();
        out += &format!(
            "\n**{}**: the shorter-RTT flow's share of the goodput, % (mean of the repetitions, their range in brackets)\n\n| RTT ratio | {} |\n|---|{}\n",
            m.title,
            buffers
                .iter()
                .map(|b| format!("{} BDP", super::chart::tick(*b)))
                .collect::<Vec<_>>()
                .join(" | "),
            "---|".repeat(buffers.len())
        );
        for r in &ratios {
            let cells: Vec<String> = buffers
                .iter()
                .map(|b| m.cell(*r, *b).map_or("–".into(), cell_text))
                .collect();
            out += &format!("| {} | {} |\n", super::chart::tick(*r), cells.join(" | "));
        }
    }
    out
}

const PANEL_W: f64 = 460.0;
const ROW_H: f64 = 34.0;
const TITLE_H: f64 = 30.0;
const PANEL_HEAD: f64 = 46.0;
const PANEL_FOOT: f64 = 40.0;

/// Size at scale 1 of the figure of `maps`, two grids a row.
pub fn size(maps: &[Map]) -> (u32, u32) {
    let rows = maps.len().div_ceil(2);
    let tallest = maps.iter().map(|m| m.axes().0.len()).max().unwrap_or(1);
    let h = TITLE_H + rows as f64 * (PANEL_HEAD + tallest as f64 * ROW_H + PANEL_FOOT);
    (WIDTH, h.ceil() as u32)
}

/// A share's colour: white at a fair 50%, deepening to red as the shorter
/// flow takes more, to blue as it takes less.
fn shade(share: f64) -> RGBColor {
    let d = ((share - 50.0) / 50.0).clamp(-1.0, 1.0);
    let mix =
        |from: u8, to: u8, f: f64| (from as f64 + (to as f64 - from as f64) * f).round() as u8;
    if d >= 0.0 {
        RGBColor(255, mix(255, 60, d), mix(255, 60, d))
    } else {
        RGBColor(mix(255, 60, -d), mix(255, 90, -d), 255)
    }
}

/// Draws the grids, two a row: RTT ratio down, buffer across, each cell
/// coloured by the shorter flow's share and labelled with it.
pub fn draw<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, maps: &[Map], s: f64) -> DrawResult {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    title(
        &root,
        "RTT fairness: the shorter-RTT flow's share of the goodput (%)",
        s,
    )?;
    let tallest = maps.iter().map(|m| m.axes().0.len()).max().unwrap_or(1);
    let panel_h = PANEL_HEAD + tallest as f64 * ROW_H + PANEL_FOOT;
    let text = |size: f64, h: HPos| font(s, size).color(&BLACK).pos(Pos::new(h, VPos::Center));
    for (i, m) in maps.iter().enumerate() {
        let (x0, y0) = (
            8.0 + (i % 2) as f64 * (PANEL_W + 24.0),
            TITLE_H + (i / 2) as f64 * panel_h,
        );
        let (ratios, buffers) = m.axes();
        let label_w = 70.0;
        let cw = (PANEL_W - label_w) / buffers.len().max(1) as f64;
        let at = |x: f64, y: f64| (px(s, x), px(s, y));
        root.draw(&Text::new(
            m.title.clone(),
            at(x0, y0 + 12.0),
            font(s, 13.0)
                .style(FontStyle::Bold)
                .color(&BLACK)
                .pos(Pos::new(HPos::Left, VPos::Center)),
        ))
        .map_err(|e| e.to_string())?;
        for (j, b) in buffers.iter().enumerate() {
            let x = x0 + label_w + (j as f64 + 0.5) * cw;
            root.draw(&Text::new(
                format!("{} BDP", super::chart::tick(*b)),
                at(x, y0 + PANEL_HEAD - 10.0),
                text(11.0, HPos::Center),
            ))
            .map_err(|e| e.to_string())?;
        }
        for (k, r) in ratios.iter().enumerate() {
            let y = y0 + PANEL_HEAD + k as f64 * ROW_H;
            root.draw(&Text::new(
                format!("{}:1", super::chart::tick(*r)),
                at(x0 + label_w - 8.0, y + ROW_H / 2.0),
                text(11.0, HPos::Right),
            ))
            .map_err(|e| e.to_string())?;
            for (j, b) in buffers.iter().enumerate() {
                let x = x0 + label_w + j as f64 * cw;
                let Some(c) = m.cell(*r, *b) else { continue };
                let v = c.mean();
                root.draw(&Rectangle::new(
                    [at(x + 1.0, y + 1.0), at(x + cw - 1.0, y + ROW_H - 1.0)],
                    shade(v).filled(),
                ))
                .map_err(|e| e.to_string())?;
                root.draw(&Text::new(
                    format!("{v:.0}"),
                    at(x + cw / 2.0, y + ROW_H / 2.0),
                    text(12.0, HPos::Center),
                ))
                .map_err(|e| e.to_string())?;
            }
        }
        root.draw(&Text::new(
            "rows: RTT ratio (long:short); columns: buffer".to_string(),
            at(x0, y0 + PANEL_HEAD + ratios.len() as f64 * ROW_H + 16.0),
            font(s, 10.0)
                .color(&RGBColor(90, 90, 90))
                .pos(Pos::new(HPos::Left, VPos::Center)),
        ))
        .map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fair_split_is_white_and_a_bias_is_coloured_by_its_direction() {
        assert_eq!(shade(50.0), RGBColor(255, 255, 255));
        let more = shade(90.0);
        assert!(more.0 == 255 && more.1 < 255, "{more:?}");
        let less = shade(10.0);
        assert!(less.2 == 255 && less.0 < 255, "{less:?}");
        assert_eq!(shade(150.0), shade(100.0));
    }

    #[test]
    fn the_table_has_a_row_per_ratio_and_a_column_per_buffer() {
        let cell = |ratio, buffer_bdp, shares: &[f64]| Cell {
            ratio,
            buffer_bdp,
            shares: shares.to_vec(),
        };
        let m = Map {
            title: "newreno".into(),
            cells: vec![
                cell(1.0, 1.0, &[50.0, 52.0]),
                cell(4.0, 1.0, &[80.0]),
                cell(4.0, 0.5, &[90.0]),
            ],
        };
        assert_eq!(m.axes(), (vec![1.0, 4.0], vec![0.5, 1.0]));
        let t = markdown(&[m]);
        assert!(t.contains("| RTT ratio | 0.5 BDP | 1 BDP |"), "{t}");
        assert!(t.contains("| 1 | – | 51.0 (50–52) |"), "{t}");
        assert!(t.contains("| 4 | 90.0 | 80.0 |"), "{t}");
    }
}
