//! cclab's HTML report in headless Chromium: the `report` stage of `make
//! test` (`cargo test --workspace --release --test
//! report_chromium -- --ignored`; a plain `cargo test` leaves it out, as it
//! starts a browser). It fails on a JavaScript error, a network request
//! (the page must be self-contained) or a blank figure.
//!
//! It makes its own reports on the virtual-time link (fast and
//! deterministic): a sweep of three algorithms with two repetitions (one
//! panel per run, error bars in the scatter) and one run of two flows (one
//! panel per flow). Each page is loaded through the DevTools protocol over a
//! pipe (`--remote-debugging-pipe`: messages separated by NUL bytes on file
//! descriptors 3 and 4); console errors, uncaught exceptions and failed
//! loads are collected; the table's sort script is clicked; every figure is
//! checked in the DOM (data lines and points drawn in colour, one per panel
//! at least) and in a screenshot of its box (enough non-white pixels).
//! Before that, a self-test breaks a copy of a page (a thrown error, an
//! emptied figure) and makes sure both are caught, so the checks can fail.
//!
//! Without Chromium it runs `scripts/ensure-chromium.sh`; if that cannot
//! install it, the test skips (fails under CI, `test_support::skip`).
//!
//! Env: `CCLAB_REPORT_PAGE=PAGE.html` checks that page instead of making
//! reports; `CCLAB_REPORT_SHOTS=DIR` saves the first page's screenshots
//! (its top as `page.png`, each figure as `<id>.png`) and makes a missing
//! browser a failure (`scripts/report-screenshots.sh` uses both);
//! `CHROMIUM` names the browser.

use serde_json::{json, Value};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BROWSERS: [&str; 4] = [
    "chromium",
    "chromium-browser",
    "google-chrome-stable",
    "google-chrome",
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

fn log(msg: &str) {
    eprintln!("test-report-chromium: {msg}");
}

/// `name` on the PATH, or a path that is there.
fn which(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return Path::new(name).is_file().then(|| PathBuf::from(name));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn find_browser() -> Option<PathBuf> {
    match std::env::var("CHROMIUM") {
        Ok(b) => which(&b),
        Err(_) => BROWSERS.iter().find_map(|b| which(b)),
    }
}

/// The browser, or why there is none.
fn ensure_browser() -> Result<PathBuf, String> {
    if let Some(p) = find_browser() {
        return Ok(p);
    }
    let o = Command::new(repo().join("scripts/ensure-chromium.sh"))
        .output()
        .map_err(|e| format!("scripts/ensure-chromium.sh: {e}"))?;
    find_browser().ok_or_else(|| {
        let err = String::from_utf8_lossy(&o.stderr);
        let why = err.lines().last().unwrap_or("ensure-chromium.sh failed");
        format!("no Chromium: {why}")
    })
}

/// Decodes standard base64 (the screenshots' PNG).
fn base64(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {:?}", c as char),
    };
    let bytes: Vec<u8> = s.bytes().filter(|c| !matches!(c, b'=' | b'\n')).collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, c)| n | (val(*c) as u32) << (18 - 6 * i));
        out.extend(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}

/// Fraction of a PNG's pixels that are not (nearly) white.
fn ink(png_bytes: &[u8]) -> f64 {
    let decoder = png::Decoder::new(std::io::Cursor::new(png_bytes));
    let mut reader = decoder.read_info().expect("a PNG screenshot");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("a PNG frame");
    let ch = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("a screenshot in {other:?}, not RGB(A)"),
    };
    assert_eq!(info.bit_depth, png::BitDepth::Eight, "an 8-bit screenshot");
    let (w, h) = (info.width as usize, info.height as usize);
    let dark = (0..h)
        .flat_map(|y| {
            let row = &buf[y * info.line_size..][..w * ch];
            row.chunks(ch)
                .map(|p| p[0].min(p[1]).min(p[2]) < 235)
                .collect::<Vec<_>>()
        })
        .filter(|d| *d)
        .count();
    dark as f64 / (w * h).max(1) as f64
}

