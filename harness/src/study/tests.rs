//! Study files: what is refused (naming the field) and what the command
//! line's changes do.

use super::*;

const BASE: &str = r#"
study = "toy"
title = "A toy study"
[scenario]
duration = "2s"
repetitions = 2
[scenario.link]
rate = "10mbit"
rtt = "20ms"
queue = "1bdp"
[[scenario.flows]]
cc = "newreno"

[[axis]]
name = "backend"
field = "link.backend"
values = ["sim", "emu"]

[[experiment]]
id = "main"
[[experiment.axis]]
name = "cc"
field = "flows.0.cc"
values = ["newreno", "tcp:reno", "vegas", "tcp:vegas"]

[candidates]
axis = "cc"
keep = ["tcp:reno", "tcp:vegas"]

[[goal]]
id = "u"
statement = "NewReno as Linux reno"
metric = "utilization"
a = "cc=newreno"
b = "cc=tcp:reno"
within = 5

[[table]]
id = "t"
rows = ["cc"]
by = "backend"
metrics = ["utilization", "queue_delay_ms"]
"#;

fn load(text: &str) -> Result<Study, StudyError> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s.toml");
    std::fs::write(&p, text).unwrap();
    Study::load(&p)
}

fn err(text: &str) -> String {
    load(text).unwrap_err().to_string()
}

#[test]
fn a_good_study_loads() {
    let s = load(BASE).unwrap();
    let e = &s.experiments()[0];
    assert_eq!(e.axes.len(), 2);
    assert_eq!(e.points(false).len(), 8);
}

#[test]
fn bad_fields_are_named() {
    assert!(err(&BASE.replace("title = ", "titel = ")).contains("titel"));
    let e = err(&BASE.replace("metric = \"utilization\"", "metric = \"speed\""));
    assert!(
        e.contains("goal u") && e.contains("speed") && e.contains("queue_delay_ms"),
        "{e}"
    );
    let e = err(&BASE.replace("b = \"cc=tcp:reno\"", "b = \"cc=tcp:cubic\""));
    assert!(
        e.contains("goal u: b") && e.contains("tcp:cubic") && e.contains("tcp:vegas"),
        "{e}"
    );
    let e = err(&BASE.replace("b = \"cc=tcp:reno\"", "b = \"backend=emu\""));
    assert!(e.contains("same axes"), "{e}");
    let e = err(&BASE.replace("a = \"cc=newreno\"", "a = \"rate=2\""));
    assert!(
        e.contains("`rate` is not an axis") && e.contains("backend, cc"),
        "{e}"
    );
    let e = err(&BASE.replace("within = 5", "within = \"five\""));
    assert!(e.contains("within") && e.contains("five"), "{e}");
    let e = err(&BASE.replace("by = \"backend\"", ""));
    assert!(e.contains("table t") && e.contains("`backend`"), "{e}");
    let e = err(&BASE.replace(
        "keep = [\"tcp:reno\", \"tcp:vegas\"]",
        "keep = [\"tcp:bbr\"]",
    ));
    assert!(
        e.contains("candidates.keep") && e.contains("tcp:bbr"),
        "{e}"
    );
    let e = err(&BASE.replace("study = \"toy\"", "study = \"../x\""));
    assert!(e.contains("study:"), "{e}");
    let e = err(&BASE.replace("[scenario]", "[scenari]"));
    assert!(e.contains("scenari"), "{e}");
    // A table's column may read some flows or one link, nothing else.
    let e = err(&BASE.replace(
        "metrics = [\"utilization\"",
        "metrics = [\"utilization[cc=x]\"",
    ));
    assert!(e.contains("flow= or link="), "{e}");
    let e = err(&BASE.replace(
        "metrics = [\"utilization\"",
        "metrics = [\"speed[flow=#0]\"",
    ));
    assert!(e.contains("`speed`"), "{e}");
    let e = err(&BASE.replace(
        "metrics = [\"utilization\"",
        "metrics = [\"utilization[link=l1\"",
    ));
    assert!(e.contains("closing"), "{e}");
    assert!(load(&BASE.replace(
        "metrics = [\"utilization\"",
        "metrics = [\"share[flow=#0]\", \"utilization[link=l1]\""
    ))
    .is_ok());
}

