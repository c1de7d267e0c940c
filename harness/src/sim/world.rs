//! The whole simulated network: the link's two directions, the packets
//! waiting for their pacing time to enter it, the flows and the cross
//! traffic; and how endpoints' packets get onto the link.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use quic_app::{Next, QlogLevel};

use super::cross::CrossSource;
use super::flow::Flow;
use super::SimConfig;
use crate::emu::packet::Ecn;
use crate::emu::rng::Rng;
use crate::emu::Packet;
use crate::link::Dir;
use link_model::topology::{LinkSinks, Network, Topology};

/// A packet waiting for its pacing time to enter the link.
pub(super) struct Pending {
    pub(super) at: u64,
    seq: u64,
    pub(super) dir: Dir,
    pub(super) pkt: Packet,
}

impl PartialEq for Pending {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// Datagram buffers, reused so the per-packet path does not allocate.
pub(super) struct Buffers {
    /// Where quiche writes each packet.
    scratch: Vec<u8>,
    /// Spent datagram buffers.
    pub(super) pool: Vec<Vec<u8>>,
    /// Packets built by the last [`drain`], with their link-entry times.
    ready: Vec<Ready>,
}

/// A datagram [`drain`] built: when quiche wants it to leave (ns since
/// `base`), its bytes, and the ECN codepoint quiche chose for it.
type Ready = (u64, Vec<u8>, Ecn);

/// Builds every packet `conn` may send at `now` (pacing exactly: no
/// slack) into `bufs.ready`, each with the time quiche wants it to leave
/// (`send_info.at`, ns since `base`); returns when pacing releases the
/// next one.
fn drain(
    conn: &mut quiche::Connection,
    now: Instant,
    base: Instant,
    bufs: &mut Buffers,
) -> Option<Instant> {
    loop {
        match quic_app::next_packet(conn, &mut bufs.scratch, now, Duration::ZERO) {
            Next::Packet(n, info) => {
                #[cfg(test)]
                super::tests::saw_datagram(&bufs.scratch[..n]);
                let mut v = bufs.pool.pop().unwrap_or_default();
                v.clear();
                v.extend_from_slice(&bufs.scratch[..n]);
                let at = info.at.saturating_duration_since(base).as_nanos() as u64;
                bufs.ready.push((at, v, Ecn::from_bits(info.ecn.bits())));
            }
            Next::Wait(t) => return Some(t),
            Next::Idle => return None,
        }
    }
}

/// The whole simulated network.
pub(super) struct World {
    base: Instant,
    /// Every link and the route each flow and cross source takes.
    pub(super) net: Network,
    pub(super) pending: BinaryHeap<Reverse<Pending>>,
    seq: u64,
    pub(super) flows: Vec<Flow>,
    pub(super) cross: Vec<CrossSource>,
    pub(super) qlog_level: QlogLevel,
    pub(super) scenario_event: serde_json::Value,
    pub(super) bufs: Buffers,
    pub(super) datagrams: u64,
    pub(super) cid_rng: Rng,
    /// How late timers wake an endpoint (the scenario's `[host]`).
    timer_slack_ns: u64,
    /// How long after a datagram arrives its host reads it, with every
    /// other that arrived meanwhile (the scenario's `[host]`).
    pub(super) wake_latency_ns: u64,
}

impl World {
    /// The network of one repetition, nothing yet sent: the links of
    /// `topo` (seeded for this repetition), `flows` with their servers
    /// listening, and the scenario's cross traffic.
    pub(super) fn new(
        cfg: &SimConfig,
        topo: &Topology,
        base: Instant,
        flows: Vec<Flow>,
        scenario_event: serde_json::Value,
    ) -> World {
        let sc = cfg.scenario;
        World {
            base,
            net: Network::new(topo, &sc.routes(), 1500, &sc.class_weights()),
            pending: BinaryHeap::new(),
            seq: 0,
            flows,
            cross: super::cross::sources(sc, cfg.seed),
            qlog_level: cfg.qlog_level,
            scenario_event,
            bufs: Buffers {
                scratch: vec![0u8; 65_536],
                pool: Vec::new(),
                ready: Vec::new(),
            },
            datagrams: 0,
            cid_rng: Rng::new(cfg.seed, 0x5e_0002),
            timer_slack_ns: sc.host.timer_slack_ns,
            wake_latency_ns: sc.host.wake_latency_ns,
        }
    }

