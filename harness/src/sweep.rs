//! Sweeps: a grid over any scenario fields, run point by point, resumable,
//! shardable across machines, and mergeable.
//!
//! ```toml
//! scenario = "default.toml"      # the base (relative to this file)
//! repetitions = 3                # optional: overrides the base's
//! randomize = true               # run the points in a seeded random order
//! seed = 1
//! [grid]
//! "link.rate" = ["10mbit", "20mbit"]
//! "link.rtt" = ["20ms", "80ms"]
//! "flows.0.cc" = ["NAME", "NAME:KEY=VALUE"]   # algorithm specs (`cclab list`)
//! ```
//!
//! Point `i` of the grid (cartesian product, keys in alphabetical order,
//! the last key varying fastest) runs into `OUT/runs/<i>-<values>`. A point whose
//! directory says `complete` is skipped, so a sweep can be re-run to finish
//! after an interruption; an interrupted or failed point is run again.
//! `--shard I/N` takes the points with `i % N == I`, the same on every
//! machine; `cclab merge` joins shard outputs into one directory.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::scenario::{Scenario, ScenarioError};

/// A parsed sweep.
#[derive(Clone, Debug)]
pub struct Sweep {
    /// The base scenario.
    pub base: Scenario,
    /// Axes: field path and its values.
    pub axes: Vec<(String, Vec<toml::Value>)>,
    /// Shuffle the run order.
    pub randomize: bool,
    /// Seed of the shuffle.
    pub seed: u64,
}

/// One point of the grid.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Point {
    /// Index in the grid.
    pub index: usize,
    /// Field values.
    pub values: Vec<(String, String)>,
    /// Directory name under `runs/`.
    pub dir: String,
    /// complete, interrupted, failed, pending.
    pub status: String,
}

fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl Sweep {
    /// Reads a sweep file.
    pub fn load(path: &Path) -> Result<Sweep, ScenarioError> {
        let source = path.display().to_string();
        let err = |field: &str, problem: String| ScenarioError {
            source: source.clone(),
            field: field.into(),
            problem,
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| err("(file)", format!("cannot read: {e}")))?;
        let t: toml::Table = toml::from_str(&text)
            .map_err(|e| err("(file)", format!("not valid TOML: {}", e.message())))?;
        for k in t.keys() {
            if !["scenario", "repetitions", "randomize", "seed", "grid"].contains(&k.as_str()) {
                return Err(err(
                    k,
                    "unknown field; allowed: scenario, repetitions, randomize, seed, grid".into(),
                ));
            }
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut base = match t.get("scenario") {
            Some(toml::Value::String(s)) => Scenario::load(&dir.join(s))?,
            Some(_) => return Err(err("scenario", "expected a file name".into())),
            None => Scenario::default(),
        };
        if let Some(v) = t.get("repetitions") {
            base.repetitions = match v {
                toml::Value::Integer(i) if (1..=1000).contains(i) => *i as u32,
                _ => {
                    return Err(err(
                        "repetitions",
                        format!("`{v}` is not a whole number from 1 to 1000"),
                    ))
                }
            };
        }
        let randomize = match t.get("randomize") {
            None => false,
            Some(toml::Value::Boolean(b)) => *b,
            Some(v) => return Err(err("randomize", format!("`{v}` is not true or false"))),
        };
        let seed = match t.get("seed") {
            None => 1,
            Some(toml::Value::Integer(i)) if *i >= 0 => *i as u64,
            Some(v) => return Err(err("seed", format!("`{v}` is not a non-negative integer"))),
        };
        let grid = match t.get("grid") {
            Some(toml::Value::Table(g)) => g.clone(),
            Some(_) => return Err(err("grid", "expected a table of field = [values]".into())),
            None => toml::Table::new(),
        };
        let axes = axes(&grid, &err)?;
        let sw = Sweep {
            base,
            axes,
            randomize,
            seed,
        };
        // Validate every point now, before anything runs.
        for i in 0..sw.len() {
            sw.scenario(i).map_err(|e| ScenarioError {
                source: source.clone(),
                field: format!("grid ({})", e.field),
                problem: format!("point {i}: {}", e.problem),
            })?;
        }
        Ok(sw)
    }

    /// Points in the grid.
    pub fn len(&self) -> usize {
        self.axes
            .iter()
            .map(|(_, v)| v.len())
            .product::<usize>()
            .max(1)
    }

    /// True for an empty grid (it still has one point: the base).
    pub fn is_empty(&self) -> bool {
        self.axes.is_empty()
    }

    /// The field values of point `i`.
    pub fn values(&self, mut i: usize) -> Vec<(String, toml::Value)> {
        let mut out = vec![(String::new(), toml::Value::Boolean(false)); self.axes.len()];
        for (k, (name, vals)) in self.axes.iter().enumerate().rev() {
            out[k] = (name.clone(), vals[i % vals.len()].clone());
            i /= vals.len();
        }
        out
    }

    /// The scenario of point `i`.
    pub fn scenario(&self, i: usize) -> Result<Scenario, ScenarioError> {
        let mut s = self.base.with_overrides(&self.values(i), "sweep")?;
        s.name = format!("{}#{i}", self.base.name);
        Ok(s)
    }

    /// Directory name of point `i`.
    pub fn dir_name(&self, i: usize) -> String {
        let mut name = format!("{i:04}");
        for (_, v) in self.values(i) {
            let t: String = value_text(&v)
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '.' {
                        c
                    } else {
                        '_'
                    }
                })
                .take(24)
                .collect();
            name.push('-');
            name.push_str(&t);
        }
        name
    }

    /// The run order of the points a shard takes.
    pub fn order(&self, shard: (usize, usize)) -> Vec<usize> {
        let mut idx: Vec<usize> = (0..self.len()).filter(|i| i % shard.1 == shard.0).collect();
        if self.randomize {
            // Fisher-Yates with a seeded SplitMix64: the same order everywhere.
            let mut x = self.seed ^ 0x9E37_79B9_7F4A_7C15;
            for k in (1..idx.len()).rev() {
                x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = x;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^= z >> 31;
                idx.swap(k, (z % (k as u64 + 1)) as usize);
            }
        }
        idx
    }
}