#[test]
fn a_metric_column_names_its_flows_and_link() {
    let (m, sel) = metric_column("queue_delay_ms[flow=#1,link=l2]").unwrap();
    assert_eq!(
        (m, sel.flow.as_deref(), sel.link.as_deref()),
        ("queue_delay_ms", Some("#1"), Some("l2"))
    );
    let (m, sel) = metric_column("jain").unwrap();
    assert_eq!((m, sel.flow, sel.link), ("jain", None, None));
}

#[test]
fn cc_replaces_the_candidates_and_keeps_the_references() {
    let mut s = load(BASE).unwrap();
    s.apply(&Overrides {
        cc: vec!["mine:k=1".into()],
        ..Default::default()
    })
    .unwrap();
    // The goal named newreno, now gone: left out, and said so.
    assert!(s.goals.is_empty());
    assert!(s.notes[0].contains("goal u left out"), "{:?}", s.notes);
    let mut s2 = load(&BASE.replace(
        "a = \"cc=newreno\"\nb = \"cc=tcp:reno\"",
        "a = \"cc=tcp:vegas\"\nb = \"cc=tcp:reno\"",
    ))
    .unwrap();
    s2.apply(&Overrides {
        cc: vec!["mine:k=1".into()],
        ..Default::default()
    })
    .unwrap();
    let a = &s2.experiments()[0].axes[1];
    let labels: Vec<String> = (0..a.values.len())
        .map(|i| Experiment::label(a, i))
        .collect();
    assert_eq!(labels, ["mine:k=1", "tcp:reno", "tcp:vegas"]);
    s = load(BASE).unwrap();
    let e = s
        .apply(&Overrides {
            axes: vec![("rate".into(), vec!["1".into()])],
            ..Default::default()
        })
        .unwrap_err()
        .to_string();
    assert!(e.contains("--axis") && e.contains("backend, cc"), "{e}");
}

/// `--axis` takes an axis's label for its value (`load=quiet` is 0), and
/// a number as a number (`load=2`), so a numeric field such as
/// `host.busy` accepts it; text stays text.
#[test]
fn axis_overrides_take_labels_and_numbers() {
    let with_load = BASE.replace(
        "[[axis]]\nname = \"backend\"",
        "[[axis]]\nname = \"load\"\nfield = \"host.busy\"\nvalues = [0, 2]\nlabels = [\"quiet\", \"loaded\"]\n\n[[axis]]\nname = \"backend\"",
    );
    let with_load = with_load.replace("rows = [\"cc\"]", "rows = [\"cc\", \"load\"]");
    assert_ne!(with_load, BASE);
    let mut s = load(&with_load).unwrap();
    s.apply(&Overrides {
        axes: vec![
            ("load".into(), vec!["quiet".into(), "2".into()]),
            ("backend".into(), vec!["sim".into()]),
        ],
        ..Default::default()
    })
    .unwrap();
    let e = &s.experiments()[0];
    let load_axis = e.axes.iter().find(|a| a.name == "load").unwrap();
    assert_eq!(
        load_axis.values,
        [toml::Value::Integer(0), toml::Value::Integer(2)]
    );
    // 2 is one of the axis's values: it keeps its label.
    assert_eq!(load_axis.labels, ["quiet", "loaded"]);
    let b = e.axes.iter().find(|a| a.name == "backend").unwrap();
    assert_eq!(b.values, [toml::Value::String("sim".into())]);
    // An axis the candidates name, given values without a reference: the
    // study still loads, and keeps only the references left.
    let mut s = load(BASE).unwrap();
    s.apply(&Overrides {
        axes: vec![("cc".into(), vec!["vegas".into(), "tcp:vegas".into()])],
        ..Default::default()
    })
    .unwrap();
    assert_eq!(s.candidates.as_ref().unwrap().keep, ["tcp:vegas"]);
}

