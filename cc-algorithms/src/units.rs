//! Rates as users write them, with tc's units: the link model's own
//! parsing, so an algorithm parameter and a link rate read alike.

pub use link_model::link::units::{format_rate, parse_rate};