/// Parses `I/N`.
pub fn parse_shard(s: &str) -> Option<(usize, usize)> {
    let (i, n) = s.split_once('/')?;
    let (i, n): (usize, usize) = (i.trim().parse().ok()?, n.trim().parse().ok()?);
    (n >= 1 && i < n).then_some((i, n))
}

fn status_of(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("status.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["state"].as_str().map(str::to_string))
        .unwrap_or_else(|| "pending".into())
}

fn write_index(out: &Path, sw: &Sweep, points: &[usize]) -> std::io::Result<()> {
    let list: Vec<Point> = points
        .iter()
        .map(|&i| {
            let dir = sw.dir_name(i);
            Point {
                index: i,
                values: sw
                    .values(i)
                    .iter()
                    .map(|(k, v)| (k.clone(), value_text(v)))
                    .collect(),
                status: status_of(&out.join("runs").join(&dir)),
                dir,
            }
        })
        .collect();
    let tmp = out.join("sweep.json.part");
    std::fs::write(
        &tmp,
        serde_json::to_vec_pretty(&serde_json::json!({"points": list, "total": sw.len()}))?,
    )?;
    std::fs::rename(tmp, out.join("sweep.json"))
}

/// What a sweep did.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct SweepReport {
    /// Points this shard owns.
    pub points: usize,
    /// Already complete, skipped.
    pub skipped: usize,
    /// Run now and completed.
    pub completed: usize,
    /// Failed.
    pub failed: usize,
    /// Stopped by Ctrl-C.
    pub interrupted: bool,
}

/// Runs the points of `shard` with `jobs` in parallel.
pub fn run_sweep(
    sw: &Sweep,
    out: &Path,
    shard: (usize, usize),
    jobs: usize,
    base_cfg: &crate::run::RunConfig,
) -> std::io::Result<SweepReport> {
    std::fs::create_dir_all(out.join("runs"))?;
    let order = sw.order(shard);
    let mut mine = order.clone();
    mine.sort_unstable();
    write_index(out, sw, &mine)?;
    let todo: Vec<usize> = order
        .iter()
        .copied()
        .filter(|&i| status_of(&out.join("runs").join(sw.dir_name(i))) != "complete")
        .collect();
    let report = Mutex::new(SweepReport {
        points: order.len(),
        skipped: order.len() - todo.len(),
        ..SweepReport::default()
    });
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let index_lock = Mutex::new(());
    let stop: Arc<AtomicBool> = base_cfg.stop.clone();
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| loop {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let k = next.fetch_add(1, Ordering::SeqCst);
                let Some(&i) = todo.get(k) else { return };
                let sc = match sw.scenario(i) {
                    Ok(s) => s,
                    Err(_) => continue, // validated at load
                };
                let mut cfg = base_cfg.clone();
                cfg.out = out.join("runs").join(sw.dir_name(i));
                cfg.quiet = true;
                // A point with Linux TCP flows runs in the emulator's IP
                // mode (or fails naming what IP mode needs), the others
                // keep the relay.
                cfg.emu_mode = crate::backend::default_emu_mode(&sc, cfg.backend);
                let r = crate::run::run(&sc, &cfg);
                let n = done.fetch_add(1, Ordering::SeqCst) + 1;
                {
                    let mut rep = report.lock().unwrap();
                    match &r {
                        Ok(_) => rep.completed += 1,
                        Err(crate::run::RunError::Interrupted) => rep.interrupted = true,
                        Err(_) => rep.failed += 1,
                    }
                }
                if !base_cfg.quiet {
                    let width = 30;
                    let filled = n * width / todo.len().max(1);
                    eprintln!(
                        "[{}{}] {n}/{} point {i} {}: {}",
                        "#".repeat(filled),
                        "-".repeat(width - filled),
                        todo.len(),
                        sw.dir_name(i),
                        match &r {
                            Ok(s) => format!(
                                "{} ({:.1} Mbit/s total)",
                                s.status,
                                s.flows.iter().map(|f| f.goodput_bps).sum::<f64>() / 1e6
                            ),
                            Err(e) => e.to_string(),
                        }
                    );
                }
                let _g = index_lock.lock().unwrap();
                let _ = write_index(out, sw, &mine);
            });
        }
    });
    write_index(out, sw, &mine)?;
    Ok(report.into_inner().unwrap())
}