#[test]
fn experiment_keeps_only_the_named_experiments_and_what_reads_them() {
    let two = format!(
        "{BASE}\n[[experiment]]\nid = \"red\"\nset = {{ \"link.aqm\" = \"red\" }}\n[[experiment.axis]]\nname = \"cc\"\nfield = \"flows.0.cc\"\nvalues = [\"newreno\", \"tcp:reno\"]\n\n[[table]]\nid = \"r\"\nexperiment = \"red\"\nrows = [\"cc\"]\nby = \"backend\"\nmetrics = [\"utilization\"]\n\n[[goal]]\nid = \"both\"\nexperiment = \"main,red\"\nstatement = \"over both\"\nmetric = \"utilization\"\na = \"cc=newreno\"\nb = \"cc=tcp:reno\"\nwithin = 5\n"
    );
    let mut s = load(&two).unwrap();
    assert_eq!(s.experiments().len(), 2);
    assert_eq!(s.goals.len(), 2);
    s.apply(&Overrides {
        experiments: vec!["main".into()],
        ..Default::default()
    })
    .unwrap();
    let ids: Vec<String> = s.experiments().iter().map(|e| e.id.clone()).collect();
    assert_eq!(ids, ["main"]);
    let tables: Vec<&str> = s.tables.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(tables, ["t"]);
    // The goal over both experiments goes with either.
    let goals: Vec<&str> = s.goals.iter().map(|g| g.id.as_str()).collect();
    assert_eq!(goals, ["u"]);
    let e = load(&two)
        .unwrap()
        .apply(&Overrides {
            experiments: vec!["blue".into()],
            ..Default::default()
        })
        .unwrap_err()
        .to_string();
    assert!(e.contains("`blue`") && e.contains("main, red"), "{e}");
}

#[test]
fn command_line_lists_keep_each_specs_parameters() {
    assert_eq!(
        split_values("vegas:linux_slow_start=1,beta=4.99,newreno, tcp:vegas"),
        ["vegas:linux_slow_start=1,beta=4.99", "newreno", "tcp:vegas"]
    );
    assert_eq!(
        split_values("red:gentle=false,wq=0.002"),
        ["red:gentle=false,wq=0.002"]
    );
    assert_eq!(split_values("1bdp,4bdp"), ["1bdp", "4bdp"]);
    assert_eq!(
        split_values("mine:k=2,cubic:beta=0.7"),
        ["mine:k=2", "cubic:beta=0.7"]
    );
    // A piece with `=` and nothing before it to continue stays a value of
    // its own (and is refused where it is read as a spec).
    assert_eq!(split_values("k=2,newreno"), ["k=2", "newreno"]);
    assert_eq!(split_values("newreno,,cubic"), ["newreno", "cubic"]);
}

#[test]
fn the_command_lines_fields_beat_an_experiments_own_set() {
    let own = BASE.replace(
        "[[experiment]]\nid = \"main\"\n",
        "[[experiment]]\nid = \"main\"\nset = { repetitions = 3, \"link.rate\" = \"20mbit\", \"link.aqm\" = \"red\" }\n",
    );
    assert_ne!(own, BASE);
    let s = load(&own).unwrap();
    let e = &s.experiments()[0];
    assert_eq!(e.set["repetitions"].as_integer(), Some(3));
    let mut s = load(&own).unwrap();
    s.apply(&Overrides {
        repetitions: Some(1),
        set: vec![("link.rate".into(), toml::Value::String("5mbit".into()))],
        ..Default::default()
    })
    .unwrap();
    let e = &s.experiments()[0];
    assert_eq!(e.set["repetitions"].as_integer(), Some(1));
    assert_eq!(e.set["link.rate"].as_str(), Some("5mbit"));
    // What the command line does not name stays the experiment's.
    assert_eq!(e.set["link.aqm"].as_str(), Some("red"));
}

