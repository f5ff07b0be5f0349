//! What a run can select: the [`Catalog`] of the suites' cases and implementations, read from
//! a plan that is built but not run (steps are closures: planning measures nothing and builds
//! no workload), `bench --list`'s text, and the check that every `--case` and `--impl` name
//! selects something, before anything runs.
//!
//! `--case` keeps its prefix matching (`t1` selects `t1-create` and `t1-getoverrun`), so a
//! `--case` name is valid when it starts a case name of a selected suite; an `--impl` name is
//! valid when it is an implementation of a selected suite.

use crate::record::Suite;

use super::plan::{Plan, Settings};

/// One suite's cases and implementations, in plan order.
#[derive(Debug, PartialEq)]
struct Entry {
    suite: Suite,
    cases: Vec<&'static str>,
    impls: Vec<String>,
}

/// The cases and implementations of a plan's steps, per suite in run order.
#[derive(Debug)]
pub(super) struct Catalog(Vec<Entry>);

impl Catalog {
    /// What `plan`'s steps measure, as far as its `--case` and `--impl` select.
    pub(super) fn of(plan: &Plan<'_>) -> Catalog {
        let mut entries: Vec<Entry> = Vec::new();
        for step in &plan.steps {
            if entries.last().is_none_or(|e| e.suite != step.suite) {
                entries.push(Entry {
                    suite: step.suite,
                    cases: Vec::new(),
                    impls: Vec::new(),
                });
            }
            let e = entries.last_mut().expect("pushed above");
            let settings = plan.settings;
            for &c in step.cases.iter().filter(|c| settings.wants_case(c)) {
                if !e.cases.contains(&c) {
                    e.cases.push(c);
                }
            }
            for i in step.imps().filter(|i| settings.wants_impl(i)) {
                if !e.impls.iter().any(|x| x == i) {
                    e.impls.push(i.to_string());
                }
            }
        }
        Catalog(entries)
    }

    /// `bench --list`: per suite, its cases and its implementations.
    pub(super) fn text(&self) -> String {
        let mut out = String::new();
        for e in &self.0 {
            out += &format!(
                "{}\n  cases: {}\n  impls: {}\n",
                e.suite.name(),
                e.cases.join(", "),
                e.impls.join(", ")
            );
        }
        out
    }

    /// Whether every `--case` starts a case and every `--impl` names an implementation of
    /// this catalog; the error lists the valid names, one suite a line.
    pub(super) fn check(&self, settings: &Settings) -> Result<(), String> {
        let suites = self
            .0
            .iter()
            .map(|e| e.suite.name())
            .collect::<Vec<_>>()
            .join(", ");
        for c in settings.cases.iter().flatten() {
            let known = self
                .0
                .iter()
                .any(|e| e.cases.iter().any(|k| k.starts_with(c.as_str())));
            if !known {
                let mut msg = format!(
                    "--case `{c}` starts no case name of the selected suites ({suites}); \
                     the cases (any prefix of one selects it):"
                );
                for e in &self.0 {
                    msg += &format!("\n  {}: {}", e.suite.name(), e.cases.join(", "));
                }
                return Err(msg);
            }
        }
        for i in settings.impls.iter().flatten() {
            if !self.0.iter().any(|e| e.impls.contains(i)) {
                let mut msg = format!(
                    "--impl `{i}` is no implementation of the selected suites ({suites}); \
                     the implementations:"
                );
                for e in &self.0 {
                    msg += &format!("\n  {}: {}", e.suite.name(), e.impls.join(", "));
                }
                return Err(msg);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::plan::{Mode, Step};

    fn settings(impls: Option<&[&str]>, cases: Option<&[&str]>) -> Settings {
        let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        Settings {
            mode: Mode::Quick,
            n: None,
            reps: None,
            impls: impls.map(owned),
            cases: cases.map(owned),
        }
    }

    /// Two suites' steps: seed's `t1-*` and `mem` for tempora and kernel, wheel's `burst`
    /// for tempora with `binary-heap` measured alongside.
    fn plan(settings: &Settings) -> Plan<'_> {
        let mut plan = Plan::new(settings);
        for imp in ["tempora", "kernel"] {
            let t1 = ["t1-create", "t1-getoverrun"];
            plan.add(Step::new(Suite::Seed, &t1, imp, 1, 1, 1.0, Vec::new));
            plan.add(Step::new(
                Suite::Seed,
                &["mem-dense"],
                imp,
                1,
                1,
                1.0,
                Vec::new,
            ));
        }
        let burst = Step::new(Suite::Wheel, &["burst"], "tempora", 1, 1, 1.0, Vec::new);
        plan.add(burst.also("binary-heap"));
        plan
    }

    #[test]
    fn the_catalog_lists_each_suites_cases_and_impls_in_plan_order() {
        let all = settings(None, None);
        let text = Catalog::of(&plan(&all)).text();
        assert_eq!(
            text,
            "seed\n  cases: t1-create, t1-getoverrun, mem-dense\n  impls: tempora, kernel\n\
             wheel\n  cases: burst\n  impls: tempora, binary-heap\n"
        );
        // What `--case` and `--impl` select, as a run would measure it.
        let some = settings(Some(&["tempora"]), Some(&["t1-c", "burst"]));
        let text = Catalog::of(&plan(&some)).text();
        assert_eq!(
            text,
            "seed\n  cases: t1-create\n  impls: tempora\n\
             wheel\n  cases: burst\n  impls: tempora\n"
        );
    }

    #[test]
    fn unknown_case_or_impl_names_are_refused_with_the_valid_names() {
        let all = settings(None, None);
        let catalog = Catalog::of(&plan(&all));
        let check = |impls, cases| catalog.check(&settings(impls, cases));
        assert_eq!(check(None, None), Ok(()));
        assert_eq!(check(Some(&["kernel"]), Some(&["t1", "mem-dense"])), Ok(()));
        let err = check(None, Some(&["t1", "t9"])).unwrap_err();
        assert_eq!(
            err,
            "--case `t9` starts no case name of the selected suites (seed, wheel); the cases \
             (any prefix of one selects it):\n  seed: t1-create, t1-getoverrun, mem-dense\n  \
             wheel: burst"
        );
        let err = check(Some(&["tempora", "kernal"]), None).unwrap_err();
        assert!(
            err.starts_with("--impl `kernal` is no implementation"),
            "{err}"
        );
        assert!(err.ends_with("\n  wheel: tempora, binary-heap"), "{err}");
        // A name must be whole: `--impl` does not take prefixes.
        assert!(check(Some(&["binary"]), None).is_err());
    }
}
