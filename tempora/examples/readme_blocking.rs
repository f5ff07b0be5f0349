//! The README's blocking example: a periodic timer, three events received, then deleted.
use std::time::Duration;
use tempora::clock::ClockId;
use tempora::{Notify, SetFlags, Timers};

fn main() -> Result<(), tempora::Error> {
    let timers = Timers::new(); // OS clocks, a timer base per CPU, one driver thread
    let owner = timers.owner(); // an ID namespace (like a process) with its event queue
    let id = owner.create(ClockId::Monotonic, Notify::Queue)?; // timer_create
    let every = Duration::from_millis(10);
    owner.settime(id, SetFlags::RELATIVE, every, every)?; // timer_settime: 10 ms, then every 10 ms
    for _ in 0..3 {
        let event = owner.recv()?; // blocks until the driver fires it
        assert_eq!(event.id, id);
        println!("timer {} fired (overrun {})", event.id, event.overrun);
    }
    owner.delete(id) // timer_delete
}
