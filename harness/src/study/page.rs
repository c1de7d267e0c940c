//! A study's pages: `STUDY.md` (the block the docs include), `index.html`,
//! and `--publish`, which puts the Markdown block into the docs page
//! between the study's markers.

use std::fmt::Write;
use std::path::Path;

use super::{GoalResult, StudyResult, TableResult};
use crate::reproduce::expr::{fmt_stat, sig3, Stat};

/// The unit a metric is given in, for column headers.
pub fn unit(metric: &str) -> &'static str {
    match metric {
        "utilization" | "utilization_steady" | "loss_rate" | "delivery_ratio"
        | "delivery_first" | "small_share" | "cpu_busy" | "guest_cpu_busy" | "share" => "%",
        m if m.ends_with("_ms") => "ms",
        "goodput_mbps" | "eq7_mbps" => "Mbit/s",
        "data_mb" => "MB",
        "cwnd_kb" | "ss_cwnd_kb" => "KB",
        "ss_lost" => "packets",
        "ss_late_rtts" => "RTTs",
        m if m.starts_with("last:") && m.ends_with("_bps") => "bit/s",
        "queue_pkts" => "packets",
        "completion_s" | "recovery_s" => "s",
        "data_packet_bytes" => "B",
        m if m == "syscalls_per_packet" || m.starts_with("syscalls:") => "per data packet",
        _ => "",
    }
}

fn header(metric: &str, by: &str) -> String {
    // `goodput_mbps[flow=#0,link=l1]` reads `goodput_mbps flow #0 link l1`,
    // in the metric's unit.
    let (name, sel) = super::metric_column(metric).unwrap_or((metric, Default::default()));
    let u = unit(name);
    let picks: Vec<String> = [("flow", &sel.flow), ("link", &sel.link)]
        .into_iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k} {v}")))
        .collect();
    let name = if picks.is_empty() {
        name.to_string()
    } else {
        format!("{name} {}", picks.join(" "))
    };
    let m = if u.is_empty() {
        name
    } else {
        format!("{name} ({u})")
    };
    if by.is_empty() {
        m
    } else {
        format!("{m} {by}")
    }
}

fn cell(s: &Option<Stat>) -> String {
    s.as_ref().map_or_else(|| "–".to_string(), fmt_stat)
}

/// A table's cell for metric column `m`: `ss_reason` by its name (or
/// `mixed` when the repetitions ended for different reasons), the rest
/// as numbers.
fn table_cell(m: &str, s: &Option<Stat>) -> String {
    let name = super::metric_column(m).map_or(m, |(n, _)| n);
    match s {
        Some(s) if name == "ss_reason" => {
            if s.ci95 > 0.0 {
                "mixed".into()
            } else {
                crate::reproduce::metrics::reason_label(s.mean).into()
            }
        }
        _ => cell(s),
    }
}

/// Who made the runs: each backend's build.
fn provenance(r: &StudyResult) -> String {
    let builds: Vec<String> = r
        .builds
        .iter()
        .map(|(b, x)| {
            let mut revs: Vec<String> = x.iter().map(|x| format!("`{}`", x.git_revision)).collect();
            revs.dedup();
            format!("{b} at {}", revs.join(" and "))
        })
        .collect();
    format!(
        "{} run(s) ({} made by this invocation, the rest reused); made by {}; `{}`",
        r.runs,
        r.ran,
        builds.join(", "),
        r.command
    )
}

/// The skipped points grouped by their reason, with the flow's own name
/// taken out of it (`tcp:reno is a Linux TCP flow, ...` once for all).
pub(super) fn skipped_by_reason(r: &StudyResult) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for k in &r.skipped {
        // The reason without its first backquoted name.
        let why = match (k.why.find('`'), k.why.get(1..).and_then(|t| t.find('`'))) {
            (Some(0), Some(j)) => format!("the flow{}", &k.why[j + 2..]),
            _ => k.why.clone(),
        };
        match out.iter_mut().find(|(w, _)| *w == why) {
            Some((_, v)) => v.push(k.point.clone()),
            None => out.push((why, vec![k.point.clone()])),
        }
    }
    out
}

fn md_table(t: &TableResult, out: &mut String) {
    if !t.title.is_empty() {
        let _ = writeln!(out, "**{}**\n", t.title);
    }
    let mut head: Vec<String> = t.row_axes.clone();
    head.extend(t.columns.iter().map(|(m, b)| header(m, b)));
    let _ = writeln!(out, "| {} |", head.join(" | "));
    let _ = writeln!(
        out,
        "|{}",
        head.iter()
            .enumerate()
            .map(|(i, _)| if i < t.row_axes.len() {
                "---|"
            } else {
                "---:|"
            })
            .collect::<String>()
    );
    for (labels, cells) in &t.rows {
        let mut row = labels.clone();
        row.extend(
            cells
                .iter()
                .zip(&t.columns)
                .map(|(c, (m, _))| table_cell(m, c)),
        );
        let _ = writeln!(out, "| {} |", row.join(" | "));
    }
    out.push('\n');
}

