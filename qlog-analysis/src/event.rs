//! The normalised events every reader produces, whatever the qlog flavour.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

/// What an event is, by its name in any qlog version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `quic:recovery_metrics_updated`, `recovery:metrics_updated`.
    Metrics,
    /// `quic:packet_sent`, `transport:packet_sent`.
    PacketSent,
    /// `quic:packet_received`, `transport:packet_received`.
    PacketReceived,
    /// `quic:packet_lost`, `recovery:packet_lost`.
    PacketLost,
    /// `quic:congestion_state_updated`, `recovery:congestion_state_updated`.
    CongestionState,
    /// `quic:stream_data_moved`, `transport:data_moved`.
    DataMoved,
    /// `simulation:scenario` (qlog's generic "simulation" category): the
    /// conditions of the run, as the harness writes them first in a trace.
    Scenario,
    /// `simulation:marker`: a change of conditions during the run.
    Marker,
    /// Anything else.
    Other,
}

impl Kind {
    /// Classifies a full event name (`category:type`, or a bare type).
    pub fn of(name: &str) -> Kind {
        let (cat, ty) = name.split_once(':').unwrap_or(("", name));
        match (cat, ty) {
            (_, "recovery_metrics_updated" | "metrics_updated" | "metric_update") => Kind::Metrics,
            ("http" | "h3", _) => Kind::Other,
            ("simulation", "scenario") => Kind::Scenario,
            ("simulation", "marker") => Kind::Marker,
            ("simulation", _) => Kind::Other,
            (_, "packet_sent") => Kind::PacketSent,
            (_, "packet_received") => Kind::PacketReceived,
            (_, "packet_lost") => Kind::PacketLost,
            (_, "congestion_state_updated") => Kind::CongestionState,
            (_, "stream_data_moved" | "data_moved") => Kind::DataMoved,
            _ => Kind::Other,
        }
    }
}

