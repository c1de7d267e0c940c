//! The simulated endpoints at work: each flow's client started at its
//! offset, and every client and server ([`super::flow`]) run when
//! something arrives for it or its timers are due.

use std::path::PathBuf;

use quic_app::client::{ClientApp, Report};

use super::flow::client_settings;
use super::world::World;
use super::{tls, SimError};
use crate::scenario;
use link_model::topology::LinkSinks;

impl World {
    /// Starts the clients whose time has come.
    pub(super) fn start_due_flows(&mut self, now: u64) -> Result<(), SimError> {
        for i in 0..self.flows.len() {
            if !self.flows[i].started && self.flows[i].spec.start_ns <= now {
                self.start_flow(i, now)?;
                self.flows[i].client_touched = true;
            }
        }
        Ok(())
    }

    /// A quiche client configuration for flow `i`: the flow's algorithm
    /// when the client sends (uploads), and its MTU.
    fn client_config(&self, i: usize) -> Result<quiche::Config, SimError> {
        let spec = &self.flows[i].spec;
        let mut config = tls::client_config().map_err(SimError::Setup)?;
        spec.transport.apply(&mut config);
        if spec.direction == scenario::Direction::Upload {
            let cc = cc_algorithms::parse(&spec.cc).map_err(|e| SimError::Cc {
                flow: i,
                msg: e.to_string(),
            })?;
            cc.apply(&mut config);
        }
        if let Some(mtu) = spec.mtu {
            quic_app::set_mtu(&mut config, mtu as usize)
                .map_err(|e| SimError::Setup(format!("mtu: {e}")))?;
        }
        Ok(config)
    }

    fn start_flow(&mut self, i: usize, now: u64) -> Result<(), SimError> {
        let now_i = self.at(now);
        let mut config = self.client_config(i)?;
        let mut scid = [0u8; quiche::MAX_CONN_ID_LEN];
        for chunk in scid.chunks_mut(8) {
            let r = self.cid_rng.next_u64().to_be_bytes();
            chunk.copy_from_slice(&r[..chunk.len()]);
        }
        let f = &self.flows[i];
        let mut conn = quiche::connect(
            Some("cclab-sim"),
            &quiche::ConnectionId::from_ref(&scid),
            f.client_addr,
            f.server_addr,
            &mut config,
        )
        .map_err(|e| SimError::Setup(format!("connect: {e}")))?;
        let qlog = quic_app::qlog_to_file(
            &mut conn,
            &f.dir,
            "client",
            &scid,
            self.qlog_level,
            &[("simulation:scenario".into(), self.scenario_event.clone())],
            now_i,
        )?;
        let app = ClientApp::new(conn, client_settings(f), now_i)
            .map_err(|e| SimError::Setup(format!("HTTP/3: {e}")))?;
        self.marker(
            serde_json::json!({"type": "flow_start", "flow": i, "cc": f.spec.cc}),
            now_i,
        );
        let f = &mut self.flows[i];
        f.client = Some(app);
        f.client_qlog = qlog;
        f.started = true;
        Ok(())
    }

    /// Ends flow `i`'s client: its report goes to `client.json`.
    pub(super) fn finish_client(&mut self, i: usize, now: u64) -> Result<(), SimError> {
        let end = self.at(now);
        let f = &mut self.flows[i];
        if let Some(app) = f.client.take() {
            // The qlog's name, not its path: the report is part of the
            // run's deterministic output wherever the run is written.
            let qlog = f
                .client_qlog
                .take()
                .and_then(|p| p.file_name().map(PathBuf::from));
            let report: Report = app.report(end, qlog);
            crate::files::write_json_atomic(&f.dir.join("client.json"), &report)?;
        }
        f.finished = true;
        f.client_pace = None;
        Ok(())
    }

    /// Stops every client still running (past the deadline).
    pub(super) fn interrupt_clients(&mut self, now: u64) -> Result<(), SimError> {
        for i in 0..self.flows.len() {
            if let Some(c) = self.flows[i].client.as_mut() {
                c.interrupt();
                self.flows[i].killed = true;
                self.finish_client(i, now)?;
            }
        }
        Ok(())
    }

    /// Runs the endpoints that something arrived for or whose timers are
    /// due (timers, application, sending).
    pub(super) fn run_endpoints(
        &mut self,
        now: u64,
        log: &mut dyn LinkSinks,
    ) -> Result<(), SimError> {
        let now_i = self.at(now);
        for i in 0..self.flows.len() {
            let f = &mut self.flows[i];
            let client_due = f.client.is_some() && (f.client_touched || f.client_wake <= now);
            let server_due = f.server_touched || f.server_wake <= now;
            if !client_due && !server_due {
                continue;
            }
            f.client_touched = false;
            f.server_touched = false;
            if client_due {
                let c = self.flows[i].client.as_mut().unwrap();
                c.process(now_i);
                if c.is_closed() {
                    self.finish_client(i, now)?;
                } else {
                    self.flush_client(i, now, log);
                }
            }
            if server_due {
                self.flows[i].server.process(now_i);
                self.flush_server(i, now, log);
            }
            self.update_wakes(i);
        }
        Ok(())
    }
}