fn place_verdict(p: &super::Place) -> String {
    // One run a side (a deterministic simulation) has no noise to be
    // within: the verdict says so instead.
    let one = p.a.is_some_and(|a| a.n == 1) && p.b.is_none_or(|b| b.n == 1);
    match (p.holds, p.significant) {
        (Some(true), true) => "met".into(),
        (Some(true), false) if one => "met (one run)".into(),
        (Some(true), false) => "met (within noise)".into(),
        (Some(false), true) => "missed".into(),
        (Some(false), false) if one => "missed (one run)".into(),
        (Some(false), false) => "missed (within noise)".into(),
        (None, _) => format!("not measured: {}", p.problem.as_deref().unwrap_or("")),
    }
}

/// The goal's sides and rule in words: `` `a` against `b`, within 3
/// points`` or `` `a`, at most 1 ms``.
fn goal_rule(g: &GoalResult, code: fn(&str) -> String) -> String {
    let u = unit(&g.metric);
    // A tolerance or bound on a percentage is in points; "20%" and
    // "20% of b" say their own unit.
    let unit = match u {
        _ if g.rule.ends_with('%') || g.rule.ends_with("of b") => String::new(),
        _ if g.rule.ends_with(" b") => String::new(),
        "" => String::new(),
        "%" => " points".to_string(),
        u => format!(" {u}"),
    };
    match &g.b {
        Some(b) => format!("{} against {}, {}{unit}", code(&g.a), code(b), g.rule),
        None => format!("{}, {}{unit}", code(&g.a), g.rule),
    }
}

/// A place's row: at, a, b, then the difference and tolerance (within)
/// or the bound (one-sided), and the verdict.
fn goal_row(g: &GoalResult, p: &super::Place) -> Vec<String> {
    let mut row = vec![
        if p.at.is_empty() {
            "–".into()
        } else {
            p.at.clone()
        },
        cell(&p.a),
    ];
    if g.b.is_some() {
        row.push(cell(&p.b));
    }
    if g.two_sided {
        row.push(match (p.a, p.b) {
            (Some(a), Some(b)) => sig3(a.mean - b.mean),
            _ => "–".into(),
        });
        row.push(p.tolerance.map_or("–".into(), sig3));
    } else {
        row.push(p.bound.map_or("–".into(), sig3));
    }
    row.push(place_verdict(p));
    row
}

fn goal_head(g: &GoalResult) -> Vec<&'static str> {
    let mut h = vec!["at", "a"];
    if g.b.is_some() {
        h.push("b");
    }
    if g.two_sided {
        h.extend(["difference", "tolerance"]);
    } else {
        h.push("bound");
    }
    h.push("verdict");
    h
}

fn md_goal(g: &GoalResult, out: &mut String) {
    let _ = writeln!(
        out,
        "**{}**: {} ({}, {}): **{}**.\n",
        g.id,
        g.statement,
        g.metric,
        goal_rule(g, |s| format!("`{s}`")),
        g.verdict()
    );
    let head = goal_head(g);
    let _ = writeln!(out, "| {} |", head.join(" | "));
    let _ = writeln!(
        out,
        "|---|{}",
        head[1..]
            .iter()
            .map(|h| if *h == "verdict" { "---|" } else { "---:|" })
            .collect::<String>()
    );
    for p in &g.places {
        let _ = writeln!(out, "| {} |", goal_row(g, p).join(" | "));
    }
    out.push('\n');
}

/// `STUDY.md`: what the study found, with its provenance.
pub fn markdown(r: &StudyResult) -> String {
    markdown_with(r, "")
}

