//! The model seat: a teammate driven by a model server the tests start on
//! loopback and script (or replay recorded replies), its bounds, and how it
//! chooses a decoding.
//!
//! One test binary (`cargo test -p mesh-tests --test model`), each module linked once.

mod model;
mod model_bounds;
mod model_constrain;
