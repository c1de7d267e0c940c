//! Command-line pieces shared by `cclab`'s subcommands.

use std::path::{Path, PathBuf};

use crate::link::{LinkError, LinkSpec};

/// The link flags. Each sets one field of the link description, for both
/// directions; `--up KEY=VALUE` and `--down KEY=VALUE` set one direction.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct LinkArgs {
    /// A TOML file holding a link description (a `[link]` table, or the
    /// table's keys at the top level); the flags below override it.
    #[arg(long, value_name = "FILE")]
    pub link_file: Option<PathBuf>,
    /// Backend: auto (netem where the kernel has it and we are root, else
    /// emu), emu (userspace emulator, real processes), netem (kernel, root)
    /// or sim (virtual time: deterministic and much faster than real time;
    /// endpoint CPU time counts as zero). Real processes are the ground
    /// truth; sim is for sweeps, tuning, reproductions and tests.
    #[arg(long, value_name = "BACKEND")]
    pub link: Option<String>,
    /// Bottleneck rate, e.g. 20mbit, 500kbit, 1gbit.
    #[arg(long)]
    pub rate: Option<String>,
    /// Round-trip propagation delay, split evenly, e.g. 40ms.
    #[arg(long)]
    pub rtt: Option<String>,
    /// One-way delay per direction (instead of --rtt), e.g. 20ms.
    #[arg(long)]
    pub delay: Option<String>,
    /// Jitter, e.g. 2ms.
    #[arg(long)]
    pub jitter: Option<String>,
    /// Jitter distribution: uniform, normal, pareto, paretonormal.
    #[arg(long, value_name = "DIST")]
    pub jitter_distribution: Option<String>,
    /// Loss: 1% or ge:p=1%,r=30%,bad=100%,good=0%.
    #[arg(long)]
    pub loss: Option<String>,
    /// Duplication probability, e.g. 0.1%.
    #[arg(long)]
    pub duplicate: Option<String>,
    /// Reordering probability, e.g. 1%.
    #[arg(long)]
    pub reorder: Option<String>,
    /// Queue limit: 100pkt, 64kb or 1bdp.
    #[arg(long)]
    pub queue: Option<String>,
    /// Queue management: droptail, red[:...], codel[:...], pie[:...],
    /// fq_codel[:...], step[:threshold=1ms|20pkt], dualpi2[:...]; ecn=true on
    /// red, codel, pie and fq_codel marks instead of dropping.
    #[arg(long)]
    pub aqm: Option<String>,
    /// A mahimahi trace file for time-varying capacity (instead of --rate).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<String>,
    /// Seed for every random choice of the link.
    #[arg(long)]
    pub seed: Option<String>,
    /// Set one field of the client-to-server direction: --up rate=5mbit.
    #[arg(long, value_name = "KEY=VALUE")]
    pub up: Vec<String>,
    /// Set one field of the server-to-client direction: --down delay=30ms.
    #[arg(long, value_name = "KEY=VALUE")]
    pub down: Vec<String>,
}

impl LinkArgs {
    /// Whether any flag (or `--link-file`) was given.
    pub fn is_set(&self) -> bool {
        self.link_file.is_some()
            || self.seed.is_some()
            || !self.up.is_empty()
            || !self.down.is_empty()
            || self.fields().iter().any(|(_, v)| v.is_some())
    }

    /// The flags that set one field of the link (both directions), by the
    /// field's name: `backend` is `--link`.
    pub fn fields(&self) -> [(&'static str, &Option<String>); 12] {
        [
            ("backend", &self.link),
            ("rate", &self.rate),
            ("rtt", &self.rtt),
            ("delay", &self.delay),
            ("jitter", &self.jitter),
            ("jitter_distribution", &self.jitter_distribution),
            ("loss", &self.loss),
            ("duplicate", &self.duplicate),
            ("reorder", &self.reorder),
            ("queue", &self.queue),
            ("aqm", &self.aqm),
            ("trace", &self.trace),
        ]
    }

    /// The link these flags describe (on top of `--link-file`).
    pub fn to_spec(&self) -> Result<LinkSpec, LinkError> {
        let (mut table, base) = match &self.link_file {
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|e| LinkError {
                    field: p.display().to_string(),
                    problem: format!("cannot read: {e}"),
                })?;
                let t: toml::Table = toml::from_str(&text).map_err(|e| LinkError {
                    field: p.display().to_string(),
                    problem: format!("not valid TOML: {e}"),
                })?;
                let t = match t.get("link") {
                    Some(toml::Value::Table(l)) => l.clone(),
                    _ => t,
                };
                (t, p.parent().map(Path::to_path_buf).unwrap_or_default())
            }
            None => (toml::Table::new(), PathBuf::from(".")),
        };
        let flags = self.fields();
        for (a, b) in [("rtt", "delay"), ("rate", "trace")] {
            let given = |k: &str| flags.iter().any(|(f, v)| *f == k && v.is_some());
            if given(a) && given(b) {
                return Err(LinkError {
                    field: format!("link.{a}"),
                    problem: format!("give either --{a} or --{b}, not both"),
                });
            }
        }
        for (k, v) in flags {
            if let Some(v) = v {
                // A flag replaces whatever the file said, including its
                // rtt/delay or rate/trace counterpart.
                match k {
                    "rtt" => drop(table.remove("delay")),
                    "delay" => drop(table.remove("rtt")),
                    "rate" => drop(table.remove("trace")),
                    "trace" => drop(table.remove("rate")),
                    _ => {}
                }
                table.insert(k.into(), toml::Value::String(v.clone()));
            }
        }
        if let Some(s) = &self.seed {
            let v = s
                .trim()
                .parse::<i64>()
                .map(toml::Value::Integer)
                .unwrap_or_else(|_| toml::Value::String(s.clone()));
            table.insert("seed".into(), v);
        }
        for (dir, items) in [("up", &self.up), ("down", &self.down)] {
            for item in items {
                let Some((k, v)) = item.split_once('=') else {
                    return Err(LinkError {
                        field: format!("--{dir}"),
                        problem: format!("`{item}` is not KEY=VALUE, e.g. --{dir} rate=5mbit"),
                    });
                };
                let sub = table
                    .entry(dir.to_string())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                if let Some(t) = sub.as_table_mut() {
                    t.insert(k.trim().into(), toml::Value::String(v.trim().into()));
                }
            }
        }
        LinkSpec::from_toml(&table, &base, "link")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("l.toml");
        std::fs::write(&f, "[link]\nrate = \"5mbit\"\ndelay = \"7ms\"\n").unwrap();
        let a = LinkArgs {
            link_file: Some(f),
            rtt: Some("40ms".into()),
            up: vec!["rate=1mbit".into()],
            ..LinkArgs::default()
        };
        let l = a.to_spec().unwrap();
        assert_eq!(
            (l.up.rate_bps, l.down.rate_bps, l.down.delay_ns),
            (1e6, 5e6, 20_000_000)
        );
        let bad = LinkArgs {
            down: vec!["rate".into()],
            ..LinkArgs::default()
        };
        assert!(bad.to_spec().unwrap_err().to_string().contains("--down"));
    }
}
