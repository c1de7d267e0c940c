//! Publishing a full reproduction (`cclab reproduce --publish SRC`): each
//! paper's `REPRODUCTION.md`, `claims.json` and figures (not its runs)
//! copied from SRC (a `cclab reproduce all` output) into the docs, with
//! an index, so the latest full reproduction can be read without running
//! it.
//!
//! Each published `claims.json` gains `run_commits`, the commits its runs
//! were made at (every run's `metadata.json`); it loses `dir`, a path on
//! the machine that made it. Refused: a `--quick` reproduction; one whose
//! runs were not all made by the invocation that wrote it (reused runs);
//! runs made from a tree with uncommitted changes, unless `allow_dirty`.
//! `claims.json` is read into the types it was written from, so a field
//! renamed since is an error here, not a silently empty column.

use std::path::{Path, PathBuf};

use super::claims::Counts;
use super::PaperResult;

/// A published paper's `claims.json`: the paper's result as written, and
/// the commits its runs were made at.
#[derive(serde::Serialize)]
struct Published<'a> {
    #[serde(flatten)]
    paper: &'a PaperResult,
    run_commits: &'a [String],
}

/// What `metadata.json` says of the build that made a run.
#[derive(serde::Deserialize)]
struct RunBuild {
    #[serde(default)]
    git_revision: Option<String>,
}

/// Every `metadata.json` under `dir`.
fn metadata_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == "metadata.json") {
                out.push(p);
            }
        }
    }
    Ok(out)
}

/// The commits a paper's runs were made at, sorted, each once.
fn run_commits(dir: &Path) -> Result<Vec<String>, String> {
    let mut commits = std::collections::BTreeSet::new();
    for f in metadata_files(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let text = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
        let m: RunBuild =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", f.display()))?;
        commits.insert(m.git_revision.unwrap_or_else(|| "unknown".into()));
    }
    Ok(commits.into_iter().collect())
}

