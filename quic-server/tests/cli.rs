//! Bad input gives a clear error and exit status 2.

use std::process::Command;

fn server(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_quic-server"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_input_exits_2_and_names_the_problem() {
    let cases: &[(&[&str], &str)] = &[
        (&["--listen", "localhost"], "invalid socket address"),
        (&["--listen", "127.0.0.1:99999"], "invalid socket address"),
        (
            &["--cc", "nope"],
            "unknown congestion-control algorithm `nope`",
        ),
        (
            &["--cc", "vegas:delta=3"],
            "`vegas` has no parameter `delta`",
        ),
        (
            &["--cert", "/nonexistent.pem", "--key", "/nonexistent.key"],
            "cannot load certificate /nonexistent.pem",
        ),
        (&["--cert", "/nonexistent.pem"], "--key"),
        (&["--idle-timeout", "0"], "--idle-timeout"),
        (&["--max-connections", "0"], "--max-connections"),
    ];
    for (args, expect) in cases {
        let (code, err) = server(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(expect), "{args:?}: stderr was {err}");
    }
}
