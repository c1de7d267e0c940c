//! `cclab reproduce`: the chosen papers' evaluations re-run by
//! [`harness::reproduce::reproduce`], one paper after another; then each
//! claim's verdict and the totals.

use std::path::PathBuf;
use std::sync::atomic::Ordering;

use harness::link::Backend;
use harness::reproduce::{self, check, Options, PaperResult};

use crate::common::{bad_input, bin_dir, jobs, measured_qlog_level, stop_flag};

#[derive(clap::Args)]
pub struct ReproduceArgs {
    /// A paper (a directory of scenarios/reproduce/; `--list` shows them), several, or `all`.
    #[arg(required_unless_present_any = ["check_published", "publish"])]
    papers: Vec<String>,
    /// Output root: each paper writes OUT/<paper>/ (claims.json,
    /// REPRODUCTION.md, figures, runs/). Re-running resumes.
    #[arg(long, default_value = "results/reproduce")]
    out: PathBuf,
    /// Fewer repetitions and shorter runs (for CI): verdicts are indicative.
    #[arg(long)]
    quick: bool,
    /// Link backend: sim (default; virtual time), emu (real processes on
    /// the userspace emulator) or netem.
    #[arg(long, default_value = "sim")]
    link: String,
    /// Runs at once (default: one per core on sim, 1 otherwise).
    #[arg(long)]
    jobs: Option<usize>,
    /// Where the papers' directories are (default: scenarios/reproduce of
    /// this checkout).
    #[arg(long)]
    papers_dir: Option<PathBuf>,
    /// qlog level at the points that need the senders' cwnd or RTT (the
    /// others run with qlog off): metrics, core (alias packets), base or
    /// extra.
    #[arg(long, default_value = "metrics")]
    qlog_level: String,
    /// List the papers and their claims, and exit.
    #[arg(long)]
    list: bool,
    /// Print the results as JSON (all papers, every claim).
    #[arg(long)]
    json: bool,
    /// No progress output.
    #[arg(long)]
    quiet: bool,
    /// After running, check that these papers (comma-separated) are there
    /// and that every claim got a verdict with its figures (a FAIL its
    /// figures and reason, an N/A its reason) and no run failed; exit 1
    /// naming each problem. Verdicts themselves are results.
    #[arg(long, value_delimiter = ',', value_name = "PAPER,..")]
    expect: Vec<String>,
    /// Write every claim's measured figures (6 significant digits) and the
    /// build to FILE: the published pages' fingerprint.
    #[arg(long, value_name = "FILE")]
    fingerprint_write: Option<PathBuf>,
    /// Compare every claim's measured figures with the fingerprint in
    /// FILE; exit 1 naming the claims whose figures moved (sim runs are
    /// deterministic: the code changed what runs measure since FILE).
    #[arg(long, value_name = "FILE")]
    fingerprint_check: Option<PathBuf>,
    /// Check a published reproduction (DIR: README.md and each paper's
    /// claims.json and REPRODUCTION.md) says what its claims.json files
    /// say, and exit; no paper runs.
    #[arg(long, value_name = "DIR")]
    check_published: Option<PathBuf>,
    /// Publish the full reproduction in SRC (a `cclab reproduce all`
    /// output) into --publish-to: each paper's REPRODUCTION.md,
    /// claims.json (with the commits its runs were made at) and figures,
    /// and an index; then run `all --quick` with this build and write its
    /// figures into quick-figures.json there (what `make test` compares a
    /// fresh quick run with). Refuses quick runs, reused runs, and runs
    /// from a tree with uncommitted changes (unless --allow-dirty).
    #[arg(long, value_name = "SRC")]
    publish: Option<PathBuf>,
    /// Where --publish writes.
    #[arg(long, value_name = "DIR", default_value = "docs/reproduction")]
    publish_to: PathBuf,
    /// --publish runs made from a tree with uncommitted changes.
    #[arg(long)]
    allow_dirty: bool,
}

/// `cclab reproduce`.
pub fn reproduce(a: &ReproduceArgs) -> anyhow::Result<i32> {
    if let Some(dir) = &a.check_published {
        return check_published(dir);
    }
    if let Some(src) = &a.publish {
        return publish(a, src);
    }
    let chosen = choose_papers(a);
    if a.list {
        list_claims(&chosen);
        return Ok(0);
    }
    let opts = options(a)?;
    let mut results = Vec::new();
    let mut failed = false;
    for (name, dir) in &chosen {
        match reproduce::reproduce(dir, &opts) {
            Ok(r) => {
                if !a.json {
                    print!("{}", reproduce::terminal(&r));
                }
                failed |= !r.failed.is_empty();
                results.push(r);
            }
            Err(e) => {
                eprintln!("cclab reproduce {name}: {e}");
                failed = true;
            }
        }
        if opts.stop.load(Ordering::Relaxed) {
            break;
        }
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "papers": results }))?
        );
    } else if results.len() > 1 {
        print_totals(&results);
    }
    if opts.stop.load(Ordering::Relaxed) {
        return Ok(130);
    }
    let mut bad = failed;
    if !a.expect.is_empty() {
        let problems = check::problems(&results, &a.expect);
        for p in &problems {
            eprintln!("cclab reproduce: check: {p}");
        }
        eprintln!(
            "cclab reproduce: check: {}; {} problem(s)",
            check::verdict_line(&results),
            problems.len()
        );
        bad |= !problems.is_empty();
    }
    if let Some(f) = &a.fingerprint_write {
        let fp = check::fingerprint(&results);
        let text = serde_json::to_string_pretty(&fp)? + "\n";
        let tmp = f.with_extension("json.tmp");
        std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, f))?;
        eprintln!(
            "cclab reproduce: fingerprint: {} claims into {}",
            fp.claims.len(),
            f.display()
        );
    }
    if let Some(f) = &a.fingerprint_check {
        let published: check::Fingerprint = match std::fs::read(f) {
            Ok(b) => serde_json::from_slice(&b)
                .map_err(|e| anyhow::anyhow!("{}: not a fingerprint: {e}", f.display()))?,
            Err(e) => {
                eprintln!(
                    "cclab reproduce: fingerprint: {}: {e}; publish with `make reproduce && make publish-reproduction`",
                    f.display()
                );
                return Ok(1);
            }
        };
        match check::compare(&check::fingerprint(&results), &published) {
            Ok(line) => eprintln!("cclab reproduce: fingerprint: {line}"),
            Err(e) => {
                eprintln!("cclab reproduce: fingerprint: {e}");
                bad = true;
            }
        }
    }
    Ok(if bad { 1 } else { 0 })
}

