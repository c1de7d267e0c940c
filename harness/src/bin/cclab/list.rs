//! `cclab list`: the algorithm registry ([`cc_algorithms::algorithms`]),
//! as a table or JSON; the table also lists the tuning presets and named
//! objectives `cclab tune` takes, and the kernel's TCP congestion
//! controls (a Linux TCP flow's `tcp:NAME`), which `--tcp` lists alone.

#[derive(clap::Args)]
pub struct ListArgs {
    /// Print as JSON.
    #[arg(long)]
    json: bool,
    /// Only the kernel's TCP congestion controls, for flows with
    /// cc = "tcp:NAME": this kernel's (available now, and loadable
    /// modules) and those of the guest `--vm` boots.
    #[arg(long)]
    tcp: bool,
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
    use harness::scenario::tcp;
    if a.tcp {
        let (k, g) = (tcp::this_kernel(), tcp::uml_guest());
        if a.json {
            let v = serde_json::json!({ "kernel": k, "vm_guest": g });
            outln!(out, "{}", serde_json::to_string_pretty(&v)?);
        } else {
            kernel_tcp(out, &k, g.as_ref());
        }
        return Ok(0);
    }
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
    outln!(out, "");
    kernel_tcp(out, &tcp::this_kernel(), tcp::uml_guest().as_ref());
    Ok(0)
}

/// The kernel's TCP congestion controls, and the `--vm` guest's.
fn kernel_tcp(
    out: &mut String,
    k: &harness::scenario::tcp::KernelAlgorithms,
    guest: Option<&harness::scenario::tcp::KernelAlgorithms>,
) {
    let list = |v: &[String]| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(" ")
        }
    };
    outln!(
        out,
        "Linux TCP (a flow's cc = \"tcp:NAME\"; runs on --link netem or the emulator's IP mode, not on sim):"
    );
    match &k.error {
        Some(e) => outln!(out, "    this kernel ({}): {e}", k.release),
        None => outln!(
            out,
            "    this kernel ({}): available {}; loadable modules {}",
            k.release,
            list(&k.available),
            list(&k.loadable)
        ),
    }
    if let Some(g) = guest.filter(|g| g.release != k.release) {
        outln!(
            out,
            "    the guest of --vm (user-mode Linux {}): built in {}; modules {}",
            g.release,
            list(&g.available),
            list(&g.loadable)
        );
    }
}