#[test]
fn link_replaces_the_backend_axis_or_sets_the_backend() {
    let mut s = load(BASE).unwrap();
    s.apply(&Overrides {
        link: vec!["sim".into()],
        ..Default::default()
    })
    .unwrap();
    assert_eq!(s.experiments()[0].points(false).len(), 4);
    let e = s
        .apply(&Overrides {
            link: vec!["ns3".into()],
            ..Default::default()
        })
        .unwrap_err()
        .to_string();
    assert!(e.contains("ns3") && e.contains("sim, emu, netem"), "{e}");
    // Without a backend axis, one backend is set on every run.
    let no_axis = BASE
        .replace(
            "[[axis]]\nname = \"backend\"\nfield = \"link.backend\"\nvalues = [\"sim\", \"emu\"]\n",
            "",
        )
        .replace("by = \"backend\"\n", "");
    let mut s = load(&no_axis).unwrap();
    assert!(s.axes.is_empty());
    s.apply(&Overrides {
        link: vec!["sim".into()],
        ..Default::default()
    })
    .unwrap();
    assert_eq!(s.set["link.backend"].as_str(), Some("sim"));
}

#[test]
fn host_fields_are_busy_processes_a_router_an_emu_mode_or_refused() {
    let v = |k: &str, x: toml::Value| vec![(k.to_string(), x)];
    assert_eq!(host_setup(&[], "s").unwrap(), jobs::Host::default());
    assert_eq!(host_setup(&v("host.busy", 2.into()), "s").unwrap().busy, 2);
    let e = host_setup(&v("host.busy", 65.into()), "s")
        .unwrap_err()
        .to_string();
    assert!(e.contains("host.busy") && e.contains("0 to 64"), "{e}");
    let r = |x: &str| host_setup(&v("host.netem_router", x.into()), "s");
    assert_eq!(r("guest").unwrap().netem_router, Some(true));
    assert_eq!(r("host").unwrap().netem_router, Some(false));
    assert_eq!(r("auto").unwrap().netem_router, None);
    let e = r("vm").unwrap_err().to_string();
    assert!(e.contains("vm") && e.contains("guest, host, auto"), "{e}");
    let m = host_setup(&v("host.emu_mode", "ip".into()), "s").unwrap();
    assert_eq!(m.emu_mode, Some(crate::emu::EmuMode::Ip));
    let e = host_setup(&v("host.emu_mode", "tap".into()), "s")
        .unwrap_err()
        .to_string();
    assert!(e.contains("tap") && e.contains("relay, ip"), "{e}");
    let c = host_setup(&v("host.count_syscalls", true.into()), "s").unwrap();
    assert!(c.count_syscalls);
    let e = host_setup(&v("host.count_syscalls", "yes".into()), "s")
        .unwrap_err()
        .to_string();
    assert!(e.contains("true or false"), "{e}");
    let e = host_setup(&v("host.cpus", 1.into()), "s")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("host.cpus") && e.contains("host.netem_router"),
        "{e}"
    );
}

#[test]
fn a_scenarios_own_backend_stands_and_sim_is_the_default() {
    let no_axis = BASE
        .replace(
            "[[axis]]\nname = \"backend\"\nfield = \"link.backend\"\nvalues = [\"sim\", \"emu\"]\n",
            "",
        )
        .replace("by = \"backend\"\n", "")
        .replace("\"tcp:reno\", ", "")
        .replace("\"tcp:vegas\"", "\"cubic\"")
        .replace("keep = [\"tcp:reno\", \"tcp:vegas\"]", "")
        .replace("b = \"cc=tcp:reno\"", "b = \"cc=cubic\"");
    let out = tempfile::tempdir().unwrap();
    let opts = crate::reproduce::Options {
        out: out.path().to_path_buf(),
        quick: false,
        backend: Backend::Sim,
        jobs: 1,
        quiet: true,
        stop: Default::default(),
        bin_dir: out.path().to_path_buf(),
        qlog_level: quic_app::QlogLevel::Off,
    };
    let backends = |text: &str| -> Vec<Backend> {
        let s = load(text).unwrap();
        let (jobs, _) = plan(&s, out.path(), &opts).unwrap();
        jobs.iter().map(|j| j.scenario.link.backend).collect()
    };
    assert!(backends(&no_axis).iter().all(|b| *b == Backend::Sim));
    let emu = no_axis.replace("[scenario.link]\n", "[scenario.link]\nbackend = \"emu\"\n");
    assert!(backends(&emu).iter().all(|b| *b == Backend::Emu));
}