/// The Markdown with the figures' links under `fig_prefix`.
fn markdown_with(r: &StudyResult, fig_prefix: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "### {}\n", r.title);
    let _ = writeln!(out, "{}\n", provenance(r));
    if r.interrupted {
        out.push_str("**Interrupted**: some runs are missing.\n\n");
    }
    for f in &r.failed {
        let _ = writeln!(out, "- failed: {f}");
    }
    for (why, points) in skipped_by_reason(r) {
        let _ = writeln!(out, "- skipped {}: {why}", points.join(", "));
    }
    if !r.failed.is_empty() || !r.skipped.is_empty() {
        out.push('\n');
    }
    for t in &r.tables {
        md_table(t, &mut out);
    }
    for (title, file) in &r.figures {
        let _ = writeln!(out, "![{title}]({fig_prefix}{file})\n");
    }
    if !r.goals.is_empty() {
        out.push_str(
            "Goals (means over the repetitions ± 95% confidence; a verdict is within noise when moving the difference by the sum of the two half-widths would change it):\n\n",
        );
        for g in &r.goals {
            md_goal(g, &mut out);
        }
    }
    out
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `index.html`: the same, as a page of its own.
pub fn html(r: &StudyResult) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{}</title><style>\
body{{font-family:system-ui,sans-serif;max-width:70em;margin:2em auto;padding:0 1em;color:#222}}\
table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:.25em .6em}}\
td.n{{text-align:right;font-variant-numeric:tabular-nums}}th{{background:#f4f4f4}}\
.met{{color:#176117}}.missed{{color:#a11}}.noise{{color:#777}}code{{background:#f4f4f4}}\
</style></head><body>",
        esc(&r.title)
    );
    let _ = write!(o, "<h1>{}</h1>", esc(&r.title));
    if !r.about.is_empty() {
        let _ = write!(o, "<p>{}</p>", esc(&r.about));
    }
    let _ = write!(o, "<p>{}</p>", esc(&provenance(r)));
    if r.interrupted {
        o.push_str("<p class=\"missed\"><b>Interrupted</b>: some runs are missing.</p>");
    }
    for f in &r.failed {
        let _ = write!(o, "<p class=\"missed\">failed: {}</p>", esc(f));
    }
    for (why, points) in skipped_by_reason(r) {
        let _ = write!(
            o,
            "<p class=\"noise\">skipped {}: {}</p>",
            esc(&points.join(", ")),
            esc(&why)
        );
    }
    for t in &r.tables {
        if !t.title.is_empty() {
            let _ = write!(o, "<h2>{}</h2>", esc(&t.title));
        }
        o.push_str("<table><tr>");
        for a in &t.row_axes {
            let _ = write!(o, "<th>{}</th>", esc(a));
        }
        for (m, b) in &t.columns {
            let _ = write!(o, "<th>{}</th>", esc(&header(m, b)));
        }
        o.push_str("</tr>");
        for (labels, cells) in &t.rows {
            o.push_str("<tr>");
            for l in labels {
                let _ = write!(o, "<td>{}</td>", esc(l));
            }
            for (c, (m, _)) in cells.iter().zip(&t.columns) {
                let _ = write!(o, "<td class=\"n\">{}</td>", esc(&table_cell(m, c)));
            }
            o.push_str("</tr>");
        }
        o.push_str("</table>");
    }
    for (title, file) in &r.figures {
        let svg = std::fs::read_to_string(r.dir.join(file)).unwrap_or_default();
        let _ = write!(o, "<h2>{}</h2><div>{svg}</div>", esc(title));
    }
    if !r.goals.is_empty() {
        o.push_str("<h2>Goals</h2>");
    }
    for g in &r.goals {
        let _ = write!(
            o,
            "<h3>{}</h3><p>{} (<code>{}</code>, {}): <b>{}</b></p>",
            esc(&g.id),
            esc(&g.statement),
            esc(&g.metric),
            goal_rule(g, |s| format!("<code>{}</code>", esc(s))),
            esc(&g.verdict())
        );
        o.push_str("<table><tr>");
        for h in goal_head(g) {
            let _ = write!(o, "<th>{h}</th>");
        }
        o.push_str("</tr>");
        for p in &g.places {
            let row = goal_row(g, p);
            let class = match (p.holds, p.significant) {
                (Some(true), true) => "met",
                (Some(false), true) => "missed",
                _ => "noise",
            };
            o.push_str("<tr>");
            for (i, c) in row.iter().enumerate() {
                let cls = if i == 0 {
                    String::new()
                } else if i + 1 == row.len() {
                    format!(" class=\"{class}\"")
                } else {
                    " class=\"n\"".into()
                };
                let _ = write!(o, "<td{cls}>{}</td>", esc(c));
            }
            o.push_str("</tr>");
        }
        o.push_str("</table>");
    }
    o.push_str("</body></html>\n");
    o
}

/// Puts `r`'s Markdown into `page` between `<!-- study NAME -->` and
/// `<!-- /study NAME -->`, replacing what was there; the page is written
/// atomically, its figures copied to `images/study-NAME-*.svg` beside it.
/// Names the markers when they are missing.
pub fn publish(r: &StudyResult, page: &Path) -> std::io::Result<()> {
    let text = std::fs::read_to_string(page)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", page.display())))?;
    let open = format!("<!-- study {} -->", r.study);
    let close = format!("<!-- /study {} -->", r.study);
    let (Some(i), Some(j)) = (text.find(&open), text.find(&close)) else {
        return Err(std::io::Error::other(format!(
            "{}: no `{open}` ... `{close}` block to replace; add the two lines where the study's tables go",
            page.display()
        )));
    };
    if j < i {
        return Err(std::io::Error::other(format!(
            "{}: `{close}` comes before `{open}`",
            page.display()
        )));
    }
    let images = page.parent().unwrap_or(Path::new(".")).join("images");
    let prefix = format!("images/study-{}-", r.study);
    if !r.figures.is_empty() {
        std::fs::create_dir_all(&images)?;
    }
    for (_, file) in &r.figures {
        std::fs::copy(
            r.dir.join(file),
            images.join(format!("study-{}-{file}", r.study)),
        )?;
    }
    let new = format!(
        "{}{open}\n\n{}{}",
        &text[..i],
        markdown_with(r, &prefix),
        &text[j..]
    );
    let tmp = page.with_extension("md.tmp");
    std::fs::write(&tmp, new)?;
    std::fs::rename(&tmp, page)
}
