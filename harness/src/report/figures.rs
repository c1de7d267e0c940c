//! The report's figures, one function each, in the order the page shows
//! them: throughput against delay, then the small multiples of cwnd, RTT,
//! goodput and the bottleneck queue.

use std::collections::BTreeMap;
use std::path::Path;

use super::data::{Group, Run};
use super::render::{render, Kind, Rendered};
use super::scatter;
use super::series::{Multiples, Series, Signal};

/// Every figure, rendered for the page and written into `dir`.
pub fn all(
    runs: &[Run],
    groups: &BTreeMap<String, Group>,
    dir: &Path,
) -> Result<Vec<Rendered>, String> {
    let first = throughput_and_delay(groups, dir)?;
    let series = Series::load(runs);
    Ok(vec![
        first,
        cwnd(&series, dir)?,
        rtt(&series, dir)?,
        goodput(&series, dir)?,
        queue(&series, dir)?,
    ])
}

/// Goodput against 95th-percentile RTT, one labelled point per algorithm.
fn throughput_and_delay(groups: &BTreeMap<String, Group>, dir: &Path) -> Result<Rendered, String> {
    let points = scatter::points(groups);
    render(
        "scatter",
        "Throughput and delay",
        format!(
            "{} The delay axis is reversed: better is up and to the right.",
            scatter::legend_note(&points)
        ),
        Kind::Scatter(&points),
        Some(dir),
    )
}

/// The senders' congestion windows.
fn cwnd(s: &Series, dir: &Path) -> Result<Rendered, String> {
    multiples(
        Multiples {
            name: "cwnd",
            title: "Congestion window",
            y_unit: "kB",
            note: format!(
                "The sender's cwnd from its qlog (Linux TCP flows: snd_cwnd × snd_mss from \
                 TCP_INFO every 10 ms). {}",
                s.shared_note()
            ),
            panels: s.flow_panels(Signal::Cwnd),
            legend: s.legend(),
        },
        dir,
    )
}

/// The senders' smoothed RTT.
fn rtt(s: &Series, dir: &Path) -> Result<Rendered, String> {
    multiples(
        Multiples {
            name: "rtt",
            title: "Round-trip time",
            y_unit: "ms",
            note: format!(
                "The sender's smoothed RTT from its qlog (Linux TCP flows: from TCP_INFO every \
                 10 ms). {}",
                s.shared_note()
            ),
            panels: s.flow_panels(Signal::Rtt),
            legend: s.legend(),
        },
        dir,
    )
}

/// The receivers' goodput.
fn goodput(s: &Series, dir: &Path) -> Result<Rendered, String> {
    multiples(
        Multiples {
            name: "goodput",
            title: "Goodput",
            y_unit: "Mbit/s",
            note: format!(
                "Application bytes delivered per 200 ms, from the receiver's qlog (Linux TCP \
                 flows: the bytes the receiver acknowledged, from the sender's TCP_INFO). {}",
                s.shared_note()
            ),
            panels: s.flow_panels(Signal::Goodput),
            legend: s.legend(),
        },
        dir,
    )
}

/// The bottleneck queue of each run, with its drops.
fn queue(s: &Series, dir: &Path) -> Result<Rendered, String> {
    multiples(
        Multiples {
            name: "queue",
            title: "Bottleneck queue",
            y_unit: "kB",
            note: format!(
                "Queue occupancy at the end of each 100 ms sample; ticks along the top mark \
                 samples with drops. One panel per {}, first repetition; all panels share both \
                 axes.{}",
                if s.multi_link() {
                    "run and link"
                } else {
                    "run"
                },
                s.left_out()
            ),
            panels: s.queue_panels(),
            legend: Vec::new(),
        },
        dir,
    )
}

/// Renders a figure of small multiples.
fn multiples(m: Multiples, dir: &Path) -> Result<Rendered, String> {
    render(
        m.name,
        m.title,
        m.note.clone(),
        Kind::Multiples(&m),
        Some(dir),
    )
}