/// A number as qlog writes them: a JSON number or a numeric string
/// (draft-01 writes packet numbers and times as strings).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Num(pub f64);

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Num, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Num;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number or a numeric string")
            }
            fn visit_u64<E>(self, v: u64) -> Result<Num, E> {
                Ok(Num(v as f64))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Num, E> {
                Ok(Num(v as f64))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Num, E> {
                Ok(Num(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Num, E> {
                v.trim()
                    .parse::<f64>()
                    .map(Num)
                    .map_err(|_| E::invalid_value(de::Unexpected::Str(v), &self))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Num, E> {
                Ok(Num(v as u8 as f64))
            }
        }
        d.deserialize_any(V)
    }
}

/// A counter object as quiche writes it (`{"total": n, "delta": d}`), or a
/// plain number.
#[derive(Clone, Copy, Debug, Default)]
struct Total(f64);

impl<'de> Deserialize<'de> for Total {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Total, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Total;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number or {total, delta}")
            }
            fn visit_u64<E>(self, v: u64) -> Result<Total, E> {
                Ok(Total(v as f64))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Total, E> {
                Ok(Total(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Total, E> {
                Ok(Total(v as f64))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Total, A::Error> {
                let mut t = 0.0;
                while let Some(k) = m.next_key::<Cow<'de, str>>()? {
                    if k == "total" {
                        t = m.next_value::<Num>()?.0;
                    } else {
                        m.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(Total(t))
            }
        }
        d.deserialize_any(V)
    }
}

/// One metrics update: only the fields the event carried are `Some`.
/// Units are normalised: bytes, bit/s, milliseconds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metrics {
    /// Congestion window, bytes.
    pub cwnd: Option<f64>,
    /// Bytes in flight.
    pub bytes_in_flight: Option<f64>,
    /// Slow-start threshold, bytes (sentinels such as u64::MAX dropped).
    pub ssthresh: Option<f64>,
    /// Pacing rate, bit/s.
    pub pacing_rate_bps: Option<f64>,
    /// Minimum RTT, ms.
    pub min_rtt_ms: Option<f64>,
    /// Smoothed RTT, ms.
    pub smoothed_rtt_ms: Option<f64>,
    /// Latest RTT sample, ms.
    pub latest_rtt_ms: Option<f64>,
    /// RTT variance, ms.
    pub rtt_variance_ms: Option<f64>,
    /// Packets lost so far (quiche's `cf_lost_packets.total`).
    pub lost_packets_total: Option<f64>,
    /// Bytes lost so far.
    pub lost_bytes_total: Option<f64>,
    /// PTO count.
    pub pto_count: Option<f64>,
    /// Any other numeric field (a plugin's own metrics).
    pub extra: Vec<(String, f64)>,
}

/// Values at or above this are "infinite" sentinels (quiche starts
/// ssthresh at u64::MAX), not measurements.
pub const SENTINEL: f64 = 4.0e18;

impl Metrics {
    /// Parses a metrics event's data. `time_scale` turns the file's RTT
    /// unit into ms; `pacing_scale` turns its pacing unit into bit/s.
    pub fn parse(
        data: &RawValue,
        time_scale: f64,
        pacing_scale: f64,
    ) -> serde_json::Result<Metrics> {
        let mut de = serde_json::Deserializer::from_str(data.get());
        let mut m = de.deserialize_map(MetricsVisitor)?;
        for v in [
            &mut m.min_rtt_ms,
            &mut m.smoothed_rtt_ms,
            &mut m.latest_rtt_ms,
            &mut m.rtt_variance_ms,
        ] {
            if let Some(x) = v.as_mut() {
                *x *= time_scale;
            }
        }
        if let Some(p) = m.pacing_rate_bps.as_mut() {
            *p *= pacing_scale;
        }
        for v in [&mut m.ssthresh, &mut m.cwnd, &mut m.pacing_rate_bps] {
            if v.is_some_and(|x| x >= SENTINEL || !x.is_finite()) {
                *v = None;
            }
        }
        Ok(m)
    }
}

struct MetricsVisitor;

impl<'de> Visitor<'de> for MetricsVisitor {
    type Value = Metrics;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a metrics_updated data object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Metrics, A::Error> {
        let mut m = Metrics::default();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            let slot = match key.as_ref() {
                "cwnd" | "congestion_window" => &mut m.cwnd,
                "bytes_in_flight" => &mut m.bytes_in_flight,
                "ssthresh" => &mut m.ssthresh,
                "pacing_rate" => &mut m.pacing_rate_bps,
                "min_rtt" => &mut m.min_rtt_ms,
                "smoothed_rtt" => &mut m.smoothed_rtt_ms,
                "latest_rtt" => &mut m.latest_rtt_ms,
                "rtt_variance" => &mut m.rtt_variance_ms,
                "pto_count" => &mut m.pto_count,
                "cf_lost_packets" | "lost_packets" => {
                    m.lost_packets_total = Some(map.next_value::<Total>()?.0);
                    continue;
                }
                "cf_lost_bytes" | "lost_bytes" => {
                    m.lost_bytes_total = Some(map.next_value::<Total>()?.0);
                    continue;
                }
                _ => {
                    // A plugin's metric, if it is a number.
                    let v: serde_json::Value = map.next_value()?;
                    if let Some(x) = v.as_f64() {
                        m.extra.push((key.into_owned(), x));
                    }
                    continue;
                }
            };
            *slot = Some(map.next_value::<Num>()?.0);
        }
        Ok(m)
    }
}

/// Packet number spaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Space {
    /// Initial packets.
    Initial,
    /// Handshake packets.
    Handshake,
    /// 0-RTT and 1-RTT packets (one space).
    #[default]
    App,
}

impl Space {
    fn of(packet_type: &str) -> Space {
        match packet_type.to_ascii_lowercase().as_str() {
            "initial" => Space::Initial,
            "handshake" => Space::Handshake,
            _ => Space::App,
        }
    }
}

#[derive(Deserialize)]
struct RawInfo {
    length: Option<Num>,
    payload_length: Option<Num>,
}

#[derive(Deserialize)]
struct Header<'a> {
    #[serde(borrow)]
    packet_type: Option<Cow<'a, str>>,
    packet_number: Option<Num>,
    packet_size: Option<Num>,
}

#[derive(Deserialize)]
struct Frame<'a> {
    #[serde(borrow)]
    frame_type: Option<Cow<'a, str>>,
    stream_id: Option<Num>,
    offset: Option<Num>,
    length: Option<Num>,
    raw: Option<RawInfo>,
    acked_ranges: Option<Vec<Vec<Num>>>,
}

#[derive(Deserialize)]
struct PacketData<'a> {
    #[serde(borrow)]
    header: Option<Header<'a>>,
    raw: Option<RawInfo>,
    #[serde(borrow)]
    frames: Option<Vec<Frame<'a>>>,
    #[serde(borrow)]
    packet_type: Option<Cow<'a, str>>,
    packet_number: Option<Num>,
    packet_size: Option<Num>,
    size: Option<Num>,
}

