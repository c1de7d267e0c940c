//! The request the client sends and the answers the server gives, one
//! JSON object a line.

use std::io::BufRead;

use serde_json::{json, Value};

/// Which way the payload goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Server to client.
    Download,
    /// Client to server.
    Upload,
}

impl Direction {
    /// `download` or `upload`.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Download => "download",
            Direction::Upload => "upload",
        }
    }

    fn parse(s: &str) -> Option<Direction> {
        match s {
            "download" => Some(Direction::Download),
            "upload" => Some(Direction::Upload),
            _ => None,
        }
    }
}

/// What the client asks for.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub direction: Direction,
    /// Payload bytes; `None`: for `duration_s`.
    pub bytes: Option<u64>,
    /// Seconds to send for; `None`: `bytes`.
    pub duration_s: Option<f64>,
    /// The sender's congestion control.
    pub cc: String,
    /// The sender's sampling interval, ms.
    pub interval_ms: u64,
}

/// The protocol's version, in every request.
pub const VERSION: u64 = 1;
/// The longest line either end accepts, bytes.
pub const MAX_LINE: u64 = 4096;

impl Request {
    /// As a line (without the newline).
    pub fn to_json(&self) -> Value {
        json!({
            "tcp_bulk": VERSION,
            "direction": self.direction.as_str(),
            "bytes": self.bytes,
            "duration_s": self.duration_s,
            "cc": self.cc,
            "interval_ms": self.interval_ms,
        })
    }

    /// Reads one from its JSON; the error says what is wrong.
    pub fn from_json(v: &Value) -> Result<Request, String> {
        if v["tcp_bulk"].as_u64() != Some(VERSION) {
            return Err(format!("not a tcp-bulk request of version {VERSION}: {v}"));
        }
        let direction = v["direction"]
            .as_str()
            .and_then(Direction::parse)
            .ok_or("direction: not download or upload")?;
        let bytes = v["bytes"].as_u64();
        let duration_s = v["duration_s"].as_f64();
        match (bytes, duration_s) {
            (Some(b), None) if b > 0 => {}
            (None, Some(d)) if d > 0.0 && d.is_finite() => {}
            _ => return Err("give bytes (above 0) or duration_s (above 0), one of them".into()),
        }
        let cc = v["cc"].as_str().ok_or("cc: missing")?.to_string();
        let interval_ms = v["interval_ms"]
            .as_u64()
            .filter(|i| (1..=60_000).contains(i))
            .ok_or("interval_ms: not from 1 to 60000")?;
        Ok(Request {
            direction,
            bytes,
            duration_s,
            cc,
            interval_ms,
        })
    }
}

/// Reads one line of JSON (at most [`MAX_LINE`] bytes).
pub fn read_line(r: &mut impl BufRead) -> std::io::Result<Value> {
    let mut line = String::new();
    let n = std::io::Read::take(&mut *r, MAX_LINE).read_line(&mut line)?;
    if n == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the peer closed the connection before its line",
        ));
    }
    if !line.ends_with('\n') {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a line longer than {MAX_LINE} bytes, or cut off"),
        ));
    }
    serde_json::from_str(line.trim()).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not a JSON line ({e}): {}", line.trim()),
        )
    })
}

/// `v` as one line with its newline.
pub fn line(v: &Value) -> Vec<u8> {
    let mut b = serde_json::to_vec(v).unwrap_or_default();
    b.push(b'\n');
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_bad_ones_are_refused() {
        let r = Request {
            direction: Direction::Upload,
            bytes: None,
            duration_s: Some(2.5),
            cc: "reno".into(),
            interval_ms: 10,
        };
        assert_eq!(Request::from_json(&r.to_json()), Ok(r.clone()));
        let mut v = r.to_json();
        v["bytes"] = json!(5);
        assert!(Request::from_json(&v).unwrap_err().contains("one of them"));
        let mut v = r.to_json();
        v["interval_ms"] = json!(0);
        assert!(Request::from_json(&v).unwrap_err().contains("interval_ms"));
        let mut v = r.to_json();
        v["tcp_bulk"] = json!(9);
        assert!(Request::from_json(&v).unwrap_err().contains("version"));
    }

    #[test]
    fn lines_are_bounded() {
        let mut r = std::io::Cursor::new(vec![b'x'; 10_000]);
        assert!(read_line(&mut r).is_err());
        let mut r = std::io::Cursor::new(b"{\"a\":1}\nrest".to_vec());
        assert_eq!(read_line(&mut r).unwrap(), json!({"a": 1}));
    }
}
