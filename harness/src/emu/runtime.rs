//! [`Emulator`]: the relay ([`super::relay`]) or IP mode
//! ([`super::tunnel`]) on a thread of its own.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;

use super::config::{EmuConfig, EmuError, EmuReport, Snapshot};

/// A running emulator. Dropping it stops it.
pub struct Emulator {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<EmuReport, EmuError>>>,
    listen: Vec<SocketAddr>,
    snapshot: Arc<Mutex<Snapshot>>,
}

impl Emulator {
    /// Binds the routes' sockets and starts the emulator thread.
    pub fn start(cfg: EmuConfig) -> Result<Emulator, EmuError> {
        if cfg.routes.is_empty() {
            return Err(EmuError::NoRoutes);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let snapshot = Arc::new(Mutex::new(Snapshot::default()));
        let (tx, rx) = mpsc::channel();
        let (stop2, snap2) = (stop.clone(), snapshot.clone());
        let thread = std::thread::Builder::new()
            .name("cclab-emu".into())
            .spawn(move || super::relay::run(cfg, stop2, snap2, tx))?;
        match rx.recv() {
            Ok(Ok(listen)) => Ok(Emulator {
                stop,
                thread: Some(thread),
                listen,
                snapshot,
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(thread
                .join()
                .map_err(|_| EmuError::Panicked)
                .and_then(|r| r.map(|_| ()))
                .err()
                .unwrap_or(EmuError::Panicked)),
        }
    }

    /// Starts IP mode on `net`'s TUN devices (which it takes; `cfg.routes`
    /// is not used): route `i` is server address
    /// [`super::tun::server_ip`]`(i)`, for the `net.routes` routes.
    pub fn start_ip(cfg: EmuConfig, net: &mut super::tun::TunNet) -> Result<Emulator, EmuError> {
        let fds = net.take_fds().ok_or_else(|| {
            EmuError::IpUnavailable("the TUN devices are already in use by an emulator".into())
        })?;
        let ports = super::tunnel::Ports {
            fds,
            routes: net.routes,
            client_ns: net.client_ns.clone(),
            server_ns: net.server_ns.clone(),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let snapshot = Arc::new(Mutex::new(Snapshot::default()));
        let (tx, rx) = mpsc::channel();
        let (stop2, snap2) = (stop.clone(), snapshot.clone());
        let thread = std::thread::Builder::new()
            .name("cclab-emu-ip".into())
            .spawn(move || super::tunnel::run(cfg, ports, stop2, snap2, tx))?;
        match rx.recv() {
            Ok(Ok(())) => Ok(Emulator {
                stop,
                thread: Some(thread),
                listen: Vec::new(),
                snapshot,
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(thread
                .join()
                .map_err(|_| EmuError::Panicked)
                .and_then(|r| r.map(|_| ()))
                .err()
                .unwrap_or(EmuError::Panicked)),
        }
    }

    /// The bound listening address of each route, in order (none in IP
    /// mode, where clients send to the servers' own addresses).
    pub fn listen_addrs(&self) -> &[SocketAddr] {
        &self.listen
    }

    /// The counters as of the last sample.
    pub fn snapshot(&self) -> Snapshot {
        self.snapshot.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Stops the thread and returns what it did.
    pub fn stop(mut self) -> Result<EmuReport, EmuError> {
        self.stop.store(true, Ordering::SeqCst);
        let t = self.thread.take().expect("stopped twice");
        t.join().map_err(|_| EmuError::Panicked)?
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
