//! The discrete-event loop: find the earliest thing due, set the clock
//! there, and do everything due then, in a fixed order (packets entering
//! the link, the link delivering, cross traffic, flow starts, endpoints,
//! bottleneck samples).

use std::sync::atomic::{AtomicBool, Ordering};

use super::world::World;
use super::SimError;
use crate::bottleneck::LinkLogs;
use crate::emu::pipeline::Sampler;
use crate::emu::Packet;
use crate::link::Dir;
use link_model::topology::LinkSinks;

/// Flows still running this long after the scenario's end are stopped,
/// as real runs stop their clients.
const DEADLINE_NS: u64 = 20_000_000_000;
/// How long servers may take, once every flow and cross source has ended,
/// to see their clients' close and finish their qlogs.
const DRAIN_NS: u64 = 3_000_000_000;

/// Where the loop ended.
pub(super) struct LoopEnd {
    /// Virtual ns at the end.
    pub(super) now: u64,
    /// Iterations (times the clock moved).
    pub(super) events: u64,
    /// When the last flow ended, if it did.
    pub(super) active_end: Option<u64>,
}

/// The earliest thing due, and whether the flows and the cross traffic
/// have all ended.
struct Due {
    next: u64,
    all_done: bool,
    cross_done: bool,
}

/// Runs `w` until every flow and cross source has ended and the servers
/// have drained, the deadline passes, or `stop` is set (an error).
/// `end_ns` is the scenario's end.
pub(super) fn run(
    w: &mut World,
    logs: &mut LinkLogs,
    samplers: &mut [Sampler],
    stop: &AtomicBool,
    end_ns: u64,
) -> Result<LoopEnd, SimError> {
    let mut e = LoopEnd {
        now: 0,
        events: 0,
        active_end: None,
    };
    let mut drain_until: Option<u64> = None;
    let mut out: Vec<(u64, Dir, Packet)> = Vec::new();
    // Steps taken at the current instant: a burst of arrivals and sends
    // takes a few thousand; millions mean nothing moves time forward.
    let mut same_instant = 0u64;
    loop {
        let due = w.next_due(samplers[0].next_due(), end_ns);
        if due.all_done && e.active_end.is_none() {
            e.active_end = Some(e.now);
        }
        if due.all_done && due.cross_done {
            let until = *drain_until.get_or_insert(e.now + DRAIN_NS);
            if w.flows.iter().all(|f| f.server.is_empty()) || due.next > until {
                break;
            }
        }
        if due.next == u64::MAX {
            break;
        }
        if due.next > end_ns + DEADLINE_NS {
            w.interrupt_clients(e.now)?;
            e.active_end.get_or_insert(e.now);
            break;
        }
        let next = due.next.max(e.now);
        same_instant = if next == e.now { same_instant + 1 } else { 0 };
        if same_instant > STUCK_STEPS {
            return Err(SimError::Stuck {
                at_ms: e.now as f64 / 1e6,
                steps: same_instant,
                what: w.due_at(e.now),
            });
        }
        e.now = next;
        e.events += 1;
        if e.events.is_multiple_of(4096) && stop.load(Ordering::Relaxed) {
            return Err(SimError::Interrupted);
        }
        step(w, logs, samplers, &mut out, e.now, end_ns)?;
    }
    Ok(e)
}

/// Steps at one instant after which the loop gives up (see
/// [`SimError::Stuck`]).
const STUCK_STEPS: u64 = 1_000_000;

/// Everything due at `now`.
fn step(
    w: &mut World,
    logs: &mut LinkLogs,
    samplers: &mut [Sampler],
    out: &mut Vec<(u64, Dir, Packet)>,
    now: u64,
    end_ns: u64,
) -> Result<(), SimError> {
    quiche::sim::set_time(w.at(now));
    w.enter_link(now, logs);
    w.deliver(now, logs, out);
    w.send_cross(now, end_ns, logs);
    w.start_due_flows(now)?;
    w.read_inboxes(now);
    w.run_endpoints(now, logs)?;
    for (i, sampler) in samplers.iter_mut().enumerate() {
        if now >= sampler.next_due() {
            for s in sampler.take(now, &w.net.links[i].dirs) {
                logs.sample(i, &s)?;
            }
        }
    }
    Ok(())
}

