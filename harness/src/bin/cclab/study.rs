//! `cclab study FILE`: a study file's experiments run (what is not already
//! there), its goals judged and its tables written
//! ([`harness::study`]); the command line may change any axis.

use std::path::PathBuf;
use std::sync::atomic::Ordering;

use harness::link::Backend;
use harness::reproduce::Options;
use harness::study::{self, Overrides, Study, StudyOptions};

use crate::common::{bad_input, bin_dir, jobs, measured_qlog_level, stop_flag};

#[derive(clap::Args)]
pub struct StudyArgs {
    /// The study file (studies/*.toml).
    file: PathBuf,
    /// Output root: the study writes OUT/<study>/ (study.json, STUDY.md,
    /// index.html, runs/). Re-running resumes and reuses the runs the same
    /// build made.
    #[arg(long, default_value = "results/studies")]
    out: PathBuf,
    /// Fewer repetitions and points (the study's `quick`).
    #[arg(long)]
    quick: bool,
    /// Backends (comma-separated): replaces the study's backend axis, or
    /// sets the backend of every run.
    #[arg(long, value_delimiter = ',')]
    link: Vec<String>,
    /// Algorithms (comma-separated specs; a spec keeps its own
    /// parameters: `vegas:alpha=1,beta=3,newreno` is two) in place of the
    /// study's candidates; its references stay.
    #[arg(long)]
    cc: Option<String>,
    /// Only these experiments (comma-separated ids), with the goals,
    /// tables and figures that read them.
    #[arg(long, value_delimiter = ',')]
    experiment: Vec<String>,
    /// NAME=V1,V2,...: an axis's values (repeatable).
    #[arg(long)]
    axis: Vec<String>,
    /// FIELD=VALUE: a scenario field for every run (repeatable; VALUE as
    /// TOML, else text).
    #[arg(long)]
    set: Vec<String>,
    /// Repetitions of every run (given twice, the last holds: a make
    /// target's STUDY_ARGS after its own).
    #[arg(long, overrides_with = "repetitions")]
    repetitions: Option<u32>,
    /// Duration of every repetition (e.g. 10s; given twice, the last
    /// holds).
    #[arg(long, overrides_with = "duration")]
    duration: Option<String>,
    /// Runs at once (default: one per core when every run is on sim, 1
    /// otherwise; a real run always runs alone).
    #[arg(long)]
    jobs: Option<usize>,
    /// Only the points with index % N == I (a Slurm array: `--shard
    /// slurm`); nothing is judged. Run once more without it to judge.
    #[arg(long)]
    shard: Option<String>,
    /// Judge and write the pages from the runs there; run nothing.
    #[arg(long)]
    no_run: bool,
    /// Replace the study's block in its docs page (`doc` in the file, or
    /// this page).
    #[arg(long, num_args = 0..=1, default_missing_value = "")]
    publish: Option<String>,
    /// Another name for this variant of the study: its output directory
    /// (OUT/NAME/) and its block in the docs page (`<!-- study NAME -->`),
    /// so that a variant (another backend, other algorithms) is published
    /// beside the study's own block rather than over it.
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// qlog level where a goal or table reads the senders' qlog.
    #[arg(long, default_value = "metrics")]
    qlog_level: String,
    /// Print the plan (every point and its backend) and exit.
    #[arg(long)]
    list: bool,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
    /// No progress output.
    #[arg(long)]
    quiet: bool,
}

fn shard(s: &str) -> (usize, usize) {
    if s == "slurm" {
        let var = |k: &str| {
            std::env::var(k)
                .ok()
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or_else(|| bad_input(format!("--shard slurm: {k} is not set to a number (run it inside a Slurm array job)")))
        };
        let (i, n) = (var("SLURM_ARRAY_TASK_ID"), var("SLURM_ARRAY_TASK_COUNT"));
        let min = std::env::var("SLURM_ARRAY_TASK_MIN")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(0);
        return (i - min.min(i), n);
    }
    harness::sweep::parse_shard(s).unwrap_or_else(|| {
        bad_input(format!(
            "--shard: `{s}` is not I/N with 0 <= I < N (e.g. 0/4) or slurm"
        ))
    })
}

fn key_value(flag: &str, s: &str) -> (String, String) {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => (k.trim().to_string(), v.trim().to_string()),
        _ => bad_input(format!("--{flag}: `{s}` is not NAME=VALUE")),
    }
}

