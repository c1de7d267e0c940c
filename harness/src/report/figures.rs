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
    let mut out = vec![
        first,
        cwnd(&series, dir)?,
        rtt(&series, dir)?,
        goodput(&series, dir)?,
        queue(&series, dir)?,
    ];
    let jain = series.jain_panels(1.0);
    if !jain.is_empty() {
        out.push(multiples(
            Multiples {
                name: "jain",
                title: "Jain's fairness index",
                y_unit: "1 = equal shares",
                x_desc: "over time (s), 1 s windows",
                note: format!(
                    "Jain's index over the goodput of the flows running through each second \
                     (from each receiver's qlog; Linux TCP flows left out), for the runs of \
                     several flows. {}",
                    series.left_out()
                ),
                panels: jain,
                legend: Vec::new(),
            },
            dir,
        )?);
    }
    if let Some(f) = completion_times(runs, dir)? {
        out.push(f);
    }
    let maps = super::rtt_map::maps(runs);
    if !maps.is_empty() {
        out.push(render(
            "rtt-fairness",
            "RTT fairness",
            "Runs of two flows of one algorithm with different round-trip times (a sweep over \
             a flow's <code>rtt</code> and the link's <code>queue</code>): the shorter-RTT \
             flow's share of the two flows' goodput, mean of the repetitions, at each RTT \
             ratio (the longer base RTT over the shorter) and buffer (the queue limit in BDPs \
             of the link's own round trip). 50% is fair; red: the shorter flow takes more, \
             blue: less."
                .to_string(),
            Kind::RttMap(&maps),
            Some(dir),
        )?);
    }
    Ok(out)
}

/// The completion times of sized flows (`fct` in summary.json), as a CDF
/// per run and size class; none when no run has sized flows.
fn completion_times(runs: &[Run], dir: &Path) -> Result<Option<Rendered>, String> {
    let mut panels = Vec::new();
    for r in runs {
        let colour = super::palette::colour(r.summary.flows.first().map_or("", |f| f.cc.as_str()));
        for c in &r.summary.fct {
            let times: Vec<f64> = c.fct_s.clone();
            if times.is_empty() {
                continue;
            }
            let n = times.len() as f64;
            // A step CDF: at each time, the share of flows done by then.
            let mut pts = vec![(0.0, 0.0)];
            for (i, t) in times.iter().enumerate() {
                pts.push((*t, i as f64 / n));
                pts.push((*t, (i + 1) as f64 / n));
            }
            let kb = |b: f64| {
                if b >= 1e18 {
                    "more".to_string()
                } else {
                    format!("{:.0} kB", b / 1e3)
                }
            };
            let above = c.above_bytes as f64;
            let up_to = c.up_to_bytes as f64;
            panels.push(super::series::Panel {
                title: format!(
                    "{}: {} to {} ({} of {} flows done)",
                    r.label,
                    kb(above),
                    kb(up_to),
                    c.completed,
                    c.flows
                ),
                colour,
                traces: vec![super::series::Trace { colour, pts }],
                marks: Vec::new(),
            });
        }
    }
    if panels.is_empty() {
        return Ok(None);
    }
    panels.truncate(super::series::MAX_PANELS);
    multiples(
        Multiples {
            name: "fct",
            title: "Flows completed",
            y_unit: "share",
            x_desc: "by completion time (s)",
            note: "The completion times of the flows of a given size (every [[arrivals]] flow, \
                   and sized flows of one request): from the client's start, handshake \
                   included, to the response's last byte, over every repetition; one panel per \
                   run and size class (sizes above the first bound, up to the second), the \
                   colour that of the run's first flow's algorithm."
                .into(),
            panels,
            legend: Vec::new(),
        },
        dir,
    )
    .map(Some)
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
            x_desc: "over time (s)",
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
            x_desc: "over time (s)",
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
            x_desc: "over time (s)",
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
            x_desc: "over time (s)",
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
