//! `cclab report`: one self-contained HTML file (or Markdown) from result
//! directories, with every figure also written as SVG and PNG next to it
//! (`<name>-figures/`) for papers.
//!
//! - A per-algorithm table with 95% confidence intervals, sortable.
//! - Goodput against 95th-percentile RTT: one labelled point per algorithm
//!   with 95% confidence error bars over repetitions, the delay axis
//!   reversed as Pantheon draws it (better is up and to the right).
//! - Small multiples of cwnd, RTT, goodput and the bottleneck queue: one
//!   panel per run (or per flow when there is one run), panels of one
//!   quantity sharing both axes.
//!
//! Every algorithm has the same colour in every figure of every report
//! ([`palette`]); legends sit outside the data. Charts are inline SVG;
//! nothing is fetched from a CDN.

mod chart;
mod data;
mod figures;
mod html;
pub mod palette;
mod render;
pub mod rtt_map;
mod scatter;
mod series;

pub(crate) use series::thin;

use std::path::{Path, PathBuf};

use render::Rendered;

/// Writes the report for the runs under `dirs` to `out` (`.md` for
/// Markdown, anything else HTML), with its figures as SVG and PNG in
/// `<out's stem>-figures/` beside it. Returns how many runs it covers.
pub fn write(dirs: &[PathBuf], out: &Path) -> Result<usize, String> {
    let runs = data::find_runs(dirs);
    if runs.is_empty() {
        return Err(format!(
            "no results (summary.json) under {}",
            dirs.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let groups = data::groups(&runs);
    let page_dir = out.parent().unwrap_or(Path::new("")).to_path_buf();
    let stem = out
        .file_stem()
        .map_or("report".into(), |s| s.to_string_lossy().into_owned());
    let fig_dir = page_dir.join(format!("{stem}-figures"));
    let markdown = out.extension().is_some_and(|e| e == "md");
    if markdown && qlog_analysis::plot::ensure_font().is_err() {
        // Markdown without figures still says everything the table can.
        let doc = markdown_doc(&runs, &groups, &[], &page_dir);
        write_atomic(out, doc.as_bytes())?;
        return Ok(runs.len());
    }
    qlog_analysis::plot::ensure_font().map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&fig_dir).map_err(|e| format!("{}: {e}", fig_dir.display()))?;
    let figures = figures::all(&runs, &groups, &fig_dir)?;
    let doc = if markdown {
        markdown_doc(&runs, &groups, &figures, &page_dir)
    } else {
        html::page(&runs, &groups, &figures, &page_dir)
    };
    write_atomic(out, doc.as_bytes())?;
    Ok(runs.len())
}

fn markdown_doc(
    runs: &[data::Run],
    groups: &std::collections::BTreeMap<String, data::Group>,
    figures: &[Rendered],
    page_dir: &Path,
) -> String {
    let mut doc = format!(
        "# cclab report\n\n{} run(s).{}\n\n{}\n{}\n{}",
        runs.len(),
        html::sim_note(runs)
            .replace("<code>", "`")
            .replace("</code>", "`"),
        html::table_markdown(groups),
        html::TABLE_NOTE,
        html::recovery_markdown(runs)
    );
    let maps = rtt_map::maps(runs);
    if !maps.is_empty() {
        doc += &format!("\n## RTT fairness\n{}", rtt_map::markdown(&maps));
    }
    for f in figures {
        if let Some(svg) = f
            .files
            .iter()
            .find(|p| p.extension().is_some_and(|e| e == "svg"))
        {
            let rel = svg.strip_prefix(page_dir).unwrap_or(svg);
            doc += &format!(
                "\n## {}\n\n![{}]({})\n\n{}\n",
                f.heading,
                f.name,
                rel.display(),
                f.note
            );
        }
    }
    if figures.is_empty() {
        doc += "\nFigures need a TrueType font (see `qlog-analysis`'s plot module); the HTML report has them.\n";
    }
    doc
}

/// Writes `bytes` to `out` through a temporary file, making its directory.
fn write_atomic(out: &Path, bytes: &[u8]) -> Result<(), String> {
    if let Some(p) = out.parent() {
        if !p.as_os_str().is_empty() {
            std::fs::create_dir_all(p).map_err(|e| format!("{}: {e}", p.display()))?;
        }
    }
    let tmp = out.with_extension("part");
    std::fs::write(&tmp, bytes).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, out).map_err(|e| format!("{}: {e}", out.display()))
}
