//! Topologies (to come).