/// This process's command line as a user would type it (the binary as
/// `cclab`; the output root left out).
fn command_line() -> String {
    let mut out = vec!["cclab".to_string()];
    let mut args = std::env::args().skip(1).peekable();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--out" => {
                args.next();
                continue;
            }
            "--publish" => {
                // Its page, if given as the next word.
                if args.peek().is_some_and(|n| n.ends_with(".md")) {
                    args.next();
                }
                continue;
            }
            "--quiet" | "--json" | "--no-run" => continue,
            _ if a.starts_with("--out=") || a.starts_with("--publish=") => continue,
            _ => {}
        }
        if a.contains([' ', '"', '\'', '{', '}', ';']) {
            out.push(format!("'{a}'"));
        } else {
            out.push(a);
        }
    }
    out.join(" ")
}

/// `cclab study`.
pub fn study(a: &StudyArgs) -> anyhow::Result<i32> {
    let mut s = Study::load(&a.file).unwrap_or_else(|e| bad_input(e));
    let o = Overrides {
        cc: a
            .cc
            .as_deref()
            .map(harness::study::split_values)
            .unwrap_or_default(),
        link: a.link.clone(),
        axes: a
            .axis
            .iter()
            .map(|x| {
                let (k, v) = key_value("axis", x);
                (k, harness::study::split_values(&v))
            })
            .collect(),
        set: a
            .set
            .iter()
            .map(|x| {
                let (k, v) = key_value("set", x);
                (k, harness::study::cli_value(&v))
            })
            .collect(),
        repetitions: a.repetitions,
        duration: a.duration.clone(),
        experiments: a.experiment.clone(),
    };
    s.apply(&o).unwrap_or_else(|e| bad_input(e));
    if let Some(n) = &a.name {
        if n.is_empty()
            || !n
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            bad_input(format!(
                "--name: `{n}` is not a name of letters, digits, - and _ (it names a directory and a docs block)"
            ));
        }
        s.study = n.clone();
    }
    if !a.quiet {
        for n in &s.notes {
            eprintln!("cclab study {}: {n}", s.study);
        }
    }
    let all_sim = s.experiments().iter().all(|e| {
        let b = e.set.get("link.backend").and_then(|v| v.as_str());
        let axis = e.axes.iter().find(|x| x.field.paths() == ["link.backend"]);
        match axis {
            Some(x) => x.values.iter().all(|v| v.as_str() == Some("sim")),
            None => b.is_none_or(|b| b == "sim"),
        }
    });
    let backend = if a.link.len() == 1 {
        Backend::parse(&a.link[0]).unwrap_or(Backend::Sim)
    } else {
        Backend::Sim
    };
    let opts = StudyOptions {
        run: Options {
            out: a.out.clone(),
            quick: a.quick,
            backend,
            jobs: jobs(a.jobs, if all_sim { Backend::Sim } else { Backend::Emu }),
            quiet: a.quiet,
            stop: stop_flag()?,
            bin_dir: bin_dir(),
            qlog_level: measured_qlog_level(&a.qlog_level),
        },
        shard: a.shard.as_deref().map(shard),
        no_run: a.no_run,
        command: Some(command_line()),
    };
    if a.list {
        for (e, x) in s.experiments().iter().zip(&s.experiments) {
            println!(
                "experiment {} ({} points){}",
                e.id,
                e.points(a.quick).len(),
                if x.about.is_empty() {
                    String::new()
                } else {
                    format!(": {}", x.about)
                }
            );
            for p in e.points(a.quick) {
                println!("  {}", p.dir_name());
            }
        }
        return Ok(0);
    }
    let r = study::run(&s, &opts).unwrap_or_else(|e| bad_input(e));
    if let Some(p) = &a.publish {
        if r.shard.is_some() || r.interrupted {
            bad_input("--publish: only a complete, unsharded study is published");
        }
        let page = if p.is_empty() {
            match &s.doc {
                Some(d) => PathBuf::from(d),
                None => bad_input(
                    "--publish: the study names no `doc` page; give one: --publish docs/PAGE.md",
                ),
            }
        } else {
            PathBuf::from(p)
        };
        study::publish(&r, &page).unwrap_or_else(|e| bad_input(e));
        if !a.quiet {
            eprintln!("cclab study {}: published in {}", r.study, page.display());
        }
    }
    if a.json {
        crate::common::print_json(&r)?;
    } else if r.shard.is_none() {
        print!("{}", study::markdown(&r));
        println!(
            "pages: {}/STUDY.md, {}/index.html",
            r.dir.display(),
            r.dir.display()
        );
    } else if let Some((i, n)) = r.shard {
        println!(
            "cclab study {}: shard {i}/{n}: {} run(s) made; run again without --shard to judge",
            r.study, r.ran
        );
    }
    Ok(if opts.run.stop.load(Ordering::Relaxed) {
        130
    } else if !r.failed.is_empty() {
        1
    } else {
        0
    })
}