/// The papers' directories under `root` (each with a `claims.json`), in
/// name order; an error when there is none.
pub(crate) fn paper_dirs(root: &Path) -> Result<Vec<PathBuf>, String> {
    let mut papers: Vec<PathBuf> = std::fs::read_dir(root)
        .map_err(|e| format!("{}: {e}", root.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("claims.json").exists())
        .collect();
    papers.sort();
    if papers.is_empty() {
        return Err(format!("no claims.json under {}", root.display()));
    }
    Ok(papers)
}

/// The claims shown but not counted, in words.
fn not_counted(n: &Counts) -> String {
    let parts: Vec<String> = [
        (n.contradictory_pairs, "contradictory pair(s)"),
        (n.duplicates, "duplicate(s)"),
        (n.guaranteed, "guaranteed"),
    ]
    .iter()
    .filter(|(k, _)| *k > 0)
    .map(|(k, what)| format!("{k} {what}"))
    .collect();
    if parts.is_empty() {
        "–".into()
    } else {
        parts.join(", ")
    }
}

/// The verdicts on reinterpretations of ours, counted apart.
fn reinterpreted(n: &Counts) -> String {
    let r = &n.reinterpretation;
    if r.pass + r.fail + r.pass_within_noise + r.fail_within_noise == 0 {
        return "–".into();
    }
    format!(
        "{} PASS, {} FAIL; {} + {} within noise",
        r.pass, r.fail, r.pass_within_noise, r.fail_within_noise
    )
}

/// The sum of two papers' counts.
fn add(a: &Counts, b: &Counts) -> Counts {
    let (ra, rb) = (&a.reinterpretation, &b.reinterpretation);
    Counts {
        claims: a.claims + b.claims,
        pass: a.pass + b.pass,
        pass_within_noise: a.pass_within_noise + b.pass_within_noise,
        fail: a.fail + b.fail,
        fail_within_noise: a.fail_within_noise + b.fail_within_noise,
        unmeasured: a.unmeasured + b.unmeasured,
        na: a.na + b.na,
        contradictory_pairs: a.contradictory_pairs + b.contradictory_pairs,
        duplicates: a.duplicates + b.duplicates,
        guaranteed: a.guaranteed + b.guaranteed,
        reinterpretation: super::claims::Reinterpreted {
            pass: ra.pass + rb.pass,
            fail: ra.fail + rb.fail,
            pass_within_noise: ra.pass_within_noise + rb.pass_within_noise,
            fail_within_noise: ra.fail_within_noise + rb.fail_within_noise,
        },
    }
}

/// Copies the reproduction in `src` into `dst` (each paper's directory
/// replaced) and writes `dst/README.md`, the index, naming `commit` and
/// `date`; the papers published. Every paper is checked before anything
/// is written.
pub fn publish(
    src: &Path,
    dst: &Path,
    allow_dirty: bool,
    commit: &str,
    date: &str,
) -> Result<Vec<String>, String> {
    let papers = paper_dirs(src)?;
    let mut read = Vec::new();
    for p in &papers {
        let name = p
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let f = p.join("claims.json");
        let text = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
        let mut r: PaperResult =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", f.display()))?;
        if r.quick {
            return Err(format!("{name} is a --quick run; publish full runs only"));
        }
        if r.ran != r.runs {
            return Err(format!(
                "{name}: {} of {} runs were made by the invocation that wrote it; publish a reproduction run from scratch (the rest were reused)",
                r.ran, r.runs
            ));
        }
        let commits = run_commits(p)?;
        if commits.is_empty() {
            return Err(format!(
                "{name}: no run metadata.json under {}",
                p.display()
            ));
        }
        let dirty: Vec<&String> = commits
            .iter()
            .filter(|c| c.ends_with("-dirty") || *c == "unknown")
            .collect();
        if !dirty.is_empty() && !allow_dirty {
            return Err(format!(
                "{name}: runs made at {} (uncommitted changes, or no git): re-run from a clean tree, or pass --allow-dirty",
                dirty.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(", ")
            ));
        }
        r.dir = PathBuf::new();
        read.push((name, p, r, commits));
    }
    let mut rows = Vec::new();
    let mut total = Counts::default();
    let mut wall = 0.0;
    for (name, p, r, commits) in &read {
        let out = dst.join(name);
        let io = |e: std::io::Error| format!("{}: {e}", out.display());
        if out.exists() {
            std::fs::remove_dir_all(&out).map_err(io)?;
        }
        std::fs::create_dir_all(&out).map_err(io)?;
        let claims = serde_json::to_string_pretty(&Published {
            paper: r,
            run_commits: commits,
        })
        .map_err(|e| e.to_string())?;
        std::fs::write(out.join("claims.json"), claims + "\n").map_err(io)?;
        std::fs::copy(p.join("REPRODUCTION.md"), out.join("REPRODUCTION.md")).map_err(io)?;
        for e in std::fs::read_dir(p).map_err(io)? {
            let f = e.map_err(io)?.path();
            let n = f.file_name().unwrap_or_default().to_string_lossy();
            if n.starts_with("fig-") && n.ends_with(".svg") {
                std::fs::copy(&f, out.join(&*n)).map_err(io)?;
            }
        }
        let n = &r.counts;
        total = add(&total, n);
        wall += r.wall_s;
        rows.push(format!(
            "| [{name}]({name}/REPRODUCTION.md) | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} s | `{}` |",
            r.title,
            n.claims,
            n.pass,
            n.fail,
            n.pass_within_noise,
            n.fail_within_noise,
            n.unmeasured,
            n.na,
            not_counted(n),
            reinterpreted(n),
            r.runs,
            r.wall_s,
            r.build.git_revision
        ));
    }
    let t = &total;
    let mut index = vec![
        "# The seed papers, reproduced".to_string(),
        String::new(),
        format!(
            "`cclab reproduce all` on the `sim` link from scratch, published at commit `{commit}`, {date}, on a 2-core machine: {wall:.0} s of wall time for the five papers; the last column names the build that made every run (a run is reused only by the same build). Regenerate with `make reproduce && make publish-reproduction`; `cclab reproduce --check-published docs/reproduction` (in `make test`) checks this table against the published claims.json files."
        ),
        String::new(),
        "| paper | title | claims | PASS | FAIL | PASS within noise | FAIL within noise | not measured | N/A | not counted | our reinterpretations (apart) | runs | wall time | build |".into(),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|".into(),
    ];
    index.extend(rows);
    index.push(format!(
        "| **total** | | {} | {} | {} | {} | {} | {} | {} | {} | {} | | | |",
        t.claims,
        t.pass,
        t.fail,
        t.pass_within_noise,
        t.fail_within_noise,
        t.unmeasured,
        t.na,
        not_counted(t),
        reinterpreted(t)
    ));
    index.push(String::new());
    index.push("PASS and FAIL count a claim only when the two sides' 95% confidence intervals over the repetitions do not overlap (the means differ by more than the sum of the half-widths; `harness/src/reproduce/expr.rs`, `separated`) and the difference is at least the claim's minimum effect (2% of the larger side unless the claim states another); the rest are within noise and are evidence neither way. A claim that repeats another's phenomenon on the same runs, each of a pair the paper states both ways, and an outcome our setup guarantees are shown in the paper's page but not counted. A claim that tests a reinterpretation of ours (an equation the paper prints that cannot be run as printed, rewritten) is counted in its own column, never as the paper's PASS or FAIL. A FAIL is a result: each carries the measured figures and the likely reason. Every choice made where a paper is silent is in its scenarios (`scenarios/reproduce/<paper>/`) and listed at the end of its REPRODUCTION.md.".into());
    index.push(String::new());
    std::fs::write(dst.join("README.md"), index.join("\n"))
        .map_err(|e| format!("{}: {e}", dst.join("README.md").display()))?;
    Ok(read.into_iter().map(|(n, ..)| n).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The published reproduction is read back whole: every paper's
    /// claims.json parses into the types that wrote it, and publishing
    /// those again gives the same claims (figures, verdicts, counts) and
    /// the same index rows. A copy with a quick paper, a reused run or a
    /// dirty build is refused naming the paper.
    #[test]
    fn the_published_reproduction_publishes_again_the_same() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/reproduction");
        let src = tempfile::tempdir().unwrap();
        let dst = tempfile::tempdir().unwrap();
        for e in std::fs::read_dir(&root).unwrap() {
            let p = e.unwrap().path();
            if !p.join("claims.json").exists() {
                continue;
            }
            let d = src.path().join(p.file_name().unwrap());
            std::fs::create_dir_all(d.join("runs/a")).unwrap();
            for f in std::fs::read_dir(&p).unwrap() {
                let f = f.unwrap().path();
                std::fs::copy(&f, d.join(f.file_name().unwrap())).unwrap();
            }
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(p.join("claims.json")).unwrap())
                    .unwrap();
            let rev = v["run_commits"][0].as_str().unwrap().to_string();
            std::fs::write(
                d.join("runs/a/metadata.json"),
                format!("{{\"git_revision\": \"{rev}\"}}"),
            )
            .unwrap();
        }
        let names = publish(src.path(), dst.path(), false, "abc", "2026-01-01").unwrap();
        assert_eq!(names.len(), 5, "{names:?}");
        for n in &names {
            let a: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(root.join(n).join("claims.json")).unwrap(),
            )
            .unwrap();
            let b: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(dst.path().join(n).join("claims.json")).unwrap(),
            )
            .unwrap();
            assert_eq!(a, b, "{n}: claims.json changed on publishing again");
        }
        let rows = |t: &str| -> Vec<String> {
            t.lines()
                .filter(|l| l.starts_with("| [") || l.starts_with("| **total"))
                .map(str::to_string)
                .collect()
        };
        let old = std::fs::read_to_string(root.join("README.md")).unwrap();
        let new = std::fs::read_to_string(dst.path().join("README.md")).unwrap();
        assert_eq!(rows(&old), rows(&new));
        assert_eq!(rows(&new).len(), 6);

        // Refusals, each naming the paper.
        let first = &names[0];
        let meta = src.path().join(first).join("runs/a/metadata.json");
        std::fs::write(&meta, "{\"git_revision\": \"abc-dirty\"}").unwrap();
        let e = publish(src.path(), dst.path(), false, "abc", "d").unwrap_err();
        assert!(
            e.contains(first.as_str()) && e.contains("--allow-dirty"),
            "{e}"
        );
        assert!(publish(src.path(), dst.path(), true, "abc", "d").is_ok());
        let claims = src.path().join(first).join("claims.json");
        let text = std::fs::read_to_string(&claims).unwrap();
        std::fs::write(
            &claims,
            text.replacen("\"quick\": false", "\"quick\": true", 1),
        )
        .unwrap();
        let e = publish(src.path(), dst.path(), true, "abc", "d").unwrap_err();
        assert!(e.contains(first.as_str()) && e.contains("--quick"), "{e}");
    }
}
