//! The report's text: the per-group table (HTML or Markdown) and the page
//! around the figures. The page is one self-contained file: styles, the
//! table-sorting script and the SVG figures are inline.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use super::data::{Group, Run};
use super::palette::{colour, hex};
use super::render::Rendered;
use crate::run::mean_ci;

pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `mean ± half-width` (the half-width only with more than one value),
/// and the mean for sorting.
fn fmt_ci(xs: &[f64], scale: f64, digits: usize) -> (String, Option<f64>) {
    if xs.is_empty() {
        return ("–".into(), None);
    }
    let (m, h) = mean_ci(xs);
    let text = if xs.len() > 1 {
        format!("{:.*} ± {:.*}", digits, m * scale, digits, h * scale)
    } else {
        format!("{:.*}", digits, m * scale)
    };
    (text, Some(m * scale))
}

const HEADERS: [&str; 9] = [
    "algorithm",
    "flows × reps",
    "goodput (Mbit/s)",
    "RTT mean (ms)",
    "RTT p95 (ms)",
    "utilization (%)",
    "queueing delay (ms)",
    "lost packets",
    "Jain's index",
];

pub const TABLE_NOTE: &str = "Values are means over flows and repetitions (goodput, RTT, loss) or over repetitions (utilization, queueing delay, fairness) with 95% confidence half-widths (Student t) where there is more than one. Linux TCP flows (tcp:NAME) count no lost packets: theirs is the segments the kernel retransmitted, marked \"retx\", and their RTT is the smoothed RTT sampled every 10 ms.";

fn cells(g: &Group) -> Vec<(String, Option<f64>)> {
    vec![
        (g.goodput.len().to_string(), Some(g.goodput.len() as f64)),
        fmt_ci(&g.goodput, 1e-6, 2),
        fmt_ci(&g.rtt_mean, 1.0, 1),
        fmt_ci(&g.rtt_p95, 1.0, 1),
        fmt_ci(&g.util, 100.0, 1),
        fmt_ci(&g.queue, 1.0, 1),
        lost_cell(g),
        fmt_ci(&g.jain, 1.0, 3),
    ]
}

/// Lost packets, or for Linux TCP flows (which count none) the segments
/// retransmitted, marked.
fn lost_cell(g: &Group) -> (String, Option<f64>) {
    if g.lost.is_empty() && !g.retransmitted.is_empty() {
        let (text, v) = fmt_ci(&g.retransmitted, 1.0, 0);
        return (format!("{text} retx"), v);
    }
    fmt_ci(&g.lost, 1.0, 0)
}

/// The table as Markdown.
pub fn table_markdown(groups: &BTreeMap<String, Group>) -> String {
    let mut t = format!(
        "| {} |\n|{}\n",
        HEADERS.join(" | "),
        "---|".repeat(HEADERS.len())
    );
    for (name, g) in groups {
        let row: Vec<String> = cells(g).into_iter().map(|c| c.0).collect();
        let _ = writeln!(t, "| {} | {} |", name, row.join(" | "));
    }
    t
}

/// The table as HTML: a colour swatch per row, sortable by any column.
pub fn table_html(groups: &BTreeMap<String, Group>) -> String {
    let head: String = HEADERS
        .iter()
        .map(|h| format!("<th title=\"sort\">{}</th>", esc(h)))
        .collect();
    let mut t = format!(
        "<div class=\"tw\"><table class=\"sortable\"><thead><tr>{head}</tr></thead><tbody>\n"
    );
    for (name, g) in groups {
        let _ = write!(
            t,
            "<tr><td data-v=\"{n}\"><span class=\"sw\" style=\"background:{c}\"></span>{n}</td>",
            n = esc(name),
            c = hex(colour(&g.cc))
        );
        for (text, v) in cells(g) {
            match v {
                Some(v) => {
                    let _ = write!(t, "<td data-v=\"{v}\">{}</td>", esc(&text));
                }
                None => {
                    let _ = write!(t, "<td data-v=\"\">{}</td>", esc(&text));
                }
            }
        }
        t += "</tr>\n";
    }
    t + "</tbody></table></div>\n"
}

