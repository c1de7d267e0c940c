//! `cclab reproduce`: the chosen papers' evaluations re-run by
//! [`harness::reproduce::reproduce`], one paper after another; then each
//! claim's verdict and the totals.

use std::path::PathBuf;
use std::sync::atomic::Ordering;

use harness::link::Backend;
use harness::reproduce::{self, Options, PaperResult};

use crate::common::{bad_input, bin_dir, jobs, measured_qlog_level, stop_flag};

#[derive(clap::Args)]
pub struct ReproduceArgs {
    /// A paper (a directory of scenarios/reproduce/; `--list` shows them), several, or `all`.
    #[arg(required = true)]
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
}

/// `cclab reproduce`.
pub fn reproduce(a: &ReproduceArgs) -> anyhow::Result<i32> {
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
    Ok(if opts.stop.load(Ordering::Relaxed) {
        130
    } else if failed {
        1
    } else {
        0
    })
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