/// `--publish SRC`: the pages, then the quick figures of this build.
fn publish(a: &ReproduceArgs, src: &std::path::Path) -> anyhow::Result<i32> {
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| env!("CCLAB_GIT_REV").to_string());
    let date = harness::run::now_rfc3339()[..10].to_string();
    let names = reproduce::publish::publish(src, &a.publish_to, a.allow_dirty, &commit, &date)
        .unwrap_or_else(|e| bad_input(format!("--publish: {e}")));
    eprintln!(
        "cclab reproduce: published {} paper(s) into {}; now the quick figures of this build",
        names.len(),
        a.publish_to.display()
    );
    let quick = PathBuf::from("target/reproduce-publish-quick");
    let _ = std::fs::remove_dir_all(&quick);
    let status = std::process::Command::new(std::env::current_exe()?)
        .args(["reproduce", "all", "--quick", "--quiet", "--out"])
        .arg(&quick)
        .arg("--fingerprint-write")
        .arg(a.publish_to.join("quick-figures.json"))
        .stdout(std::process::Stdio::null())
        .status()?;
    Ok(if status.success() { 0 } else { 1 })
}

/// `--check-published DIR`.
fn check_published(dir: &std::path::Path) -> anyhow::Result<i32> {
    let (n, problems) = check::published_problems(dir).map_err(|e| anyhow::anyhow!("{e}"))?;
    for p in &problems {
        eprintln!("cclab reproduce: published: {p}");
    }
    println!(
        "cclab reproduce: published: {n} paper(s) under {}, {} problem(s)",
        dir.display(),
        problems.len()
    );
    Ok(if problems.is_empty() { 0 } else { 1 })
}

/// Where the papers' directories are.
fn papers_root(a: &ReproduceArgs) -> PathBuf {
    if let Some(d) = &a.papers_dir {
        return d.clone();
    }
    let here = PathBuf::from("scenarios/reproduce");
    if here.is_dir() {
        return here;
    }
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scenarios/reproduce"
    ))
}

/// The papers named on the command line (`all`: every one), as (name,
/// directory).
fn choose_papers(a: &ReproduceArgs) -> Vec<(String, PathBuf)> {
    let root = papers_root(a);
    let known = reproduce::papers(&root);
    if known.is_empty() {
        bad_input(format!(
            "no papers under {} (directories with a paper.toml); use --papers-dir",
            root.display()
        ));
    }
    let names: Vec<&str> = known.iter().map(|(n, _)| n.as_str()).collect();
    let mut chosen = Vec::new();
    for p in &a.papers {
        if p == "all" {
            chosen.extend(known.iter().cloned());
        } else if let Some(k) = known.iter().find(|(n, _)| n == p) {
            chosen.push(k.clone());
        } else {
            bad_input(format!(
                "reproduce: unknown paper `{p}`; known: {}, or all",
                names.join(", ")
            ));
        }
    }
    chosen.dedup();
    chosen
}

/// `--list`: each paper's title and claims.
fn list_claims(chosen: &[(String, PathBuf)]) {
    for (name, dir) in chosen {
        let m = reproduce::manifest::Manifest::load(dir).unwrap_or_else(|e| bad_input(e));
        println!(
            "{name}: {} ({} claims, {} experiments)",
            m.title,
            m.claims.len(),
            m.experiments.len()
        );
        for c in &m.claims {
            println!("  {:<28} {:<28} {}", c.id, c.source, c.statement);
        }
    }
}

/// How the papers run: the flags checked.
fn options(a: &ReproduceArgs) -> anyhow::Result<Options> {
    let backend = match a.link.as_str() {
        "sim" => Backend::Sim,
        "emu" => Backend::Emu,
        "netem" => Backend::Netem,
        other => bad_input(format!("--link: `{other}` is not one of sim, emu, netem")),
    };
    let jobs = jobs(a.jobs, backend);
    Ok(Options {
        out: a.out.clone(),
        quick: a.quick,
        backend,
        jobs,
        quiet: a.quiet,
        stop: stop_flag()?,
        bin_dir: bin_dir(),
        qlog_level: measured_qlog_level(&a.qlog_level),
    })
}

/// After several papers: the time each took and the verdicts' totals.
fn print_totals(results: &[PaperResult]) {
    let mut line = String::from("time per paper:");
    for r in results {
        line.push_str(&format!(" {} {:.0} s;", r.paper, r.wall_s));
    }
    let mut total = reproduce::Counts::default();
    for r in results {
        total.add(&r.counts);
    }
    println!("{line} total {} claims: {}", total.claims, total.line());
}