/// Sorts a table by the clicked column (numbers by `data-v`, empty last).
const SCRIPT: &str = r#"
document.querySelectorAll('table.sortable').forEach(function (table) {
  var heads = table.tHead.rows[0].cells;
  Array.prototype.forEach.call(heads, function (th, col) {
    th.addEventListener('click', function () {
      var asc = th.getAttribute('data-dir') !== 'asc';
      Array.prototype.forEach.call(heads, function (h) { h.removeAttribute('data-dir'); });
      th.setAttribute('data-dir', asc ? 'asc' : 'desc');
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var key = function (r) {
        var v = r.cells[col].getAttribute('data-v');
        var n = parseFloat(v);
        return isNaN(n) ? v : n;
      };
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        if (x === '' || y === '') { return (x === '') - (y === ''); }
        var o = (typeof x === 'number' && typeof y === 'number') ? x - y : String(x).localeCompare(String(y));
        return asc ? o : -o;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
"#;

const STYLE: &str = "body{font-family:sans-serif;max-width:980px;margin:2em auto;padding:0 10px;color:#222}\
.tw{overflow-x:auto}table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:4px 7px;text-align:right}td{white-space:nowrap;font-variant-numeric:tabular-nums}\
td:first-child,th:first-child{text-align:left;white-space:nowrap}th{cursor:pointer;background:#f4f4f4}\
th[data-dir=asc]::after{content:' \\25B2'}th[data-dir=desc]::after{content:' \\25BC'}\
.sw{display:inline-block;width:10px;height:10px;margin-right:6px;border-radius:2px}\
h2{margin-top:2em}.note{color:#555;font-size:13px}figure{margin:1em 0}\
figure svg{max-width:100%;height:auto;display:block}figcaption{color:#555;font-size:13px}";

fn figure_html(f: &Rendered, page_dir: &Path) -> String {
    let links: Vec<String> = f
        .files
        .iter()
        .map(|p| {
            let rel = p.strip_prefix(page_dir).unwrap_or(p);
            let ext = p
                .extension()
                .map(|e| e.to_string_lossy().to_uppercase())
                .unwrap_or_default();
            format!("<a href=\"{}\">{ext}</a>", esc(&rel.display().to_string()))
        })
        .collect();
    let links = if links.is_empty() {
        String::new()
    } else {
        format!(" Files: {}.", links.join(" · "))
    };
    format!(
        "<h2>{h}</h2>\n<figure class=\"fig\" id=\"fig-{n}\" data-panels=\"{p}\">\n{svg}\n<figcaption>{note}{links}</figcaption></figure>\n",
        h = esc(&f.heading),
        n = esc(&f.name),
        p = f.panels,
        svg = f.svg,
        note = esc(&f.note),
    )
}

fn run_list(runs: &[Run]) -> String {
    runs.iter()
        .map(|r| {
            format!(
                "<li><code>{}</code>: {} ({}, {:.0} Mbit/s, {:.0} ms RTT, {})</li>",
                esc(&r.dir.display().to_string()),
                esc(&r.summary.scenario),
                esc(&r.summary.link.backend),
                r.summary.link.rate_bps / 1e6,
                r.summary.link.rtt_ms,
                esc(&r.summary.status)
            )
        })
        .collect()
}

/// Each run's scheduled changes and the link's recovery from each
/// (`bottleneck.recoveries`: the time until it carried 90% of the
/// capacity in force for 0.5 s), as rows of (run, algorithms, time,
/// change, recovery); none when no run had changes.
pub fn recovery_rows(runs: &[Run]) -> Vec<[String; 5]> {
    let mut rows = Vec::new();
    for r in runs {
        let mut ccs: Vec<&str> = r.summary.flows.iter().map(|f| f.cc.as_str()).collect();
        ccs.sort_unstable();
        ccs.dedup();
        for c in &r.summary.bottleneck.recoveries {
            rows.push([
                r.label.clone(),
                ccs.join(", "),
                format!("{:.3} s", c.at_s),
                c.change.clone(),
                c.recovery_s
                    .map_or("not within the run".into(), |x| format!("{x:.1} s")),
            ]);
        }
    }
    rows
}

const RECOVERY_HEAD: [&str; 5] = ["run", "algorithm", "at", "change", "recovery"];

/// Markdown section: [`recovery_rows`] as a table (empty without changes).
pub fn recovery_markdown(runs: &[Run]) -> String {
    let rows = recovery_rows(runs);
    if rows.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "\n## Recovery after scheduled changes\n\n| {} |\n|---|---|---|---|---|\n",
        RECOVERY_HEAD.join(" | ")
    );
    for r in rows {
        s += &format!("| {} |\n", r.join(" | "));
    }
    s + &format!("\n{RECOVERY_NOTE}\n")
}

const RECOVERY_NOTE: &str = "Recovery: from the change until the link carried at least 90% of the capacity then in force for at least 0.5 s (to the samples' 100 ms), the mean over the repetitions that recovered (docs/metrics.md).";

fn recovery_html(runs: &[Run]) -> String {
    let rows = recovery_rows(runs);
    if rows.is_empty() {
        return String::new();
    }
    let head: String = RECOVERY_HEAD
        .iter()
        .map(|h| format!("<th>{h}</th>"))
        .collect();
    let body: String = rows
        .iter()
        .map(|r| {
            let cells: String = r.iter().map(|c| format!("<td>{}</td>", esc(c))).collect();
            format!("<tr>{cells}</tr>\n")
        })
        .collect();
    format!(
        "<h2>Recovery after scheduled changes</h2>\n<div class=\"tw\"><table class=\"sortable\"><thead><tr>{head}</tr></thead><tbody>\n{body}</tbody></table></div><p class=\"note\">{RECOVERY_NOTE}</p>\n"
    )
}

/// A note on results from the virtual-time link, when there are any.
pub fn sim_note(runs: &[Run]) -> &'static str {
    if runs.iter().any(|r| r.summary.link.backend == "sim") {
        " Runs on the <code>sim</code> link use virtual time: endpoint CPU time counts as zero."
    } else {
        ""
    }
}

/// The whole page.
pub fn page(
    runs: &[Run],
    groups: &BTreeMap<String, Group>,
    figures: &[Rendered],
    page_dir: &Path,
) -> String {
    let figs: String = figures.iter().map(|f| figure_html(f, page_dir)).collect();
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>cclab report</title>\n<style>{STYLE}</style></head><body>\n<h1>cclab report</h1>\n<p>Generated {} from {} run(s).{}</p>\n<h2>Per algorithm</h2>\n{}<p class=\"note\">{TABLE_NOTE} Click a column to sort.</p>\n{}{figs}<h2>Runs</h2><ul>{}</ul>\n<script>{SCRIPT}</script>\n</body></html>\n",
        crate::run::now_rfc3339(),
        runs.len(),
        sim_note(runs),
        table_html(groups),
        recovery_html(runs),
        run_list(runs),
    )
}
