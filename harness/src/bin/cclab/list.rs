//! `cclab list`: the algorithm registry ([`cc_algorithms::algorithms`]),
//! as a table or JSON; the table also lists the tuning presets and named
//! objectives `cclab tune` takes.

#[derive(clap::Args)]
pub struct ListArgs {
    /// Print as JSON.
    #[arg(long)]
    json: bool,
}

macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        use std::fmt::Write as _;
        let _ = writeln!($out, $($arg)*);
    }};
}

/// `cclab list`.
pub fn list(a: &ListArgs) -> anyhow::Result<i32> {
    // Into a string first: output piped into `head` ends quietly instead of
    // panicking on the broken pipe.
    let mut out = String::new();
    let r = fill(a, &mut out);
    let _ = std::io::Write::write_all(&mut std::io::stdout(), out.as_bytes());
    r
}

fn fill(a: &ListArgs, out: &mut String) -> anyhow::Result<i32> {
    let algs: Vec<_> = cc_algorithms::algorithms().collect();
    if a.json {
        outln!(out, "{}", serde_json::to_string_pretty(&algs)?);
        return Ok(0);
    }
    for alg in algs {
        outln!(out, "{:<10} {:?}  {}", alg.name, alg.origin, alg.summary);
        for p in alg.params {
            use cc_algorithms::registry::ParamKind;
            // A choice shows its default by name and no numeric range; a
            // file has neither.
            let (default, range) = match p.kind {
                ParamKind::Choice(names) => (
                    p.default
                        .and_then(|d| names.get(d as usize))
                        .map_or("required".to_string(), |n| n.to_string()),
                    format!("one of {}", names.join(", ")),
                ),
                ParamKind::File => ("none".to_string(), "a file".to_string()),
                _ => (
                    p.default.map_or("required".into(), |d| d.to_string()),
                    format!("range {}..{}", p.min, p.max),
                ),
            };
            outln!(
                out,
                "    {:<12} {:<10} default {:<10} {}  {}",
                p.name,
                p.unit,
                default,
                range,
                p.help
            );
        }
    }
    outln!(out, "\ntuning presets (cclab tune NAME):");
    for p in cc_algorithms::tuned::PRESETS {
        outln!(
            out,
            "    {:<10} {} of {}, objective {}: {}",
            p.name,
            p.params.join(" "),
            p.algorithm,
            p.objective,
            p.summary
        );
    }
    outln!(out, "named objectives (cclab tune --objective NAME):");
    for (name, expr, what) in harness::tune::objective::presets() {
        outln!(out, "    {name:<18} {expr}  ({what})");
    }
    Ok(0)
}
