//! The suites, one module each: every module's `plan` adds the suite's steps to a run's plan.
//! The service suite's `plan`s are five (`service`, `service::drivers`,
//! `service::firing`, `service::signals`, `service::inspect`).

pub(crate) mod r#async;
pub(crate) mod capi;
pub(crate) mod checkpoint;
pub(crate) mod seed;
pub(crate) mod server;
pub(crate) mod service;
pub(crate) mod stats;
pub(crate) mod wheel;
