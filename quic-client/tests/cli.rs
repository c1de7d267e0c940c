//! Bad input gives a clear error and exit status 2.

use std::process::Command;

fn client(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_quic-client"))
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
        (&["not a url"], "invalid URL `not a url`"),
        (&["http://127.0.0.1:4433/bytes/1"], "scheme must be https"),
        (
            &["https://127.0.0.1:4433/upload", "--upload", "lots"],
            "--upload: invalid size `lots`",
        ),
        (
            &["https://127.0.0.1:4433/bytes/1", "--cc", "vegsa"],
            "unknown congestion-control algorithm `vegsa`",
        ),
        (
            &["https://127.0.0.1:4433/bytes/1", "--cc", "vegas:alpha=-1"],
            "expected a number from 0 to 1000",
        ),
        (
            &["https://127.0.0.1:4433/bytes/1", "--duration", "-3"],
            "--duration: `-3` is not a positive number",
        ),
        (
            &["https://127.0.0.1:4433/bytes/1", "--interval", "0"],
            "--interval: `0` is not a positive number",
        ),
        (
            &["https://127.0.0.1:4433/bytes/1", "--no-such-flag"],
            "unexpected argument",
        ),
    ];
    for (args, expect) in cases {
        let (code, err) = client(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(expect), "{args:?}: stderr was {err}");
    }
}

#[test]
fn nothing_listening_is_a_failed_transfer_not_bad_input() {
    // A port nothing listens on: the transfer fails (1), quickly.
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = sock.local_addr().unwrap().port();
    drop(sock);
    let (code, err) = client(&[
        &format!("https://127.0.0.1:{port}/bytes/1"),
        "--connect-timeout",
        "1",
    ]);
    assert_eq!(code, 1, "{err}");
}
