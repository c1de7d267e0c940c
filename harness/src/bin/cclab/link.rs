//! `cclab link`: a link description checked and printed
//! ([`LinkArgs::to_spec`]), the kernel's qdiscs ([`harness::netem::probe`]),
//! or what a link really does ([`harness::probe::measure_link`]).

use harness::cli::LinkArgs;
use harness::link::{Backend, Dir, LinkSpec};
use harness::netns;
use harness::probe::{measure_link, ProbeLink};

use crate::common::{bad_input, resolve_backend};

#[derive(clap::Subcommand)]
pub enum LinkCmd {
    /// Which qdiscs the kernel has (netem, tbf, htb, red, codel, fq_codel, pie): root only.
    Probe {
        /// Print as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Measure what a link really does with a paced UDP probe (no
    /// congestion control in the way), in the down direction: delivered
    /// rate at 105% load and one-way delay at 30% load, against the
    /// description. `--link emu` (default) or `--link netem`.
    Measure {
        #[command(flatten)]
        link: Box<LinkArgs>,
        /// Seconds per phase.
        #[arg(long = "for", default_value = "4s", value_name = "DURATION")]
        duration: String,
        /// Datagram size (UDP payload), bytes.
        #[arg(long, default_value_t = 1350)]
        size: usize,
        /// Print as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Validate a link description and print it fully resolved; with
    /// --scenario, draw the scenario's topology: every link and the path
    /// each flow and cross source takes, with its base RTT.
    Show {
        #[command(flatten)]
        link: Box<LinkArgs>,
        /// A scenario file whose links and paths to draw (the link flags
        /// are then refused).
        #[arg(long, value_name = "FILE")]
        scenario: Option<std::path::PathBuf>,
        /// Print as JSON instead of TOML (or text, with --scenario).
        #[arg(long)]
        json: bool,
    },
}

/// `cclab link`.
pub fn link(cmd: LinkCmd) -> anyhow::Result<i32> {
    match cmd {
        LinkCmd::Measure {
            link,
            duration,
            size,
            json,
        } => measure(&link, &duration, size, json),
        LinkCmd::Probe { json } => probe(json),
        LinkCmd::Show {
            scenario: Some(file),
            link,
            json,
        } => {
            if link.is_set() {
                bad_input("--scenario: give either a scenario or link flags, not both");
            }
            show_topology(&file, json)
        }
        LinkCmd::Show { link, json, .. } => show(&link, json),
    }
}

/// `cclab link probe`.
fn probe(json: bool) -> anyhow::Result<i32> {
    if !netns::is_root() {
        bad_input("probing the kernel's qdiscs needs root (it adds them to a scratch namespace)");
    }
    let caps = harness::netem::probe();
    if json {
        crate::common::print_json(&caps)?;
        return Ok(0);
    }
    for (name, ok) in [
        ("netem", caps.netem),
        ("tbf", caps.tbf),
        ("htb", caps.htb),
        ("red", caps.red),
        ("codel", caps.codel),
        ("fq_codel", caps.fq_codel),
        ("pie", caps.pie),
        ("netem seed (tc)", caps.netem_seed),
    ] {
        println!("{name:<16} {}", if ok { "yes" } else { "no" });
    }
    if !caps.netem {
        println!("\nThis kernel has no sch_netem: use the userspace emulator (--link emu).");
    }
    Ok(0)
}

/// `cclab link show`.
fn show(link: &LinkArgs, json: bool) -> anyhow::Result<i32> {
    let spec = link.to_spec().unwrap_or_else(|e| bad_input(e));
    let t = spec.to_toml();
    if json {
        crate::common::print_json(&t)?;
    } else {
        let mut doc = toml::Table::new();
        doc.insert("link".into(), toml::Value::Table(t));
        print!("{}", toml::to_string(&doc)?);
    }
    Ok(0)
}

/// `cclab link show --scenario`: the scenario's links and every traffic
/// class's path.
fn show_topology(file: &std::path::Path, json: bool) -> anyhow::Result<i32> {
    let sc = harness::scenario::Scenario::load(file).unwrap_or_else(|e| bad_input(e));
    let topo = sc.topology();
    let routes = sc.routes();
    let mut labels = Vec::new();
    for (g, f) in sc.flows.iter().enumerate() {
        for k in 0..f.count {
            let n = if f.count > 1 {
                format!("[{k}]")
            } else {
                String::new()
            };
            labels.push(format!("flows[{g}]{n} {}", f.cc));
        }
    }
    for j in 0..sc.cross.len() {
        labels.push(format!("cross[{j}]"));
    }
    if json {
        let links: Vec<serde_json::Value> = topo
            .links
            .iter()
            .map(|l| serde_json::json!({ "name": l.name, "link": l.spec.to_toml() }))
            .collect();
        let paths: Vec<serde_json::Value> = routes
            .iter()
            .zip(&labels)
            .map(|(r, label)| {
                let names: Vec<&str> = r
                    .links
                    .iter()
                    .map(|&i| topo.links[i].name.as_str())
                    .collect();
                serde_json::json!({
                    "class": label,
                    "links": names,
                    "access_delay_ms": r.access_ns as f64 / 1e6,
                    "base_rtt_ms": topo.base_rtt_ns(r) as f64 / 1e6,
                })
            })
            .collect();
        let v = serde_json::json!({ "links": links, "paths": paths });
        crate::common::print_json(&v)?;
    } else {
        print!("{}", topo.draw(&routes, &labels));
    }
    Ok(0)
}

/// `cclab link measure`: a rate phase, then a delay phase.
fn measure(a: &LinkArgs, duration: &str, size: usize, json: bool) -> anyhow::Result<i32> {
    let spec = a.to_spec().unwrap_or_else(|e| bad_input(e));
    let kind = match a.link.as_deref().unwrap_or("emu") {
        "emu" => ProbeLink::Emu,
        // As `cclab run --link netem`: through the guest router where this
        // kernel has no netem.
        "netem" if harness::guest_router::wanted() => ProbeLink::GuestRouter,
        "netem" => ProbeLink::Netem,
        other => bad_input(format!(
            "--link: `{other}` is not one of emu, netem (the probe needs a real link)"
        )),
    };
    if kind != ProbeLink::Emu {
        resolve_backend(&LinkSpec {
            backend: Backend::Netem,
            ..spec.clone()
        });
    }
    let secs = harness::link::units::parse_duration_ns(duration)
        .unwrap_or_else(|| bad_input(format!("--for: `{duration}` is not a duration such as 4s")));
    let dur = std::time::Duration::from_nanos(secs);
    let d = spec.dir(Dir::Down);
    // Offered load in payload bits so that the link sees 105% / 30% of
    // its rate counted its own way.
    let payload_share = size as f64 / harness::probe::wire_bytes(kind, size as u64) as f64;
    let mut out = serde_json::Map::new();
    for (phase, load) in [("rate", 1.05), ("delay", 0.3)] {
        let p = measure_link(kind, &spec, d.rate_bps * load * payload_share, size, dur)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let rate_err = (p.delivered_wire_bps - d.rate_bps) / d.rate_bps * 100.0;
        if !json {
            println!(
                "{phase:>5}: offered {:.3} Mbit/s, delivered {:.3} Mbit/s counted as the link counts ({rate_err:+.2}% of {:.3}), one-way delay p50 {:.3} ms p99 {:.3} ms (error p50 {:+.3} p99 {:+.3} max {:+.3} ms), lost {} of {}, reordered {}",
                p.offered_bps / 1e6,
                p.delivered_wire_bps / 1e6,
                d.rate_bps / 1e6,
                p.measured.owd_ms[0],
                p.measured.owd_ms[1],
                p.owd_error_ms[0],
                p.owd_error_ms[1],
                p.owd_error_ms[2],
                p.measured.sent - p.measured.received,
                p.measured.sent,
                p.measured.reordered,
            );
        }
        let mut v = serde_json::to_value(&p)?;
        v["rate_error_pct"] = rate_err.into();
        out.insert(phase.into(), v);
    }
    if json {
        crate::common::print_json(&out)?;
    }
    Ok(0)
}
