//! Loom models of `base.rs`'s protocols (`.ci/loom.sh`).

use super::*;
use crate::clock::CLOCKS;
use crate::wheel::Mode;
use loom::sync::Arc;

const MONO: usize = 1;

/// A poll pops a timer while its owner deletes it and arms it again (a timer deleted and
/// re-created in its slot, or re-armed): the owner unlinks only a linked node, under both
/// locks; the poll delivers only if, under the timer's lock, the timer still names the
/// wheel and its node is not linked again. The poll never delivers the second arming (not
/// due at the poll's time), delivers the first at most once, and the wheel ends holding
/// exactly what the state says. Without the `is_linked` check the poll delivers the
/// second arming.
#[test]
fn loom_a_poll_pops_a_timer_its_owner_deletes_and_arms_again() {
    loom::model(|| {
        let base = Arc::new(Base::new([0; CLOCKS], true));
        let timer = Arc::new(Timer::<Itimer>::default());
        // Visible (owner key 1), so that `lock_visible` enters it.
        timer.hot.owner.store(2, Ordering::Relaxed);
        let r = timer_addr(&timer);
        // Armed: linked at tick 1, the state naming the wheel; `expiry` is the arming.
        let lock =
            |t: &Timer<Itimer>, f: &mut dyn FnMut(&mut crate::timers::object::LockedTimer<'_>)| {
                t.lock_visible(|mut l| f(&mut l)).unwrap().unwrap();
            };
        lock(&timer, &mut |l| {
            base.locked(|st| {
                // SAFETY: a live timer in no wheel, alive for the whole model.
                unsafe { st.wheels[MONO].set(r, 1, Mode::PRECISE) }
            })
            .unwrap();
            l.state.expiry = 1;
            l.state.set_wheel(MONO as u8 + 1);
        });
        let (base2, timer2) = (base.clone(), timer.clone());
        let owner = loom::thread::spawn(move || {
            let (base, timer) = (&*base2, &*timer2);
            // Delete: under the timer's lock, unlink if still linked.
            lock(timer, &mut |l| {
                if l.state.wheel() != 0 {
                    // SAFETY: the state names this wheel: the node is here or in none.
                    base.locked(|st| unsafe { st.wheels[MONO].take(r) })
                        .unwrap();
                    l.state.set_wheel(0);
                }
            });
            // Arm again (the next incarnation), at tick 2.
            lock(timer, &mut |l| {
                // SAFETY: the node is in no wheel or this one; the timer is live.
                base.locked(|st| unsafe { st.wheels[MONO].set(r, 2, Mode::PRECISE) })
                    .unwrap();
                l.state.expiry = 2;
                l.state.set_wheel(MONO as u8 + 1);
            });
        });
        // The poll at tick 1.
        let delivering = base.delivery().unwrap();
        let mut popped = Vec::new();
        base.locked(|st| st.wheels[MONO].run(1, usize::MAX, |p| popped.push(p)))
            .unwrap();
        let mut delivered = Vec::new();
        for p in popped {
            assert_eq!(p, r);
            lock(&timer, &mut |l| {
                if crate::timers::object::popped_here(l, 0, MONO) {
                    delivered.push(l.state.expiry);
                    l.state.set_wheel(0);
                }
            });
        }
        drop(delivering);
        owner.join().unwrap();
        assert!(
            delivered.len() <= 1 && !delivered.contains(&2),
            "{delivered:?}"
        );
        let mut waits = false;
        lock(&timer, &mut |l| waits = l.state.wheel() != 0);
        let len = base.locked(|st| st.wheels[MONO].len()).unwrap();
        assert_eq!(
            len,
            usize::from(waits),
            "the wheel holds what the state says"
        );
        assert_eq!(timer.written.links.is_linked(), waits);
    });
}
