//! Clock identities. A timer is created on one clock; the service (next issue) reads it.

/// The clocks a timer can be created on, with Linux's `clockid_t` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ClockId {
    /// `CLOCK_REALTIME` (0): wall-clock time; absolute timers follow changes to it.
    Realtime = 0,
    /// `CLOCK_MONOTONIC` (1): never jumps, stops while the system is suspended.
    Monotonic = 1,
    /// `CLOCK_BOOTTIME` (7): monotonic, and counts time spent suspended.
    Boottime = 7,
}

impl ClockId {
    /// The Linux `clockid_t` value.
    pub fn as_raw(self) -> i32 {
        self as i32
    }

    /// The clock with this Linux `clockid_t` value, if tempora supports it.
    pub fn from_raw(raw: i32) -> Option<ClockId> {
        match raw {
            0 => Some(ClockId::Realtime),
            1 => Some(ClockId::Monotonic),
            7 => Some(ClockId::Boottime),
            _ => None,
        }
    }
}