/// The grid's axes: each field and its values, in key order.
fn axes(
    grid: &toml::Table,
    err: &dyn Fn(&str, String) -> ScenarioError,
) -> Result<Vec<(String, Vec<toml::Value>)>, ScenarioError> {
    let mut axes = Vec::new();
    for (k, v) in grid {
        let vals = v.as_array().filter(|a| !a.is_empty()).ok_or_else(|| {
            err(
                &format!("grid.{k}"),
                "expected a non-empty array of values".into(),
            )
        })?;
        // One backend runs the whole sweep (chosen from the base
        // scenario); a point claiming another would be mislabelled.
        if k == "link.backend" {
            return Err(err(
            "grid.link.backend",
            "the backend cannot vary within a sweep (every point runs on the base scenario's); set link.backend in the scenario, or run one sweep per backend".into(),
        ));
        }
        axes.push((k.clone(), vals.clone()));
    }
    Ok(axes)
}

/// What a merge found.
#[derive(Clone, Debug, PartialEq)]
pub struct Merged {
    /// Run directories copied (complete ones already there are kept).
    pub copied: usize,
    /// Points in the merged index, and how many are complete.
    pub points: usize,
    /// Complete points.
    pub complete: usize,
    /// Points in the whole grid (from the shards' indexes), if known.
    pub total: Option<usize>,
    /// Grid indexes with no complete point, when the total is known.
    pub missing: Vec<u64>,
}

/// Joins sweep (or shard) directories into `out`: every run directory is
/// copied into `out/runs/` (a complete one wins over an incomplete one of
/// the same name) and the indexes are combined.
/// The merged index keeps the grid's size (`total`), so missing points
/// show.
pub fn merge(inputs: &[PathBuf], out: &Path) -> std::io::Result<Merged> {
    std::fs::create_dir_all(out.join("runs"))?;
    let mut points: Vec<serde_json::Value> = Vec::new();
    let mut total: Option<usize> = None;
    let mut n = 0;
    for input in inputs {
        let runs = input.join("runs");
        let entries = std::fs::read_dir(&runs)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", runs.display())))?;
        for e in entries {
            let src = e?.path();
            if !src.is_dir() || src.extension().is_some_and(|x| x == "partial") {
                continue;
            }
            let dst = out.join("runs").join(src.file_name().unwrap());
            if dst.exists() && status_of(&dst) == "complete" {
                continue;
            }
            let _ = std::fs::remove_dir_all(&dst);
            copy_dir(&src, &dst)?;
            n += 1;
        }
        if let Ok(t) = std::fs::read_to_string(input.join("sweep.json")) {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&t) {
                if let Some(t) = v["total"].as_u64() {
                    total = Some(total.unwrap_or(0).max(t as usize));
                }
                for p in v["points"].as_array().into_iter().flatten() {
                    points.retain(|q| q["index"] != p["index"]);
                    let mut p = p.clone();
                    if let Some(d) = p["dir"].as_str() {
                        p["status"] = status_of(&out.join("runs").join(d)).into();
                    }
                    points.push(p);
                }
            }
        }
    }
    points.sort_by_key(|p| p["index"].as_u64().unwrap_or(0));
    let done: Vec<u64> = points
        .iter()
        .filter(|p| p["status"] == "complete")
        .filter_map(|p| p["index"].as_u64())
        .collect();
    let missing = match total {
        Some(t) => (0..t as u64).filter(|i| !done.contains(i)).collect(),
        None => Vec::new(),
    };
    let mut index = serde_json::json!({"points": points});
    if let Some(t) = total {
        index["total"] = t.into();
    }
    let tmp = out.join("sweep.json.part");
    std::fs::write(&tmp, serde_json::to_vec_pretty(&index)?)?;
    std::fs::rename(tmp, out.join("sweep.json"))?;
    Ok(Merged {
        copied: n,
        points: points.len(),
        complete: done.len(),
        total,
        missing,
    })
}

