//! The wheel's tests, one file per topic:
//!
//! - `layout`: the geometry (levels, granularities, rounding, entry sizes), checked against
//!   the constants and the module doc's table.
//! - `operations`: each operation on its own: when entries fire, polling and bounded
//!   advances, rescheduling, stale keys, rebasing, the builder, and dropping payloads.
//! - `model`: the model-based property tests, for both storages, against a `BTreeMap`.

use super::core::Links;
use super::intrusive::{Intrusive, Locate, Node};
use super::layout::{granularity, level_for_delta, level_start, round_up_bucket, LVL_CLK_SHIFT};
use super::*;
use crate::testing::TestRng;
use proptest::prelude::*;
use std::collections::BTreeMap;

mod layout;
mod model;
mod operations;
