//! What a reproduction says: `REPRODUCTION.md` and the one-screen
//! terminal summary.

use std::fmt::Write as _;

use super::expr::{fmt_stat, sig3};
use super::figures::metric_unit;
use super::manifest::Manifest;
use super::{ClaimResult, JobView, PaperResult};

fn paper_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "–".into(),
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Object(o) => o
            .iter()
            .map(|(k, v)| {
                format!(
                    "{k} {}",
                    v.as_f64().map(sig3).unwrap_or_else(|| v.to_string())
                )
            })
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    }
}

fn ours_text(c: &ClaimResult) -> String {
    if c.ours.is_empty() {
        return "–".into();
    }
    let mut by_at: Vec<(Option<String>, Vec<String>)> = Vec::new();
    for m in &c.ours {
        let s = format!("{} {}", m.label, fmt_stat(&m.stat));
        match by_at.iter_mut().find(|(a, _)| *a == m.at) {
            Some((_, v)) => v.push(s),
            None => by_at.push((m.at.clone(), vec![s])),
        }
    }
    by_at
        .into_iter()
        .map(|(at, v)| match at {
            Some(a) => format!("[{a}] {}", v.join(", ")),
            None => v.join(", "),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// `REPRODUCTION.md` for one paper.
pub fn markdown(m: &Manifest, r: &PaperResult, jobs: &JobView<'_>) -> String {
    let mut s = String::new();
    header(&mut s, r);
    claims_table(&mut s, r);
    verdicts(&mut s, r);
    sensitivity(&mut s, r);
    figures(&mut s, m, r);
    experiments(&mut s, m, jobs);
    if !m.notes.is_empty() {
        let _ = writeln!(s, "\n## Choices where the paper is silent or ambiguous\n");
        for n in &m.notes {
            let _ = writeln!(s, "- {n}");
        }
    }
    s
}

/// The title, how the reproduction ran, and the verdict counts.
fn header(s: &mut String, r: &PaperResult) {
    let _ = writeln!(s, "# Reproduction: {}\n", r.title);
    let _ = writeln!(
        s,
        "Paper: `seeds/{}`. Reproduced with `cclab reproduce {}{}` on the `{}` link: {} run(s), {} of them by this invocation (the rest reused from an earlier one), which took {:.0} s of wall time{}.\n",
        r.seed,
        r.paper,
        if r.quick { " --quick" } else { "" },
        r.backend,
        r.runs,
        r.ran,
        r.wall_s,
        if r.quick { "; **quick mode: fewer repetitions and shorter runs than the paper's, so treat verdicts as indicative**" } else { "" }
    );
    let _ = writeln!(
        s,
        "Runs made by build `{}` (binaries {}).\n",
        r.build.git_revision, r.build.fingerprint
    );
    let _ = writeln!(s, "**{} claims: {}.**\n", r.counts.claims, r.counts.line());
    let _ = writeln!(
        s,
        "A verdict is the directional test on the means over repetitions. It counts as agreement (PASS) or disagreement (FAIL) only when the two sides' 95% confidence intervals do not overlap (the means differ by more than the sum of the half-widths; for a trend, its first and last points) and the difference is at least the claim's minimum effect ({:.0}% of the larger side unless the claim states another); otherwise it is \"within noise\" and is not evidence either way. A claim that repeats another's phenomenon on the same runs (duplicate), each of a pair the paper states both ways (contradictory), and an outcome our setup guarantees are shown but not counted. A claim that tests a reinterpretation of ours rather than the paper's text is counted on a line of its own. Values are mean ± 95% CI half-width.\n",
        100.0 * super::manifest::DEFAULT_MIN_EFFECT
    );
    if r.interrupted {
        let _ = writeln!(s, "**Interrupted**: some runs did not finish; their claims FAIL with \"no measurement\".\n");
    }
    if !r.failed.is_empty() {
        let _ = writeln!(s, "Failed runs: {}\n", r.failed.join("; "));
    }
}

/// One row per claim: the paper's values and ours, the test, the verdict.
fn claims_table(s: &mut String, r: &PaperResult) {
    let _ = writeln!(s, "## Claims\n");
    let _ = writeln!(
        s,
        "| id | source | claim | metric | paper | ours | test | verdict |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|");
    for c in &r.claims {
        let v = c.label();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | **{}** |",
            cell(&c.id),
            cell(&c.source),
            cell(&c.statement),
            c.metric.as_deref().map(metric_unit).unwrap_or("–"),
            cell(&paper_text(&c.paper)),
            cell(&ours_text(c)),
            cell(&test_text(c)),
            v
        );
    }
}

/// A claim's test as the table shows it.
fn test_text(c: &ClaimResult) -> String {
    match (&c.test, &c.over) {
        (Some(t), Some(o)) if t.starts_with("increasing") || t.starts_with("decreasing") => {
            format!("`{t}` along {o}")
        }
        (Some(t), Some(o)) => format!("`{t}` at each {o}"),
        (Some(t), None) => format!("`{t}`"),
        _ => "–".into(),
    }
}

/// Each verdict with its figures or reason.
fn verdicts(s: &mut String, r: &PaperResult) {
    let _ = writeln!(s, "\n## Verdicts explained\n");
    for c in &r.claims {
        let _ = write!(s, "- **{}** {}: ", c.id, c.label());
        match c.verdict.as_str() {
            "N/A" => {
                let _ = write!(s, "{}", c.reason.as_deref().unwrap_or(""));
            }
            _ => {
                let _ = write!(s, "{}.", c.detail);
                if c.verdict == "FAIL" {
                    if let Some(why) = &c.reason {
                        let _ = write!(s, " Likely reason: {why}");
                    }
                }
            }
        }
        if let Some(re) = &c.reinterpretation {
            let _ = write!(s, " **Tests our reinterpretation:** {re}");
        }
        if let Some(cv) = &c.caveat {
            let _ = write!(s, " **Caveat:** {cv}");
        }
        if let Some(n) = &c.note {
            let _ = write!(s, " ({n})");
        }
        let _ = writeln!(s);
    }
}

/// Each sensitivity run: the base experiment's claims, as counted and as
/// they come out with the one setting changed.
fn sensitivity(s: &mut String, r: &PaperResult) {
    for v in &r.sensitivity {
        let _ = writeln!(
            s,
            "\n## Sensitivity: {} (experiment `{}`, the claims of `{}`; not counted)\n",
            v.varies, v.experiment, v.of
        );
        let _ = writeln!(
            s,
            "| id | ours, as counted | verdict | ours, here | verdict here |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|");
        for c in &v.claims {
            let base = r.claims.iter().find(|b| b.id == c.id);
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | **{}** |",
                cell(&c.id),
                base.map(|b| cell(&ours_text(b))).unwrap_or_default(),
                base.map(|b| b.label()).unwrap_or_default(),
                cell(&ours_text(c)),
                c.label()
            );
        }
    }
}

/// The paper's figures, each with what the paper says and ours.
fn figures(s: &mut String, m: &Manifest, r: &PaperResult) {
    if m.figures.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n## Figures, redrawn from our runs\n");
    for fig in &m.figures {
        let name = format!("fig-{}.svg", fig.id);
        let _ = writeln!(s, "### {} — {}\n", fig.source, fig.experiment);
        let _ = writeln!(s, "The paper: {}\n", fig.paper_says);
        if r.figures.contains(&name) {
            let _ = writeln!(s, "![{}]({name})\n", fig.source);
        } else {
            let _ = writeln!(s, "(not drawn: no data, or no font for plot labels)\n");
        }
    }
}

/// Each experiment with its points.
fn experiments(s: &mut String, m: &Manifest, jobs: &JobView<'_>) {
    let _ = writeln!(s, "## Experiments\n");
    for (ei, e) in m.experiments.iter().enumerate() {
        let pts: Vec<String> = jobs
            .iter()
            .filter(|(x, _, _)| *x == ei)
            .map(|(_, p, _)| p.dir_name())
            .collect();
        let _ = writeln!(
            s,
            "- `{}` ({}): scenario `{}`, {} point(s): {}",
            e.id,
            e.source,
            e.scenario,
            pts.len(),
            pts.join(", ")
        );
    }
}

/// The one-screen summary of a paper.
pub fn terminal(r: &PaperResult) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}: {} ({}{}, {} runs, {:.0} s): {}",
        r.paper,
        r.title,
        r.backend,
        if r.quick { ", quick" } else { "" },
        r.runs,
        r.wall_s,
        r.counts.line()
    );
    for c in &r.claims {
        let what = match c.verdict.as_str() {
            "N/A" => c.reason.clone().unwrap_or_default(),
            _ => c.detail.clone(),
        };
        let mut what: String = what.chars().take(110).collect();
        if what.len() < c.detail.len() && c.verdict != "N/A" {
            what.push('…');
        }
        use super::Class;
        let mark = match c.class {
            Class::PassWithinNoise | Class::FailWithinNoise => "*",
            Class::Duplicate | Class::Contradictory | Class::Guaranteed => "-",
            Class::Unmeasured => "!",
            _ => " ",
        };
        let counted = matches!(
            c.class,
            Class::Pass | Class::Fail | Class::PassWithinNoise | Class::FailWithinNoise
        );
        let mark = if counted && c.reinterpretation.is_some() {
            format!("{}r", mark.trim())
        } else {
            mark.to_string()
        };
        let _ = writeln!(
            s,
            "  {:<4}{:<2} {:<14} {:<12} {}",
            c.verdict,
            mark,
            c.id,
            c.source.chars().take(12).collect::<String>(),
            what
        );
    }
    let _ = writeln!(
        s,
        "  (* within noise; - not counted: duplicate, contradictory or guaranteed; ! not measured; r our reinterpretation, counted apart)  → {}",
        r.dir.join("REPRODUCTION.md").display()
    );
    s
}