fn copy_dir(src: &Path, dst: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dst)?;
    for e in std::fs::read_dir(src)? {
        let p = e?.path();
        let to = dst.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &to)?;
        } else {
            std::fs::copy(&p, &to)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep(text: &str) -> Result<Sweep, ScenarioError> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.toml");
        std::fs::write(&p, text).unwrap();
        Sweep::load(&p)
    }

    #[test]
    fn grid_points_and_shards() {
        let s = sweep("randomize = true\nseed = 3\n[grid]\n\"link.rate\" = [\"10mbit\", \"20mbit\"]\n\"flows.0.cc\" = [\"cubic\", \"vegas\", \"reno\"]\n").unwrap();
        assert_eq!(s.len(), 6);
        // Keys sort alphabetically (flows.0.cc, link.rate); the last varies fastest.
        assert_eq!(s.scenario(1).unwrap().flows[0].cc, "cubic");
        assert_eq!(s.scenario(1).unwrap().link.down.rate_bps, 20e6);
        assert_eq!(s.scenario(3).unwrap().flows[0].cc, "vegas");
        assert_eq!(s.dir_name(4), "0004-reno-10mbit");
        // Shards partition the grid, the same way every time.
        let mut all: Vec<usize> = (0..3).flat_map(|k| s.order((k, 3))).collect();
        all.sort_unstable();
        assert_eq!(all, (0..6).collect::<Vec<_>>());
        assert_eq!(s.order((0, 1)), s.order((0, 1)));
        assert_ne!(s.order((0, 1)), (0..6).collect::<Vec<_>>(), "randomized");
        assert_eq!(parse_shard("2/4"), Some((2, 4)));
        assert_eq!(parse_shard("4/4"), None);
        assert_eq!(parse_shard("x"), None);
    }

    #[test]
    fn bad_points_are_refused_at_load() {
        let e = sweep("[grid]\n\"flows.0.cc\" = [\"cubic\", \"nosuchcc\"]\n").unwrap_err();
        assert!(
            e.to_string().contains("point 1") && e.to_string().contains("nosuchcc"),
            "{e}"
        );
        let e = sweep("grd = 1\n").unwrap_err();
        assert!(e.to_string().contains("unknown field"), "{e}");
        let e = sweep("[grid]\n\"link.backend\" = [\"sim\", \"emu\"]\n").unwrap_err();
        assert!(e.to_string().contains("cannot vary"), "{e}");
        let e = sweep("[grid]\n\"link.rate\" = []\n").unwrap_err();
        assert!(e.to_string().contains("non-empty"), "{e}");
    }

    #[test]
    fn merge_says_which_points_are_missing() {
        let dir = tempfile::tempdir().unwrap();
        let shard = |name: &str, idx: &[u64]| {
            let d = dir.path().join(name);
            let mut pts = Vec::new();
            for &i in idx {
                let run = d.join("runs").join(format!("{i:04}-x"));
                std::fs::create_dir_all(&run).unwrap();
                std::fs::write(run.join("status.json"), r#"{"state":"complete"}"#).unwrap();
                pts.push(serde_json::json!({"index": i, "dir": format!("{i:04}-x"), "status": "complete"}));
            }
            let index = serde_json::json!({"points": pts, "total": 3});
            std::fs::write(d.join("sweep.json"), index.to_string()).unwrap();
            d
        };
        let (a, b) = (shard("a", &[0, 2]), shard("b", &[1]));
        let out = dir.path().join("all");
        let m = merge(std::slice::from_ref(&a), &out).unwrap();
        assert_eq!(
            (m.complete, m.total, m.missing.clone()),
            (2, Some(3), vec![1])
        );
        let m = merge(&[a, b], &out).unwrap();
        assert_eq!((m.copied, m.complete, m.missing.len()), (1, 3, 0));
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("sweep.json")).unwrap())
                .unwrap();
        assert_eq!(v["total"], 3);
    }
}