    /// Virtual time `t` (ns) as an `Instant`.
    pub(super) fn at(&self, t: u64) -> Instant {
        self.base + Duration::from_nanos(t)
    }

    fn ns(&self, i: Instant) -> u64 {
        i.saturating_duration_since(self.base).as_nanos() as u64
    }

    /// When an endpoint's timers or pacing next need it, ns.
    fn wake_of(&self, times: impl IntoIterator<Item = Option<Instant>>) -> u64 {
        times
            .into_iter()
            .flatten()
            .map(|t| self.ns(t))
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Recomputes when flow `i`'s client and server next need to run.
    pub(super) fn update_wakes(&mut self, i: usize) {
        let f = &self.flows[i];
        let c = f
            .client
            .as_ref()
            .map_or(u64::MAX, |c| self.wake_of([c.timeout(), f.client_pace]));
        let s = self.wake_of([f.server.timeout()]);
        // A timer wakes its host `timer_slack_ns` late (arrivals wake it at
        // once: they are handled through `*_touched`).
        let late = |t: u64| t.saturating_add(self.timer_slack_ns);
        let f = &mut self.flows[i];
        f.client_wake = late(c);
        f.server_wake = late(s);
    }

    /// Puts a datagram on the link at `at` (its pacing time), or now.
    fn emit(
        &mut self,
        now: u64,
        dir: Dir,
        flow: usize,
        (at, data, ecn): Ready,
        log: &mut dyn LinkSinks,
    ) {
        self.datagrams += 1;
        let pkt = Packet {
            data,
            flow: flow as u16,
            class: flow as u16,
            arrival_ns: at.max(now),
            hop: 0,
            // The codepoint quiche chose for the datagram (SendInfo::ecn).
            ecn,
        };
        if at <= now {
            self.net.push(dir, pkt, now, log);
        } else {
            self.seq += 1;
            self.pending.push(Reverse(Pending {
                at,
                seq: self.seq,
                dir,
                pkt,
            }));
        }
    }

    /// Sends what flow `i`'s client has ready.
    pub(super) fn flush_client(&mut self, i: usize, now: u64, log: &mut dyn LinkSinks) {
        let now_i = self.at(now);
        if let Some(c) = self.flows[i].client.as_mut() {
            let pace = drain(c.conn_mut(), now_i, self.base, &mut self.bufs);
            self.flows[i].client_pace = pace;
        }
        self.emit_ready(now, Dir::Up, i, log);
    }

    /// Sends what flow `i`'s server has ready.
    pub(super) fn flush_server(&mut self, i: usize, now: u64, log: &mut dyn LinkSinks) {
        let now_i = self.at(now);
        for peer in self.flows[i].server.peers_mut() {
            peer.pace_until = drain(&mut peer.conn, now_i, self.base, &mut self.bufs);
        }
        self.emit_ready(now, Dir::Down, i, log);
    }

    /// Puts the datagrams [`drain`] built onto direction `dir` of the link.
    fn emit_ready(&mut self, now: u64, dir: Dir, flow: usize, log: &mut dyn LinkSinks) {
        let mut ready = std::mem::take(&mut self.bufs.ready);
        for r in ready.drain(..) {
            self.emit(now, dir, flow, r, log);
        }
        self.bufs.ready = ready;
    }

    /// A `simulation:marker` in the qlog of every open connection, both
    /// ends.
    pub(super) fn marker(&mut self, data: serde_json::Value, now: Instant) {
        for f in &mut self.flows {
            if let Some(c) = f.client.as_mut() {
                quic_app::qlog_event(c.conn_mut(), "simulation:marker", data.clone(), now);
            }
            for p in f.server.peers_mut() {
                quic_app::qlog_event(&mut p.conn, "simulation:marker", data.clone(), now);
            }
        }
    }
}