impl World {
    /// What is due at `now`, in words (for [`SimError::Stuck`]).
    fn due_at(&self, now: u64) -> String {
        let mut v = Vec::new();
        for (i, f) in self.flows.iter().enumerate() {
            if f.client.is_some() && f.client_wake <= now {
                v.push(format!("flow {i}'s client timer"));
            }
            if f.server_wake <= now {
                v.push(format!("flow {i}'s server timer"));
            }
        }
        if self.pending.peek().is_some_and(|p| p.0.at <= now) {
            v.push("a packet entering the link".into());
        }
        if self.net.next_event().is_some_and(|t| t <= now) {
            v.push("a link event".into());
        }
        if v.is_empty() {
            "a cross source or a sample".into()
        } else {
            v.join(", ")
        }
    }

    /// The earliest of: a packet entering the link, the link's next
    /// departure or delivery, a bottleneck sample (`sample_due`), a flow
    /// start, an endpoint's timer or pacing release, a cross datagram.
    fn next_due(&self, sample_due: u64, end_ns: u64) -> Due {
        let mut next = u64::MAX;
        let mut consider = |t: Option<u64>| {
            if let Some(t) = t {
                next = next.min(t);
            }
        };
        consider(self.pending.peek().map(|p| p.0.at));
        consider(self.net.next_event());
        consider(Some(sample_due));
        let mut all_done = true;
        for f in &self.flows {
            if !f.started {
                consider(Some(f.spec.start_ns));
            }
            consider(Some(f.client_wake.min(f.server_wake)));
            consider(Some(f.client_rx.min(f.server_rx)));
            all_done &= f.finished;
        }
        let mut cross_done = true;
        for c in &self.cross {
            let t = c.next(end_ns);
            cross_done &= t.is_none();
            consider(t);
        }
        Due {
            next,
            all_done,
            cross_done,
        }
    }

    /// Packets whose pacing time has come enter the link.
    fn enter_link(&mut self, now: u64, log: &mut dyn LinkSinks) {
        while self.pending.peek().is_some_and(|p| p.0.at <= now) {
            let p = self.pending.pop().unwrap().0;
            self.net.push(p.dir, p.pkt, now, log);
        }
    }

    /// The link delivers what is due, to the endpoints or (cross traffic)
    /// the sources' counters.
    fn deliver(&mut self, now: u64, log: &mut dyn LinkSinks, out: &mut Vec<(u64, Dir, Packet)>) {
        self.net.advance(now, log, out);
        for (_, d, pkt) in out.drain(..) {
            self.receive(d, pkt, now);
        }
    }

    /// One delivered packet: read at once, or with a `[host]
    /// wake_latency`, put in its host's inbox until the host wakes.
    fn receive(&mut self, d: Dir, pkt: Packet, now: u64) {
        let i = pkt.flow as usize;
        let nflows = self.flows.len();
        if i >= nflows {
            if let Some(c) = self.cross.get_mut(i - nflows) {
                c.received += pkt.len() as u64;
            }
            self.bufs.pool.push(pkt.data);
            return;
        }
        if self.wake_latency_ns > 0 {
            let wake = now.saturating_add(self.wake_latency_ns);
            let f = &mut self.flows[i];
            let (inbox, rx) = match d {
                Dir::Up => (&mut f.server_inbox, &mut f.server_rx),
                Dir::Down => (&mut f.client_inbox, &mut f.client_rx),
            };
            if inbox.is_empty() {
                *rx = wake;
            }
            inbox.push(pkt);
            return;
        }
        self.read(d, pkt, now);
    }

