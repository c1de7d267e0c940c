//! Cost of one ACK event and one loss event for each plugin.

use std::time::{Duration, Instant};

use cc_algorithms::{algorithms, Controller, Origin};
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use quiche::cc::*;

fn config() -> ControllerConfig {
    ControllerConfig {
        max_datagram_size: 1200,
        initial_congestion_window_packets: 10,
        initial_rtt: Duration::from_millis(100),
    }
}

fn bench(c: &mut Criterion) {
    for info in algorithms().filter(|a| a.origin == Origin::Plugin) {
        let Controller::Plugin(factory) = cc_algorithms::parse(&info.example_spec()).unwrap()
        else {
            unreachable!()
        };
        let mut cc = factory.build(&config());
        let t0 = Instant::now();
        let mut now = t0;
        let mut pn = 0u64;
        // One ACK acknowledging two packets (delayed-ACK ratio of 2), with
        // a fresh RTT sample, after sending two more: the steady state.
        c.bench_function(&format!("{}/ack", info.name), |b| {
            b.iter(|| {
                now += Duration::from_micros(100);
                for _ in 0..2 {
                    let p = SentPacket {
                        space: PacketSpace::Application,
                        pkt_num: pn,
                        size: 1200,
                        bytes_in_flight: 24_000,
                        app_limited: false,
                    };
                    cc.on_packet_sent(&p, now);
                    pn += 1;
                }
                let acked = [
                    AckedPacket {
                        pkt_num: pn - 2,
                        size: 1200,
                        time_sent: now - Duration::from_millis(40),
                    },
                    AckedPacket {
                        pkt_num: pn - 1,
                        size: 1200,
                        time_sent: now - Duration::from_millis(40),
                    },
                ];
                let rtt = Duration::from_millis(40 + (pn % 7));
                let ack = AckEvent {
                    space: PacketSpace::Application,
                    acked: &acked,
                    acked_bytes: 2400,
                    rtt_sample: Some(rtt),
                    rtt: RttEstimates {
                        latest_rtt: rtt,
                        min_rtt: Some(Duration::from_millis(40)),
                        smoothed_rtt: rtt,
                        rttvar: Duration::from_millis(2),
                    },
                    bytes_in_flight_before: 26_400,
                    bytes_in_flight_after: 24_000,
                    app_limited: false,
                    delivery_rate: 2_500_000,
                    delivery_rate_app_limited: false,
                    recovery_start_time: None,
                };
                cc.on_ack(black_box(&ack), now);
                black_box(cc.congestion_window())
            })
        });
        c.bench_function(&format!("{}/loss", info.name), |b| {
            b.iter(|| {
                now += Duration::from_micros(100);
                let ev = LossEvent {
                    space: PacketSpace::Application,
                    lost_bytes: 1200,
                    lost_packets: 1,
                    largest_lost_pkt_num: pn,
                    largest_lost_time_sent: now - Duration::from_millis(50),
                    new_recovery_period: true,
                    bytes_in_flight: 24_000,
                    rtt: RttEstimates {
                        latest_rtt: Duration::from_millis(45),
                        min_rtt: Some(Duration::from_millis(40)),
                        smoothed_rtt: Duration::from_millis(45),
                        rttvar: Duration::from_millis(2),
                    },
                };
                cc.on_congestion_event(black_box(&ev), now);
                black_box(cc.congestion_window())
            })
        });
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