/// A stream frame's range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamRange {
    /// Stream id.
    pub stream: u64,
    /// First byte.
    pub offset: u64,
    /// Bytes.
    pub len: u64,
}

/// What a packet event says.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Packet {
    /// Number space.
    pub space: Space,
    /// Packet number, when logged.
    pub number: Option<u64>,
    /// Size on the wire, when logged.
    pub size: Option<u64>,
    /// Stream frames.
    pub streams: Vec<StreamRange>,
    /// ACK ranges (inclusive), from ACK frames.
    pub acked: Vec<(u64, u64)>,
    /// Carries a frame other than ACK, PADDING or CONNECTION_CLOSE (or its
    /// frames were not logged).
    pub ack_eliciting: bool,
}

impl Packet {
    /// Parses a packet_sent/received/lost event's data.
    pub fn parse(data: &RawValue) -> serde_json::Result<Packet> {
        let d: PacketData = serde_json::from_str(data.get())?;
        let mut p = Packet::default();
        let ptype = d
            .header
            .as_ref()
            .and_then(|h| h.packet_type.as_deref())
            .or(d.packet_type.as_deref());
        p.space = ptype.map(Space::of).unwrap_or_default();
        p.number = d
            .header
            .as_ref()
            .and_then(|h| h.packet_number)
            .or(d.packet_number)
            .filter(|n| n.0 >= 0.0)
            .map(|n| n.0 as u64);
        p.size = d
            .raw
            .as_ref()
            .and_then(|r| r.length)
            .or(d.header.as_ref().and_then(|h| h.packet_size))
            .or(d.packet_size)
            .or(d.size)
            .filter(|n| n.0 >= 0.0)
            .map(|n| n.0 as u64);
        let frames = d.frames.unwrap_or_default();
        p.ack_eliciting = frames.is_empty()
            || frames.iter().any(|f| {
                !matches!(
                    f.frame_type.as_deref(),
                    Some("ack" | "padding" | "connection_close")
                )
            });
        for f in frames {
            match f.frame_type.as_deref() {
                Some("stream") => {
                    let len = f
                        .length
                        .or(f.raw.as_ref().and_then(|r| r.payload_length))
                        .map_or(0.0, |n| n.0);
                    p.streams.push(StreamRange {
                        stream: f.stream_id.map_or(0.0, |n| n.0) as u64,
                        offset: f.offset.map_or(0.0, |n| n.0) as u64,
                        len: len.max(0.0) as u64,
                    });
                }
                Some("ack") => {
                    for r in f.acked_ranges.unwrap_or_default() {
                        match r.as_slice() {
                            [a] => p.acked.push((a.0 as u64, a.0 as u64)),
                            [a, b, ..] => p.acked.push((a.0.min(b.0) as u64, a.0.max(b.0) as u64)),
                            [] => {}
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(p)
    }
}

#[derive(Deserialize)]
struct StateData<'a> {
    #[serde(borrow, rename = "new")]
    new_state: Option<Cow<'a, str>>,
}

/// Parses a congestion_state_updated event's new state.
pub fn parse_state(data: &RawValue) -> serde_json::Result<Option<String>> {
    let d: StateData = serde_json::from_str(data.get())?;
    Ok(d.new_state.map(Cow::into_owned))
}

#[derive(Deserialize)]
struct MovedData<'a> {
    #[serde(borrow)]
    to: Option<Cow<'a, str>>,
    length: Option<Num>,
    raw: Option<RawInfo>,
}

/// Parses a data_moved event: (to the application?, bytes).
pub fn parse_moved(data: &RawValue) -> serde_json::Result<(bool, u64)> {
    let d: MovedData = serde_json::from_str(data.get())?;
    let bytes = d
        .length
        .or(d.raw.as_ref().and_then(|r| r.length))
        .map_or(0.0, |n| n.0)
        .max(0.0) as u64;
    Ok((d.to.as_deref() == Some("application"), bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_string()).unwrap()
    }

    #[test]
    fn names() {
        assert_eq!(Kind::of("quic:recovery_metrics_updated"), Kind::Metrics);
        assert_eq!(Kind::of("recovery:metrics_updated"), Kind::Metrics);
        assert_eq!(Kind::of("transport:packet_sent"), Kind::PacketSent);
        assert_eq!(Kind::of("quic:packet_lost"), Kind::PacketLost);
        assert_eq!(Kind::of("http:data_moved"), Kind::Other);
        assert_eq!(Kind::of("quic:stream_data_moved"), Kind::DataMoved);
        assert_eq!(Kind::of("metrics_updated"), Kind::Metrics);
        assert_eq!(Kind::of("simulation:scenario"), Kind::Scenario);
        assert_eq!(Kind::of("simulation:marker"), Kind::Marker);
        assert_eq!(Kind::of("marker"), Kind::Other);
        assert_eq!(Kind::of("simulation:packet_sent"), Kind::Other);
    }

    #[test]
    fn quiche_metrics() {
        let m = Metrics::parse(
            &raw(r#"{"cf_app_limited":false,"cf_lost_bytes":{"total":10,"delta":0},"cf_lost_packets":{"total":2,"delta":1},"min_rtt":33.0,"smoothed_rtt":40.5,"rtt_variance":6.5,"pto_count":0,"congestion_window":13500,"ssthresh":18446744073709551615,"pacing_rate":1000000,"vegas_diff":3.5}"#),
            1.0,
            8.0,
        )
        .unwrap();
        assert_eq!(m.cwnd, Some(13500.0));
        assert_eq!(m.ssthresh, None);
        assert_eq!(m.pacing_rate_bps, Some(8e6));
        assert_eq!(
            (m.lost_packets_total, m.lost_bytes_total),
            (Some(2.0), Some(10.0))
        );
        assert_eq!(m.smoothed_rtt_ms, Some(40.5));
        assert_eq!(m.extra, vec![("vegas_diff".to_string(), 3.5)]);
    }

    #[test]
    fn draft_metrics_in_microseconds_and_strings() {
        let m = Metrics::parse(
            &raw(r#"{"cwnd": "15360","smoothed_rtt": 21117,"pacing_rate": 7268505}"#),
            0.001,
            1.0,
        )
        .unwrap();
        assert_eq!(m.cwnd, Some(15360.0));
        assert!((m.smoothed_rtt_ms.unwrap() - 21.117).abs() < 1e-9);
        assert_eq!(m.pacing_rate_bps, Some(7268505.0));
    }

    #[test]
    fn packets() {
        let p = Packet::parse(&raw(r#"{"header":{"packet_type":"1RTT","packet_number":7},"raw":{"length":1200},"frames":[{"frame_type":"stream","stream_id":0,"offset":100,"length":1100},{"frame_type":"ack","acked_ranges":[[1,3],[5,5]]}]}"#)).unwrap();
        assert_eq!(
            (p.space, p.number, p.size),
            (Space::App, Some(7), Some(1200))
        );
        assert_eq!(
            p.streams,
            vec![StreamRange {
                stream: 0,
                offset: 100,
                len: 1100
            }]
        );
        assert_eq!(p.acked, vec![(1, 3), (5, 5)]);
        // draft-01: strings and header.packet_size.
        let q = Packet::parse(&raw(r#"{"packet_type":"initial","header":{"packet_number":"0","packet_size":1280},"frames":[{"frame_type":"ack","acked_ranges":[["0","2"]]}]}"#)).unwrap();
        assert_eq!(
            (q.space, q.number, q.size),
            (Space::Initial, Some(0), Some(1280))
        );
        assert_eq!(q.acked, vec![(0, 2)]);
    }
}
