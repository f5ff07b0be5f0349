//! The README's tokio example: tempora's sleeps and timeouts, and an owner's events, awaited.
use std::time::Duration;
use tempora::clock::ClockId;
use tempora::{Notify, SetFlags, Timers};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tempora::time::sleep(Duration::from_millis(5)).await; // on tempora's wheel, any executor
    let never = std::future::pending::<()>(); // a request that never answers
    let r = tempora::time::timeout(Duration::from_millis(5), never).await;
    assert_eq!(r, Err(tempora::time::Elapsed));
    println!("timed out: {r:?}");

    let timers = Timers::new();
    let owner = timers.owner();
    let id = owner.create(ClockId::Monotonic, Notify::Queue)?;
    let every = Duration::from_millis(10);
    owner.settime(id, SetFlags::RELATIVE, every, every)?;
    for _ in 0..3 {
        let event = owner.recv_async().await?; // the task waits; no thread blocks
        println!("timer {} fired (overrun {})", event.id, event.overrun);
    }
    Ok(())
}