/// One headless Chromium, driven over its DevTools pipe.
struct Browser {
    child: Child,
    /// Its stderr.
    log: PathBuf,
    to: File,
    from: File,
    buf: Vec<u8>,
    next_id: u64,
    events: Vec<Value>,
    session: Option<String>,
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two descriptors it is given.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe2: {}", std::io::Error::last_os_error());
    // SAFETY: both are open and owned by nothing else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

impl Browser {
    fn start(exe: &Path, profile: &Path) -> Browser {
        let (to_browser_r, to_browser_w) = pipe();
        let (from_browser_r, from_browser_w) = pipe();
        let (r, w) = (
            std::os::fd::AsRawFd::as_raw_fd(&to_browser_r),
            std::os::fd::AsRawFd::as_raw_fd(&from_browser_w),
        );
        let mut c = Command::new(exe);
        c.args([
            "--headless=new",
            "--remote-debugging-pipe",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--hide-scrollbars",
            "--mute-audio",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        // A file, not a pipe nobody reads while the browser runs.
        .stderr(File::create(profile.with_extension("stderr")).expect("the browser's log"));
        // SAFETY: only async-signal-safe calls (fcntl, dup2) between fork
        // and exec. The pipe ends move above 9 first, so that placing them
        // at 3 and 4 cannot close one another; dup2 clears close-on-exec.
        unsafe {
            c.pre_exec(move || {
                let a = libc::fcntl(r, libc::F_DUPFD_CLOEXEC, 10);
                let b = libc::fcntl(w, libc::F_DUPFD_CLOEXEC, 10);
                if a < 0 || b < 0 || libc::dup2(a, 3) < 0 || libc::dup2(b, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = c
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", exe.display()));
        drop((to_browser_r, from_browser_w));
        Browser {
            child,
            log: profile.with_extension("stderr"),
            to: File::from(to_browser_w),
            from: File::from(from_browser_r),
            buf: Vec::new(),
            next_id: 0,
            events: Vec::new(),
            session: None,
        }
    }

    /// One message, or `None` after `timeout`.
    fn read(&mut self, timeout: Duration) -> Option<Value> {
        let end = Instant::now() + timeout;
        loop {
            if let Some(i) = self.buf.iter().position(|b| *b == 0) {
                let msg: Vec<u8> = self.buf.drain(..=i).collect();
                return Some(serde_json::from_slice(&msg[..i]).expect("a DevTools message"));
            }
            let left = end.saturating_duration_since(Instant::now());
            let mut pfd = libc::pollfd {
                fd: std::os::fd::AsRawFd::as_raw_fd(&self.from),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let n = unsafe { libc::poll(&mut pfd, 1, left.as_millis() as i32) };
            if n <= 0 {
                return None;
            }
            let mut chunk = vec![0u8; 1 << 20];
            let got = self.from.read(&mut chunk).expect("the DevTools pipe");
            if got == 0 {
                let err = std::fs::read_to_string(&self.log).unwrap_or_default();
                let tail = &err[err.len().saturating_sub(2000)..];
                panic!("the browser closed its pipe; its stderr ends:\n{tail}");
            }
            self.buf.extend_from_slice(&chunk[..got]);
        }
    }

    fn call_with(&mut self, method: &str, params: Value, session: bool) -> Value {
        self.next_id += 1;
        let mut msg = json!({ "id": self.next_id, "method": method, "params": params });
        if let (true, Some(s)) = (session, &self.session) {
            msg["sessionId"] = s.clone().into();
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.to.write_all(&bytes).expect("the DevTools pipe");
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            let m = self
                .read(end.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|| panic!("{method}: no answer in 30 s"));
            if m["id"] == self.next_id {
                assert!(m.get("error").is_none(), "{method}: {}", m["error"]);
                return m["result"].clone();
            }
            self.events.push(m);
        }
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        self.call_with(method, params, true)
    }

    fn evaluate(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({ "expression": expression, "returnByValue": true }),
        );
        r["result"]["value"].clone()
    }

    fn wait_event(&mut self, name: &str, timeout: Duration) {
        let end = Instant::now() + timeout;
        loop {
            if let Some(i) = self.events.iter().position(|e| e["method"] == name) {
                self.events.remove(i);
                return;
            }
            let m = self
                .read(end.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|| panic!("no {name} in {timeout:?}"));
            self.events.push(m);
        }
    }

    fn drain(&mut self, d: Duration) {
        let end = Instant::now() + d;
        while let Some(m) = self.read(end.saturating_duration_since(Instant::now())) {
            self.events.push(m);
        }
    }

    fn screenshot(&mut self, f: &Value, scale: f64) -> Vec<u8> {
        let clip = json!({ "x": f["x"], "y": f["y"], "width": f["width"], "height": f["height"], "scale": scale });
        let r = self.call(
            "Page.captureScreenshot",
            json!({ "format": "png", "clip": clip, "captureBeyondViewport": true }),
        );
        base64(r["data"].as_str().expect("a screenshot"))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        self.next_id += 1;
        let msg = format!("{{\"id\":{},\"method\":\"Browser.close\"}}\0", self.next_id);
        let _ = self.to.write_all(msg.as_bytes());
        let t0 = Instant::now();
        while matches!(self.child.try_wait(), Ok(None)) && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every figure's box and what is drawn in it. Frame colours (axes, grid)
/// are light greys, white is the background; everything else is data. A
/// data line runs along the time axis (drop ticks and leader lines are
/// short).
const FIGURES_JS: &str = r"
(() => {
  const data = c => {
    const m = /^#?([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(c || '');
    if (!m) return false;
    const v = [1, 2, 3].map(i => parseInt(m[i], 16));
    return !(v[0] === v[1] && v[1] === v[2] && v[0] >= 0x90);
  };
  return JSON.stringify(Array.from(document.querySelectorAll('figure.fig')).map(f => {
    const svg = f.querySelector('svg');
    const r = svg ? svg.getBoundingClientRect() : {x: 0, y: 0, width: 0, height: 0};
    const wide = p => p.getBBox().width >= 10;
    const lines = svg ? Array.from(svg.querySelectorAll('polyline'))
        .filter(p => data(p.getAttribute('stroke')) && wide(p)).length : 0;
    const dots = svg ? Array.from(svg.querySelectorAll('circle'))
        .filter(c => data(c.getAttribute('fill'))).length : 0;
    return {id: f.id, panels: parseInt(f.dataset.panels || '0'), x: r.x + window.scrollX,
            y: r.y + window.scrollY, width: r.width, height: r.height, lines, dots};
  }));
})()
";

/// Clicks the sortable table's third column twice: ascending, then
/// descending.
const SORT_JS: &str = r"
(() => {
  const t = document.querySelector('table.sortable');
  if (!t) return 'no sortable table';
  const th = t.tHead.rows[0].cells[2];
  const col = () => Array.from(t.tBodies[0].rows).map(r => parseFloat(r.cells[2].getAttribute('data-v')));
  th.click();
  const up = col();
  for (let i = 1; i < up.length; i++) if (up[i - 1] > up[i]) return 'not sorted after a click: ' + up;
  th.click();
  const down = col();
  for (let i = 1; i < down.length; i++) if (down[i - 1] < down[i]) return 'not sorted descending after a second click: ' + down;
  return 'ok';
})()
";

/// What the page's scripts and loads did wrong.
fn js_problems(events: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for e in events {
        let p = &e["params"];
        match e["method"].as_str().unwrap_or_default() {
            "Runtime.exceptionThrown" => {
                let d = &p["exceptionDetails"];
                let what = d["exception"]["description"]
                    .as_str()
                    .or(d["text"].as_str())
                    .unwrap_or("?");
                out.push(format!("uncaught: {what}"));
            }
            "Runtime.consoleAPICalled"
                if matches!(p["type"].as_str(), Some("error" | "assert")) =>
            {
                let args: Vec<String> = p["args"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|a| a.get("value").unwrap_or(&a["description"]).to_string())
                    .collect();
                out.push(format!("console.error: {}", args.join(" ")));
            }
            "Log.entryAdded" if p["entry"]["level"] == "error" => {
                out.push(format!("log: {}", p["entry"]["text"]));
            }
            "Network.requestWillBeSent" => {
                let url = p["request"]["url"].as_str().unwrap_or_default();
                if !["file:", "data:", "about:"]
                    .iter()
                    .any(|s| url.starts_with(s))
                {
                    out.push(format!(
                        "network request (the page must be self-contained): {url}"
                    ));
                }
            }
            _ => {}
        }
    }
    out
}

/// Problems of one figure: too small, fewer data lines (or scatter
/// points) than panels, or a screenshot of its box nearly all white.
fn check_figure(b: &mut Browser, f: &Value, shots: Option<&Path>) -> Vec<String> {
    let name = f["id"].as_str().unwrap_or("?");
    let (w, h) = (
        f["width"].as_f64().unwrap_or(0.0),
        f["height"].as_f64().unwrap_or(0.0),
    );
    if w < 100.0 || h < 100.0 {
        return vec![format!("{name}: drawn {w:.0}x{h:.0} px")];
    }
    let mut out = Vec::new();
    let want = f["panels"].as_u64().unwrap_or(0).max(1);
    let drawn = f[if name == "fig-scatter" {
        "dots"
    } else {
        "lines"
    }]
    .as_u64()
    .unwrap_or(0);
    if drawn < want {
        out.push(format!(
            "{name}: {drawn} data line(s) or point(s) drawn for {want} panel(s)"
        ));
    }
    if let Some(dir) = shots {
        let png = b.screenshot(f, 1.0);
        std::fs::write(dir.join(format!("{name}.png")), png).expect("a screenshot file");
    }
    let dark = ink(&b.screenshot(f, 0.5));
    if dark < 0.005 {
        out.push(format!(
            "{name}: blank ({:.2}% of its pixels are not white)",
            dark * 100.0
        ));
    }
    out
}

/// Problems found on `page` (empty: it passes).
fn check_page(exe: &Path, page: &Path, shots: Option<&Path>, profile: &Path) -> Vec<String> {
    let mut b = Browser::start(exe, profile);
    let target = b.call_with(
        "Target.createTarget",
        json!({ "url": "about:blank" }),
        false,
    )["targetId"]
        .clone();
    let session = b.call_with(
        "Target.attachToTarget",
        json!({ "targetId": target, "flatten": true }),
        false,
    )["sessionId"]
        .as_str()
        .expect("a session")
        .to_string();
    b.session = Some(session);
    for domain in ["Runtime", "Log", "Page", "Network"] {
        b.call(&format!("{domain}.enable"), json!({}));
    }
    b.call(
        "Emulation.setDeviceMetricsOverride",
        json!({ "width": 1100, "height": 900, "deviceScaleFactor": 1, "mobile": false }),
    );
    let url = format!(
        "file://{}",
        std::fs::canonicalize(page).expect("the page").display()
    );
    b.call("Page.navigate", json!({ "url": url }));
    b.wait_event("Page.loadEventFired", Duration::from_secs(60));
    b.drain(Duration::from_millis(500));
    let mut problems = Vec::new();
    let sort = b.evaluate(SORT_JS);
    if sort != "ok" {
        problems.push(format!("table sorting: {sort}"));
    }
    let figs: Vec<Value> = serde_json::from_str(b.evaluate(FIGURES_JS).as_str().expect("figures"))
        .expect("the figures as JSON");
    b.drain(Duration::from_millis(300));
    problems.extend(js_problems(&b.events));
    if figs.len() < 5 {
        problems.push(format!(
            "{} figure(s) on the page, expected 5 (scatter, cwnd, rtt, goodput, queue)",
            figs.len()
        ));
    }
    for f in &figs {
        problems.extend(check_figure(&mut b, f, shots));
    }
    if let Some(dir) = shots {
        let clip = json!({ "x": 0, "y": 0, "width": 1100, "height": 900, "scale": 1 });
        let r = b.call(
            "Page.captureScreenshot",
            json!({ "format": "png", "clip": clip }),
        );
        std::fs::write(dir.join("page.png"), base64(r["data"].as_str().unwrap()))
            .expect("page.png");
    }
    problems
}

fn cclab(args: &[&str]) {
    let exe = repo().join("target/release/cclab");
    let o = Command::new(&exe)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e} (run scripts/ws-build.sh)", exe.display()));
    assert!(
        o.status.success(),
        "cclab {}: {}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A sweep of three algorithms with two repetitions, and one run of two
/// flows, on sim, each with its report.
fn make_reports(work: &Path) -> Vec<PathBuf> {
    let sweep = work.join("sweep.toml");
    std::fs::write(
        &sweep,
        format!(
            "scenario = \"{}/scenarios/default.toml\"\nrepetitions = 2\nseed = 1\n[grid]\n\"flows.0.cc\" = [\"cubic\", \"vegas\", \"bbr2\"]\n\"duration\" = [\"3s\"]\n\"link.loss\" = [\"0.2%\"]\n",
            repo().display()
        ),
    )
    .unwrap();
    let w = |p: &str| work.join(p).display().to_string();
    let s = |p: &Path| p.display().to_string();
    cclab(&[
        "sweep",
        &s(&sweep),
        "--link",
        "sim",
        "--quiet",
        "--out",
        &w("sweep"),
    ]);
    cclab(&["report", &w("sweep"), "--out", &w("sweep.html")]);
    cclab(&[
        "run",
        "--link",
        "sim",
        "--quiet",
        "--cc",
        "cubic",
        "--cc",
        "westwood+",
        "--duration",
        "3s",
        "--repetitions",
        "1",
        "--rate",
        "10mbit",
        "--rtt",
        "30ms",
        "--out",
        &w("flows"),
    ]);
    cclab(&["report", &w("flows"), "--out", &w("flows.html")]);
    vec![work.join("sweep.html"), work.join("flows.html")]
}

/// A copy of `page` with an uncaught error and its first figure emptied.
fn broken_copy(page: &Path, work: &Path) -> PathBuf {
    let html = std::fs::read_to_string(page).expect("the page");
    let fig = html.find("<figure class=\"fig\"").unwrap_or_else(|| {
        panic!(
            "{}: no <figure class=\"fig\"> (is it a page of `cclab report`?)",
            page.display()
        )
    });
    let start = fig + html[fig..].find("<svg").expect("an svg");
    let end = start + html[start..].find("</svg>").expect("its end");
    let head_end = start + html[start..].find('>').expect("its tag") + 1;
    let html = format!("{}{}", &html[..head_end], &html[end..]).replace(
        "</body>",
        "<script>throw new Error('self-test');</script></body>",
    );
    let out = work.join("broken.html");
    std::fs::write(&out, html).unwrap();
    out
}

#[test]
#[ignore = "starts a browser: make test's report stage runs it"]
fn the_report_renders_in_chromium() {
    let t0 = Instant::now();
    let shots = std::env::var_os("CCLAB_REPORT_SHOTS").map(PathBuf::from);
    let exe = match ensure_browser() {
        Ok(e) => e,
        Err(why) if shots.is_some() => panic!("screenshots asked for, and {why}"),
        Err(why) => {
            test_support::skip(&why);
            return;
        }
    };
    let work = tempfile::Builder::new()
        .prefix("cclab-report-test-")
        .tempdir()
        .expect("a temporary directory");
    let pages = match std::env::var_os("CCLAB_REPORT_PAGE") {
        Some(p) => vec![PathBuf::from(p)],
        None => make_reports(work.path()),
    };
    let profile = work.path().join("profile");
    let caught = check_page(&exe, &broken_copy(&pages[0], work.path()), None, &profile);
    assert!(
        caught.iter().any(|p| p.contains("self-test"))
            && caught.iter().any(|p| p.contains("blank")),
        "the self-test's broken page was not caught: {}",
        caught.join("; ")
    );
    log(&format!(
        "self-test: a broken copy of the page is caught ({} problem(s))",
        caught.len()
    ));
    let mut failed = Vec::new();
    for (i, page) in pages.iter().enumerate() {
        let shots = shots.as_deref().filter(|_| i == 0);
        if let Some(d) = shots {
            std::fs::create_dir_all(d).expect("the screenshots' directory");
        }
        let problems = check_page(&exe, page, shots, &profile);
        if problems.is_empty() {
            log(&format!("ok: {}", page.display()));
        }
        failed.extend(
            problems
                .into_iter()
                .map(|p| format!("{}: {p}", page.display())),
        );
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    log(&format!(
        "passed in {:.1} s ({})",
        t0.elapsed().as_secs_f64(),
        exe.display()
    ));
}