    /// Hosts whose wake-up after an arrival has come, or whose timer wakes
    /// them now, read every datagram waiting for them, oldest first.
    pub(super) fn read_inboxes(&mut self, now: u64) {
        // Without a wake latency nothing waits in an inbox (`receive`
        // reads at once): no walk over the flows on every step.
        if self.wake_latency_ns == 0 {
            return;
        }
        for i in 0..self.flows.len() {
            let f = &mut self.flows[i];
            let server = !f.server_inbox.is_empty() && (f.server_rx <= now || f.server_wake <= now);
            let client = !f.client_inbox.is_empty() && (f.client_rx <= now || f.client_wake <= now);
            if server {
                let inbox = std::mem::take(&mut self.flows[i].server_inbox);
                self.read_all(Dir::Up, inbox, now);
                self.flows[i].server_rx = u64::MAX;
            }
            if client {
                let inbox = std::mem::take(&mut self.flows[i].client_inbox);
                self.read_all(Dir::Down, inbox, now);
                self.flows[i].client_rx = u64::MAX;
            }
        }
    }

    /// Reads `inbox` in order, then gives its (empty) vector back to its
    /// flow, so that inboxes allocate once.
    fn read_all(&mut self, d: Dir, mut inbox: Vec<Packet>, now: u64) {
        let Some(first) = inbox.first() else {
            return;
        };
        let i = first.flow as usize;
        for pkt in inbox.drain(..) {
            self.read(d, pkt, now);
        }
        match d {
            Dir::Up => self.flows[i].server_inbox = inbox,
            Dir::Down => self.flows[i].client_inbox = inbox,
        }
    }

    /// The host of `pkt` reads it now.
    fn read(&mut self, d: Dir, mut pkt: Packet, now: u64) {
        let i = pkt.flow as usize;
        let now_i = self.at(now);
        let f = &mut self.flows[i];
        let ecn = quiche::Ecn::from_tos(pkt.ecn.bits());
        match d {
            Dir::Up => {
                f.server
                    .recv(&mut pkt.data, f.client_addr, f.server_addr, ecn, now_i);
                f.server_touched = true;
            }
            Dir::Down => {
                if let Some(c) = f.client.as_mut() {
                    c.recv(
                        &mut pkt.data,
                        quiche::RecvInfo {
                            from: f.server_addr,
                            to: f.client_addr,
                        },
                        ecn,
                    );
                    f.client_touched = true;
                }
            }
        }
        self.bufs.pool.push(pkt.data);
    }
}

impl World {
    /// Sends every cross datagram due by `now` (`end_ns`: the scenario's
    /// end), with a marker in every qlog where a source turns on or off.
    fn send_cross(&mut self, now: u64, end_ns: u64, log: &mut dyn LinkSinks) {
        let nflows = self.flows.len();
        for j in 0..self.cross.len() {
            while let Some(due) = self.cross[j].take_due(now, end_ns) {
                if due.turned {
                    let marker = serde_json::json!({
                        "type": if due.on { "cross_on" } else { "cross_off" },
                        "source": j,
                        "rate_bps": self.cross[j].rate_bps(),
                    });
                    let now_i = self.at(now);
                    self.marker(marker, now_i);
                }
                if due.on {
                    self.cross_datagram(j, nflows + j, now, log);
                }
            }
        }
    }

    /// One datagram of source `j` (traffic class `class`) onto the link.
    fn cross_datagram(&mut self, j: usize, class: usize, now: u64, log: &mut dyn LinkSinks) {
        let c = &self.cross[j];
        let (size, d) = (c.packet_size(), c.dir());
        let mut data = self.bufs.pool.pop().unwrap_or_default();
        data.clear();
        data.resize(size, 0);
        let pkt = Packet {
            data,
            flow: class as u16,
            class: class as u16,
            arrival_ns: now,
            hop: 0,
            // Not-ECT until the endpoints pass their codepoint.
            ecn: Default::default(),
        };
        self.net.push(d, pkt, now, log);
    }
}
