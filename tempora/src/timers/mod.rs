//! The POSIX interval-timer service: [`Timers`], its [`Owner`]s, and their timers.
//!
//! ```text
//!  Timers ── Core { registry, clock source, tick, bases[B], wake, health }  shared/mod.rs
//!     │        ├─ Base: lock, wheel per clock, sleeps' wheel,              shared/base.rs
//!     │        │        driver sleep ticks, delivery lock
//!     │        ├─ Wakeups: alarms[D] (timerfd + epoll) or the deadline fd  shared/wake.rs
//!     │        ├─ crews[D]: each driver's threads, callbacks not run yet   shared/crew.rs
//!     │        └─ Health: stop, failure, the owners' queues to close       shared/health.rs
//!     ├─ drivers[D] (threads: wait on their alarm; the one woken polls    firing/driver.rs
//!     │              all bases, re-arms it, runs the callbacks)
//!     └─ owner() ─► Owner ── registry owner (IDs → timer objects)          calls/owner.rs
//!                         └─ OwnerPart: core, sink (event queue + waiting  shared/contract.rs,
//!                            receivers of Queue timers)                    object/notify.rs
//! ```
//!
//! The module is a room per job, each a folder whose `mod.rs` says what it holds and its part
//! of `impl Core`'s work, bottom-up: `object/` (the timer object and what it is made of: the
//! value types, the POSIX rules, the owner's event queue), `shared/` (`Core` and its parts;
//! arming), `signals/` (signal timers), `firing/` (polling, delivery, the drivers), `calls/`
//! (an owner's calls, receiving included). `Timers` itself is in `service.rs`, its builder in
//! `builder.rs`, the inspection endpoint in `inspect/`; this file is the module's doc and its
//! public names. Every file of the module is in ARCHITECTURE.md's files table, bottom-up:
//! each imports only files listed above it (`tempora/tests/architecture.rs` checks that, and
//! that no import circle forms).
//! Checkpoint and restore of an owner live in [`crate::checkpoint`].
//!
//! The calls and their POSIX names: [`Owner::create`] (`timer_create`), [`Owner::settime`]
//! (`timer_settime`), [`Owner::gettime`] (`timer_gettime`), [`Owner::getoverrun`]
//! (`timer_getoverrun`), [`Owner::delete`] (`timer_delete`). Their semantics are Linux
//! 6.15+'s, rule by rule (`itimer.rs` applies them; its doc lists them):
//! a zero `it_value` disarms, `TIMER_ABSTIME` in the past fires at once, relative
//! `CLOCK_REALTIME` timers run on the monotonic clock, invalid times are `EINVAL` before the
//! lookup, settime returns the old setting, resets the overrun and voids a pending event, and
//! overruns count missed periods only, latched when an event is consumed.
//!
//! # Notification
//!
//! Chosen per timer at create ([`Notify`]):
//! * `None` (`SIGEV_NONE`): nothing is delivered; gettime shows the state.
//! * `Queue`: the owner's event queue with the kernel's signal semantics, without a signal (see
//!   `notify.rs`): at most one pending event per timer; a periodic timer is re-armed only when
//!   its event is consumed ([`Owner::try_recv`], [`Owner::recv`], ...), and the periods that
//!   passed meanwhile are its overrun. A periodic timer whose events nobody consumes costs
//!   nothing after its first expiry.
//! * `Callback` (`SIGEV_THREAD`): a closure run by whoever polls, with no tempora lock held, so
//!   it may call settime or delete on its own timer. The event is consumed as it is delivered:
//!   the overrun it gets counts the periods the poll itself was late by. A timer's callback
//!   never runs beside itself, whoever polls: an expiry taken while a call runs is folded into
//!   one more call when it returns (its overrun counts the folded periods), and dropped if the
//!   running call set or deleted the timer (`serial.rs`).
//!
//!   A callback ([`Notify::callback`]) is handed a [`Fired`] at each expiry (the ID, the
//!   overrun, and settime, gettime, getoverrun, delete on the timer, through its owner held
//!   weakly), so it needs to capture no [`Owner`]. One that captures its owner
//!   (or a [`TimerHandle`]) keeps the owner alive as long as the timer exists, and dropping
//!   every other handle then ends nothing: the owner, its timers and its closures stay until
//!   [`Owner::destroy`]. To reach another timer or owner from a closure, capture a
//!   [`WeakTimer`] ([`TimerHandle::downgrade`]) or a [`WeakOwner`] ([`Owner::downgrade`]),
//!   and a task the owner wakes takes [`WeakOwner::events`]. (`handle.rs`, "No capture
//!   cycles".)
//!
//! * `Signal`, `ThreadSignal`, `SignalWithId` (`SIGEV_SIGNAL`, `SIGEV_THREAD_ID`, a NULL
//!   sigevent): a real signal, queued to the process or to one of its threads with the
//!   `siginfo_t` of a kernel timer's signal (`si_code = SI_TIMER`, `si_timerid`,
//!   `si_overrun`, `si_value`), so a `SA_SIGINFO` handler, `sigwaitinfo`, `sigtimedwait` and
//!   `signalfd` read what they read from a kernel timer. At most one signal per timer is
//!   pending; the periods that pass meanwhile are overruns, and a periodic timer whose signal
//!   stays blocked or ignored costs a bounded number of probes, not a wake-up per period
//!   (`signals/mod.rs`). Unlike kernel timers, these cost no `RLIMIT_SIGPENDING` unit while
//!   nothing is pending: a process may hold millions. Where a program can tell them from
//!   kernel timers is the table below.
//!
//! Every thread tempora starts (drivers, spares, the realtime-clock watch) blocks every
//! signal, as glibc's `SIGEV_THREAD` helper thread does: process-directed signals reach the
//! application's threads only, and a signal the application blocks in every thread (to take
//! it with `sigwait` in `main`) stays blocked.
//!
//! ## Where tempora differs from the kernel
//!
//! This is the one table of differences, for the Rust API, `tempora.h`, `tempora_posix.h` and
//! the preloaded drop-in alike (the headers point here). Most rows are signals'. User space can
//! queue a signal, ask which signal numbers are pending and read a disposition; it cannot see a
//! signal leave the queue, rewrite a queued one, or take one back without taking every other
//! sender's signal of that number with it. Each signal row below follows from one of those
//! (the last four rows are C's `SIGEV_THREAD` and `timer_t`); everything else a program can
//! observe (the siginfo fields, one pending signal per timer, overruns counted and reported by
//! `timer_getoverrun` after delivery, blocked and ignored signals costing no wake-up per
//! period, `EINVAL` for a bad signal number or thread, a timer whose thread exited falling
//! silent) is the kernel's behaviour.
//!
//! | a program ... | with a kernel timer | with tempora | because |
//! |---|---|---|---|
//! | delays a periodic timer's signal (blocked, or taken late) while periods pass | the signal's `si_overrun` counts them | that signal's `si_overrun` counts only the periods before it was queued; `timer_getoverrun` reports the kernel's count once the signal is delivered, and the next signal's `si_overrun` carries them (summed over all signals, `1 + si_overrun` counts every expiry on both). So `timer_getoverrun() == si_overrun` holds for a signal taken within its period, and `timer_getoverrun() >= si_overrun` for every signal; the kernel has equality always (both are computed at the dequeue) | user space cannot rewrite a queued `siginfo_t` |
//! | calls `timer_settime` or `timer_delete` while the timer's signal is pending | the signal is discarded when dequeued: never seen | it is delivered (its `si_timerid` names the re-armed, or deleted, timer), and a re-armed timer's expiries send their own signals: the program sees one signal more than with the kernel | user space cannot retract a queued signal (`sigtimedwait` takes the first of that number, whoever sent it, and a thread other than `main` may not queue another sender's back) |
//! | takes the signal and waits for the next | re-armed at the dequeue: the next signal comes at the next period | the dequeue is noticed at the next look: the next period, up to 10 ms later for a signal that was pending long, or at `timer_getoverrun`; the periods in between are overruns, none is lost. A signal found pending is looked at 1 ms (at most half a period) before the period it would count: taken in that last millisecond, that period is an overrun of it where the kernel would send a new signal (`signals/mod.rs`, "Which side of an expiry a consumption fell") | user space cannot see a dequeue |
//! | gives several timers one signal number | each timer's signal is tracked on its own | a timer sees its signal pending while any signal of that number is: one whose signal was taken waits until all are, counting overruns | user space cannot tell which entry of a number is pending (`sigpending` reports numbers) |
//! | shares a standard (non-realtime) signal with another sender (`kill`) | the timer's signal is queued beside the other | tempora sends a standard signal only once its number is not pending (it waits, retrying within 10 ms, and counts the periods meanwhile), but a `kill` that lands between its check and its send merges with it: one delivery | user space cannot queue two instances of a standard signal |
//! | holds many timers | each costs one `RLIMIT_SIGPENDING` unit from create to delete (`EAGAIN` past it: ~96k on a default system) | nothing while no signal is pending; one unit per queued signal. A signal refused for want of room (`EAGAIN`) is retried, doubling from 100 µs up to 100 ms, by one timer for all those refused (the others wait until its signal goes: `lookout.rs`), and the periods meanwhile are its overrun | user space cannot use the kernel's preallocated per-timer entry |
//! | sets `SIG_IGN`, then a handler again | the parked timer's signal is queued at the `sigaction` call | it is queued at the timer's next retry after it (doubling up to 10 ms), with the same overrun | user space cannot see a `sigaction` call |
//! | changes a signal's disposition to or from ignored within a probe interval (a period, at most 10 ms) of its delivery, or of its discard by `SIG_IGN` | each event is seen as it happens | a signal no longer pending is taken for discarded if the disposition ignores it when tempora looks (and did not when it was queued), for delivered otherwise: a delivery followed by `SIG_IGN` counts its periods again in the next signal, a discard followed by a handler loses that expiry from the counts, and a signal queued while ignored (because blocked) and discarded by setting `SIG_IGN` again before the unblock counts as delivered | user space cannot see a dequeue, or a `sigaction` call |
//! | targets a thread that exits, and its ID is reused by a new thread | the timer keeps a reference to the thread that exited: nothing is sent | the signal goes to the new thread of that ID | user space cannot hold a reference to a thread |
//! | takes the signal in a handler on a thread that polls tempora itself (`Timers::poll` in a loop, no driver) | the handler runs outside the timer code | the handler may run on return from the system call that queued it, inside that poll: a timer call on the same timer from that handler waits for ever (async-signal-safety is not yet tempora's) | user space cannot queue a signal with no lock held yet |
//! | waits in `sigwait`, `sigwaitinfo` or `sigtimedwait` for a timer's signal (the drop-in) | the thread sleeps in the wait, its signal mask its own | the thread fires the process's timers while it waits (so its own timer's expiry wakes it alone); meanwhile it blocks every signal but inside its `ppoll`, where a handler still interrupts it (`EINTR`), and holds a signalfd. It is cancelled only inside that `ppoll`, and its cleanup handlers run with every signal blocked; held in a handler (or left by `longjmp`), the other timers wait up to 10 ms for the driver to take over, and a thread that left the wait by `longjmp` waits as the C library's from then on (woken by the driver's signal) | user space cannot arm the expiry inside the kernel's wait |
//! | blocks a fast periodic timer's signal for long | no work at all | at most one look (`sigpending`, or a `/proc` read for a thread's signal) per 10 ms for all the periodic timers of one target and signal number (`lookout.rs`), and one wake-up per 10 s per timer (its backstop) | user space cannot see the unblock |
//! | calls `exec` with a timer's signal queued | the signal is flushed with the timers | the signal stays queued for the new program, like any signal queued with `sigqueue` | user space cannot flush another sender's queued signal |
//! | creates a `SIGEV_THREAD` timer (C) | glibc 2.34 on: a helper thread per timer, made with `sigev_notify_attributes`, calls the function at each expiry | the function runs on tempora's driver thread; one that blocks hands the driver to a spare thread, so other timers still fire (timers of other kinds however many block, other functions while fewer than 64 block at once: `spare_drivers`). `sigev_notify_attributes` is ignored (stack size, scheduling, affinity, detach state do not apply); `pthread_self()` and thread-locals are the driver's; every signal is blocked there. A timer's function never runs twice at once: expiries meanwhile make one more call | a thread per timer is what a million timers cannot afford |
//! | ends a `SIGEV_THREAD` call other than by returning | `pthread_exit` ends the helper thread's call | it must return normally: a C++ exception aborts the process; `pthread_exit`, `longjmp` or a cancellation is undefined behaviour | the thread is tempora's driver, shared by every timer |
//! | calls `timer_getoverrun` in a `SIGEV_THREAD` call made for expiries that came while the previous ran | the overrun of that expiry | the last expiry's lateness only, not how many came (`tempora.h`'s `tempora_callback_fn` is told) | the POSIX call has no argument to say which call it is asked from |
//! | reads a `timer_t`'s value as a number (C) | a small int (or glibc's tagged pointer) | a tagged value: the ID in the low 32 bits, a tag in the high 32 (`tempora_posix.h` says which); a program that indexes an array with it, or prints it, sees another number | a kernel `timer_t` must stay recognisable beside tempora's, so each goes where it was made |
//!
//! # Firing
//!
//! Either background drivers ([`Builder::drivers`], default one on the OS clocks; the
//! `driver` module) or the application's own loop: [`Timers::next_deadline`] says when there
//! is work, [`Timers::poll`] does it (from an epoll loop, an async task, a dedicated thread);
//! both may run together. A poll visits every base. At each it takes the base lock only to
//! pop what is due, at most [`Builder::batch`] entries at a time, and delivers them with the
//! lock released, so arming and cancelling on that base wait for one batch at most. A poll
//! also waits for the batches other pollers popped before it to be delivered (`base.rs`,
//! "Delivery and the poll barrier"), so when it returns everything due has fired.
//!
//! # Lifetime and failure
//!
//! The service runs while a [`Timers`] handle or a [`Sleep`](crate::time::Sleep) exists.
//! Dropping the last of them stops and joins the drivers; owners may outlive it, to read, delete and checkpoint their timers and to
//! receive events already queued, but nothing fires any more: `create` and `settime` fail
//! with [`Error::ServiceStopped`](crate::Error::ServiceStopped), and `recv` returns it once the queue is empty instead of
//! waiting forever.
//!
//! A panic inside one of tempora's own critical sections (a bug) poisons that lock instead of leaving it held, and a driver thread whose loop
//! panics dies visibly: either fails the service ([`Timers::health`] reports what), its
//! receivers return [`Error::Poisoned`](crate::Error::Poisoned) once their queues are empty, and calls that need the
//! poisoned part fail with it. A panicking *callback* is not such a failure: it is caught,
//! counted and the poll goes on.
//!
//! # Memory
//!
//! A create, an arming or a restore that cannot get memory fails with
//! [`Error::OutOfMemory`](crate::Error::OutOfMemory) (`EAGAIN`, as the kernel's
//! `timer_create` when it cannot allocate a timer) and changes nothing: no timer half-made,
//! the service's count and statistics as before, the owner and its other timers usable; the
//! same call succeeds once memory is freed. What a create allocates, each fallibly:
//! * its slot, on a page of 64 slots made when a shard's block first reaches it, and now and
//!   then a page directory twice the old one (`registry/slots.rs`);
//! * the calling thread's shard of the owner, on its first create there;
//! * for a callback, the box of what the timer carries and the callback's `Arc<Serial>`
//!   (std has no fallible `Arc::new`: a block of its size is allocated fallibly and freed
//!   just before, which glibc's per-thread cache hands straight back to it; with another
//!   allocator this is a probe, not a reservation);
//! * for a `Queue` timer, its entry's room on the owner's queue, so that its expiries never
//!   allocate and never find the queue full: a deleted timer's entry still on the queue
//!   keeps its timer's room until it is consumed, so no event is lost for want of memory
//!   (`notify.rs`, "Memory");
//! * the hash table's growth: a table that cannot get its larger table is not grown and
//!   keeps working at a higher load (longer chains); the next check tries again. A split
//!   that cannot collect a chain walks it instead.
//!
//! A restore sizes its lists of the snapshot's callbacks fallibly before it makes anything,
//! and a create that fails part-way is rolled back as any failed restore is. Arming
//! ([`Owner::settime`]) allocates nothing: a timer is linked into its wheel through its own
//! node. A driver's poll collects the callbacks it finds due into a buffer that grows only
//! fallibly: a poll that finds several batches of callbacks due together and no memory for
//! the next batch's room stops there, and the driver's next poll, at once, takes the rest
//! (`Core::poll_collect`); nothing is lost.
//!
//! What can still abort the process on a failed allocation, and why each is bounded:
//! * building a service ([`Timers::new`], [`Builder::build`]: its threads and tables): a
//!   fixed size, once, not per timer. The one part a configuration makes large, the ID
//!   table's first buckets ([`Builder::initial_buckets`], up to 2^40 of 32 bytes), is
//!   allocated fallibly: [`Error::OutOfMemory`](crate::Error::OutOfMemory) from the build;
//! * an owner made by [`Timers::owner`] or [`Group::owner`]: a fixed size each (its queue,
//!   statistics and ID namespace), once, not per timer. [`Timers::try_owner`] and
//!   [`Group::try_owner`] make the same owner fallibly: each of its allocations fails with
//!   [`Error::OutOfMemory`](crate::Error::OutOfMemory) and leaves nothing listed, its `Arc`s
//!   after a probe as a callback's. Every probed block is one glibc's per-thread cache
//!   keeps and hands back, of at most a `malloc`'s alignment (an owner's ID namespace keeps
//!   its counters apart with padding, not a 128-byte alignment, which glibc serves through an
//!   aligned path that skips that cache: an owner's creation aborted there once in 65 runs
//!   under `RLIMIT_AS`); `tests/memory.rs` makes owners until `RLIMIT_AS` runs out;
//! * a thread's first call of some kinds: its first blocking wait (the parking data that the
//!   `parking_lot` crate registers with glibc's thread-exit list; glibc ends the process if
//!   that small allocation fails), a poller's buffers of popped entries, of the events it
//!   holds for their queues and of the calls they make (one [`Builder::batch`] each) on its
//!   first poll (a thread blocked in `Owner::recv` on a service with one driver polls in
//!   the driver's place: its first such wait makes them, after a probe that the memory is
//!   there), and a driver's list of calls for its crew as each thread starts. All once per thread, none per timer;
//! * starting a thread: std's spawn allocates its handle and name infallibly (a stack that
//!   cannot be mapped is an error, not an abort). A spare driver is started when a driver
//!   runs callbacks with none standing by, at most [`Builder::spare_drivers`] per driver
//!   at once (idle ones retire: a later burst starts them again, `driver.rs`);
//! * statistics: a thread's slot in an owner's tally, and its lateness histogram, are
//!   allocated fallibly on its first count there; a thread whose slot cannot be made counts
//!   into the owner's shared overflow slot, and only if that cannot be made either is the
//!   count lost; a lateness sample that finds no memory for its histogram is not recorded
//!   (the expiration is counted). Statistics lose counts then, never abort;
//! * an owner's end: the callbacks and slot pages it lets go are released without a
//!   fallible-path allocation (a list that cannot be made is skipped: its callbacks are
//!   dropped at once, its pages kept by the dead owner rather than pooled); the epoch
//!   collector's deferred frees (`crossbeam-epoch`) allocate a node per 64 of them;
//! * receiving: a task's waker registration (one entry per waiting task), reading the
//!   owner's timers into a `Vec` ([`Owner::timers`]), a checkpoint's capture and its encoded
//!   bytes, and reading a snapshot's bytes from a file or a reader (bounded by their size;
//!   decoding them allocates its records fallibly).
//!
//! # Fork
//!
//! A child made by `fork(2)` starts as the kernel's does: with none of the parent's timers.
//! It has only the thread that forked, so a service built before the fork has no driver
//! there, and any of its locks a parent's thread held at the fork stays held for ever. So,
//! as glibc documents for its own helper thread, a service belongs to the process that built
//! it:
//! * every call of a service built before the fork (its `Timers`, `Owner`s, `Group`s, timer
//!   handles) fails in the child with [`Error::Forked`](crate::Error::Forked) (`ECHILD`) at
//!   once, before it touches any lock; calls that cannot fail return nothing (`try_recv`
//!   `None`, `poll` 0, `timers` and `stats` empty); `recv` returns the error instead of
//!   waiting, and [`Owner::closed`] says it; a [`Sleep`](crate::time::Sleep) of it polled or
//!   reset in the child panics (it could never complete);
//! * dropping them in the child neither joins the parent's threads nor takes a lock: the
//!   parent's service, its owners and timers are leaked there (the child's copy of the
//!   parent's memory, never freed);
//! * a service built in the child works as any other, and the global service
//!   ([`crate::time::global`], and the C ABI's default owner) is built again in the child on
//!   first use, with no timers, IDs from 0 and restore mode off;
//! * in the parent nothing changes.
//!
//! The fork is seen through a `pthread_atfork` child handler registered before the first
//! service is built, so this holds for `fork(3)` (and `posix_spawn`, whose child runs no
//! Rust); a raw `clone(2)` without the C library's fork handlers is not supported.
//!
//! # Signal handlers
//!
//! POSIX makes `timer_settime`, `timer_gettime` and `timer_getoverrun` async-signal-safe, and
//! so are [`Owner::settime`], [`Owner::gettime`] and [`Owner::getoverrun`] (and the C ABI's
//! `tempora_timer_settime`, `_gettime`, `_getoverrun`): a signal handler may call them on any
//! thread, whatever that thread was doing inside tempora. They allocate nothing, and they
//! never wait for a lock their own thread holds:
//! * `gettime` takes no lock: it copies the timer's state and checks the copy against the
//!   lock's version (`registry/timer.rs`, `Timer::read_unlocked`), waiting only while another
//!   thread's holder changes the state. So a handler interrupting a `gettime` finds nothing
//!   held, and its `settime` of the same timer completes.
//! * Every thread keeps a record of the tempora locks it holds (`sync/order.rs`). A call of
//!   the three that starts while its own thread holds one (it can only be a handler's: no
//!   tempora code calls them under a lock) returns [`Error::WouldDeadlock`](crate::Error::WouldDeadlock) (`EDEADLK`) at
//!   once and changes nothing; it would succeed once the interrupted call returned. A handler
//!   meets it when it interrupted a call that holds a lock: a `settime`, `delete`, `create`,
//!   a `getoverrun` of a signal timer whose signal is outstanding, a `poll` on the thread,
//!   or a thread's receive.
//! * The hash-table walk that finds a timer by ID takes no epoch pin: it opens its thread's
//!   walk mark, which a retired table's free waits out (`sync/pin.rs`, "Walks"); a handler's
//!   walk inside an interrupted one only nests. So a handler's call never touches the epoch's
//!   state, and never frees.
//!
//! What stays outside: `create`, `delete`, the receives, `poll`, checkpoints and restores
//! are not async-signal-safe (they allocate or free, as `timer_create` and `timer_delete`
//! are not in POSIX's list). A thread's first tempora call registers the thread (its index,
//! its participant in tempora's epoch collector), which allocates: make it outside a handler.
//! After that the three calls allocate nothing: a `settime` by a thread that never counted in
//! the timer's owner counts in the owner's shared statistics slot, made with the owner. A
//! statistics count made by a handler may be lost when it lands between the interrupted
//! code's read and write of the same counter (each thread's counters are its own, updated
//! without atomic read-modify-write). The epoch collector is tempora's own, pinned only
//! through `sync::pin`, so another crate's epoch pins (a work-stealing pool's) are never the
//! half-made pin a handler interrupts.
//!
//! # Precision
//!
//! A timer keeps its exact expiry in nanoseconds; the wheels count ticks of [`Builder::tick`]
//! (default 1 µs) and place timers precisely (`wheel::Mode::PRECISE`) at
//! `ceil(expiry / tick)`. A poll at time `now` advances the wheels to `floor(now / tick)`, so
//! a timer fires only once `now >= expiry`, never before, and when polled on time it fires
//! less than one tick after its expiry. When the realtime clock was set backwards, the realtime
//! wheels are re-based on it before anything fires, so absolute realtime timers wait for the
//! wall clock to reach them again.
//!
//! # Safety of the timer addresses in wheels and queues
//!
//! Wheels and queue entries hold timer addresses, not references:
//! * Queue entries are dereferenced only by the owner's receivers, who hold the owner: its slot
//!   pages live as long as it does.
//! * A base's wheel links the timer object itself, through its node (`links`, the intrusive
//!   storage of `wheel/`), and follows its neighbours' addresses whenever it links, unlinks
//!   or pops. So a timer is unlinked when it is deleted, under its lock (`Core::disarm`),
//!   including when its owner goes away (`Owner::destroy` runs the same hook on every timer:
//!   the registry's delete hook, `Itimer::on_delete` in `contract.rs`), before its slot can be
//!   reused and before its owner's pages can be freed. (A timer whose lock was poisoned is
//!   skipped by the teardown and its memory kept, so a node it left linked stays valid; a node
//!   left linked in a poisoned base is never reached, as nothing walks that base again.)
//!   A timer popped before its delete is only dereferenced by a poll that has been pinned in
//!   the epoch since before the pop, and an owner's slot pages are recycled only after an
//!   epoch grace period that starts after its teardown, so the address stays a timer object.
//!   Under the timer's lock the poll then checks that the timer still waits where it was
//!   popped and was not linked again (`base.rs`).

pub(crate) mod builder;
pub(crate) mod calls;
pub(crate) mod firing;
#[cfg(not(loom))]
pub mod inspect;
pub(crate) mod object;
pub(crate) mod service;
pub(crate) mod shared;
pub(crate) mod signals;

#[cfg(all(test, not(loom)))]
pub(crate) mod testing;
#[cfg(all(test, not(loom)))]
mod tests;

pub use crate::registry::TimerId;
pub use builder::Builder;
pub use calls::handle::{TimerHandle, WeakTimer};
pub use calls::owner::Owner;
pub use calls::receive::{Events, Recv};
pub use object::notify::Event;

pub use object::types::{
    Callback, Fired, ItimerSpec, Notify, NotifyKind, Precision, SetFlags, Status, TimerInfo,
    WeakOwner,
};

pub use service::{Group, Timers};
