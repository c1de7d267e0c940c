//! `getsockopt(TCP_INFO)` and its fields as JSON.

use std::mem::offset_of;
use std::os::fd::RawFd;

use serde_json::{json, Map, Value};

/// One reading of a socket's `TCP_INFO`: the struct and how many bytes of
/// it the kernel filled (an older kernel fills fewer; fields past that are
/// left out of the JSON).
#[derive(Clone, Copy)]
pub struct Info {
    raw: libc::tcp_info,
    len: usize,
}

/// Reads `TCP_INFO` of socket `fd`.
pub fn read(fd: RawFd) -> std::io::Result<Info> {
    // SAFETY: tcp_info is plain data; zero is a valid value of every field.
    let mut raw: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: a valid fd and a buffer of `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut raw as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(Info {
        raw,
        len: len as usize,
    })
}

/// `tcpi_snd_ssthresh` before the first reduction (`TCP_INFINITE_SSTHRESH`).
const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;
/// TCPI_OPT_TIMESTAMPS in `tcpi_options`.
const OPT_TIMESTAMPS: u8 = 1;

macro_rules! filled {
    ($self:ident, $field:ident) => {
        $self.len >= offset_of!(libc::tcp_info, $field) + std::mem::size_of_val(&$self.raw.$field)
    };
}

impl Info {
    /// Congestion window, segments (`tcpi_snd_cwnd`).
    pub fn cwnd(&self) -> u32 {
        self.raw.tcpi_snd_cwnd
    }

    /// Sender's segment size, bytes (`tcpi_snd_mss`).
    pub fn snd_mss(&self) -> u32 {
        self.raw.tcpi_snd_mss
    }

    /// Smoothed RTT, µs.
    pub fn srtt_us(&self) -> u32 {
        self.raw.tcpi_rtt
    }

    /// Segments retransmitted over the connection.
    pub fn total_retrans(&self) -> u32 {
        self.raw.tcpi_total_retrans
    }

    /// Payload bytes acknowledged by the peer (RFC 4898
    /// tcpEStatsAppHCThruOctetsAcked).
    pub fn bytes_acked(&self) -> u64 {
        self.raw.tcpi_bytes_acked
    }

    /// Payload bytes received in order (RFC 4898
    /// tcpEStatsAppHCThruOctetsReceived).
    pub fn bytes_received(&self) -> u64 {
        self.raw.tcpi_bytes_received
    }

    /// Bytes of IP and TCP header on each segment of this connection: 40,
    /// and 12 more with the timestamp option.
    pub fn header_bytes(&self) -> u32 {
        40 + if self.raw.tcpi_options & OPT_TIMESTAMPS != 0 {
            12
        } else {
            0
        }
    }

    /// `tcpi_delivery_rate_app_limited`: the bit after the window scales.
    fn app_limited(&self) -> bool {
        // SAFETY: byte 7 of the struct is the bitfield byte that follows
        // tcpi_snd_rcv_wscale (libc names no field for it; it is inside
        // the struct, before tcpi_rto at offset 8).
        let b = unsafe { *(&self.raw as *const libc::tcp_info as *const u8).add(7) };
        b & 1 != 0
    }

    /// Every field this crate records, as JSON; units in the names
    /// (`_us` µs, `_bps` bit/s; counts of segments, byte counts in
    /// bytes): `cwnd` (segments), `mss` (`snd_mss`), `ssthresh`
    /// (segments; null until the first reduction), `srtt_us`,
    /// `rttvar_us`, `min_rtt_us`, `rto_us`, `total_retrans`, `retrans`
    /// (retransmitted and unacknowledged now), `lost`, `unacked`,
    /// `sacked`, `bytes_sent`, `bytes_retrans`, `bytes_acked`,
    /// `bytes_received`, `segs_out`, `segs_in`, `data_segs_out`,
    /// `data_segs_in`, `delivery_rate_bps`, `pacing_rate_bps` (null when
    /// unset), `app_limited`, `ca_state` (0 open, 1 disorder, 2 CWR, 3
    /// recovery, 4 loss), `state`, `notsent_bytes`, `snd_wnd`,
    /// `busy_time_us`, `rwnd_limited_us`, `sndbuf_limited_us`,
    /// `delivered`, `dsack_dups`, `reord_seen`, `rcv_ooopack`,
    /// `header_bytes`.
    pub fn to_json(&self) -> Value {
        let r = &self.raw;
        let mut m = Map::new();
        let mut put = |k: &str, v: Value| {
            m.insert(k.to_string(), v);
        };
        put("state", r.tcpi_state.into());
        put("ca_state", r.tcpi_ca_state.into());
        put("cwnd", r.tcpi_snd_cwnd.into());
        put("mss", r.tcpi_snd_mss.into());
        put(
            "ssthresh",
            if r.tcpi_snd_ssthresh >= INFINITE_SSTHRESH {
                Value::Null
            } else {
                r.tcpi_snd_ssthresh.into()
            },
        );
        put("srtt_us", r.tcpi_rtt.into());
        put("rttvar_us", r.tcpi_rttvar.into());
        put("rto_us", r.tcpi_rto.into());
        put("unacked", r.tcpi_unacked.into());
        put("sacked", r.tcpi_sacked.into());
        put("lost", r.tcpi_lost.into());
        put("retrans", r.tcpi_retrans.into());
        put("total_retrans", r.tcpi_total_retrans.into());
        put("app_limited", self.app_limited().into());
        put("header_bytes", self.header_bytes().into());
        if filled!(self, tcpi_segs_in) {
            put(
                "pacing_rate_bps",
                if r.tcpi_pacing_rate == u64::MAX {
                    Value::Null
                } else {
                    r.tcpi_pacing_rate.saturating_mul(8).into()
                },
            );
            put("bytes_acked", r.tcpi_bytes_acked.into());
            put("bytes_received", r.tcpi_bytes_received.into());
            put("segs_out", r.tcpi_segs_out.into());
            put("segs_in", r.tcpi_segs_in.into());
        }
        if filled!(self, tcpi_data_segs_out) {
            put("notsent_bytes", r.tcpi_notsent_bytes.into());
            put(
                "min_rtt_us",
                if r.tcpi_min_rtt == u32::MAX {
                    Value::Null
                } else {
                    r.tcpi_min_rtt.into()
                },
            );
            put("data_segs_in", r.tcpi_data_segs_in.into());
            put("data_segs_out", r.tcpi_data_segs_out.into());
        }
        if filled!(self, tcpi_delivery_rate) {
            put(
                "delivery_rate_bps",
                r.tcpi_delivery_rate.saturating_mul(8).into(),
            );
        }
        if filled!(self, tcpi_sndbuf_limited) {
            put("busy_time_us", r.tcpi_busy_time.into());
            put("rwnd_limited_us", r.tcpi_rwnd_limited.into());
            put("sndbuf_limited_us", r.tcpi_sndbuf_limited.into());
        }
        if filled!(self, tcpi_delivered_ce) {
            put("delivered", r.tcpi_delivered.into());
        }
        if filled!(self, tcpi_bytes_retrans) {
            put("bytes_sent", r.tcpi_bytes_sent.into());
            put("bytes_retrans", r.tcpi_bytes_retrans.into());
        }
        if filled!(self, tcpi_reord_seen) {
            put("dsack_dups", r.tcpi_dsack_dups.into());
            put("reord_seen", r.tcpi_reord_seen.into());
        }
        if filled!(self, tcpi_snd_wnd) {
            put("rcv_ooopack", r.tcpi_rcv_ooopack.into());
            put("snd_wnd", r.tcpi_snd_wnd.into());
        }
        Value::Object(m)
    }

    /// A `sample` record at `t` s.
    pub fn sample(&self, t: f64) -> Value {
        let mut v = self.to_json();
        v["type"] = json!("sample");
        v["t"] = json!(round_us(t));
        v
    }
}

/// Seconds rounded to the microsecond (shorter lines, nothing lost).
pub fn round_us(t: f64) -> f64 {
    (t * 1e6).round() / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_struct_has_the_kernels_layout() {
        // Offsets from include/uapi/linux/tcp.h: eight bytes of u8 fields,
        // 24 u32 up to tcpi_total_retrans, then the u64 rates.
        assert_eq!(offset_of!(libc::tcp_info, tcpi_rto), 8);
        assert_eq!(offset_of!(libc::tcp_info, tcpi_snd_cwnd), 8 + 4 * 18);
        assert_eq!(offset_of!(libc::tcp_info, tcpi_total_retrans), 100);
        assert_eq!(offset_of!(libc::tcp_info, tcpi_pacing_rate), 104);
        assert_eq!(offset_of!(libc::tcp_info, tcpi_segs_in), 140);
        assert_eq!(offset_of!(libc::tcp_info, tcpi_delivery_rate), 160);
        assert_eq!(offset_of!(libc::tcp_info, tcpi_bytes_sent), 200);
        assert_eq!(offset_of!(libc::tcp_info, tcpi_snd_wnd), 228);
    }
}
