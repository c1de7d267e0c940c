// Intentionally empty: this crate exists only so cargo fetches quiche.
