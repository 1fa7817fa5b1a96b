//! What the test suites of every geoflash crate read from their environment,
//! in one place: how large the randomised tests are, and what happens when a
//! test's prerequisite (a filesystem that accepts `O_DIRECT`, io_uring, a
//! PostgreSQL server) is missing.
//!
//! - **Sizes.** `GEOFLASH_PROPTEST_CASES` sets the cases of every property
//!   test (default [`DEFAULT_PROPTEST_CASES`], 64) and `GEOFLASH_CRASH_CASES`
//!   the cases of every crash campaign, per tree kind (default
//!   [`DEFAULT_CRASH_CASES`], 200). `make test-long` raises both.
//! - **Missing prerequisites.** Outside CI a test whose prerequisite is
//!   missing is skipped and prints why on standard error; under CI (the
//!   environment variable `CI` set to anything but empty, `0` or `false`, as
//!   `.ci/run` and the usual CI services do) it fails instead, so that a
//!   green CI run means every test ran.
//!
//! Nothing here is used by the library itself; it exists with the
//! `test-support` feature (and in the crate's own tests) so that the
//! workbench and command-line crates' tests share it.

/// The variable holding the number of cases of each property test.
pub const PROPTEST_CASES_VAR: &str = "GEOFLASH_PROPTEST_CASES";
/// Property-test cases when [`PROPTEST_CASES_VAR`] is unset (the README's number).
pub const DEFAULT_PROPTEST_CASES: u32 = 64;
/// The variable holding the number of cases of each crash campaign (per tree kind).
pub const CRASH_CASES_VAR: &str = "GEOFLASH_CRASH_CASES";
/// Crash-campaign cases when [`CRASH_CASES_VAR`] is unset.
pub const DEFAULT_CRASH_CASES: u32 = 200;

/// A prerequisite of a test is missing and the run is under CI, where that is
/// a failure rather than a skip.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("CI={ci}: a test prerequisite is missing, which fails the run under CI: {what}")]
pub struct MissingPrerequisite {
    /// What is missing, and how to provide it.
    pub what: String,
    /// The value of `CI` that made this a failure.
    pub ci: String,
}

/// A count from environment variable `var`: `default` when it is unset;
/// when it is set but not a number, `default` with a warning on standard error.
pub fn count(var: &str, default: u32) -> u32 {
    count_from(var, std::env::var(var).ok().as_deref(), default)
}

/// [`count`] on the value `value` of `var` (testable without touching the environment).
fn count_from(var: &str, value: Option<&str>, default: u32) -> u32 {
    match value.map(str::trim) {
        None | Some("") => default,
        Some(v) => v.parse().unwrap_or_else(|_| {
            eprintln!("warning: {var}={v:?} is not a count; using {default}");
            default
        }),
    }
}

/// Cases of each property test (`GEOFLASH_PROPTEST_CASES`, default 64).
pub fn proptest_cases() -> u32 {
    count(PROPTEST_CASES_VAR, DEFAULT_PROPTEST_CASES)
}

/// Cases of each crash campaign, per tree kind (`GEOFLASH_CRASH_CASES`, default 200).
pub fn crash_cases() -> u64 {
    u64::from(count(CRASH_CASES_VAR, DEFAULT_CRASH_CASES))
}

/// The value of `CI` when the tests run under CI (set to anything but empty,
/// `0` or `false`), else `None`.
pub fn ci() -> Option<String> {
    ci_from(std::env::var("CI").ok().as_deref())
}

/// [`ci`] on the value `value` of `CI`.
fn ci_from(value: Option<&str>) -> Option<String> {
    let v = value?.trim();
    let off = v.is_empty() || v == "0" || v.eq_ignore_ascii_case("false");
    (!off).then(|| v.to_string())
}

/// Reports that a test's prerequisite is missing: under CI an error (the
/// caller fails the test with it); otherwise `Ok(())` after printing
/// `SKIPPED: what` on standard error (the caller then skips the test).
pub fn prerequisite_missing(what: &str) -> Result<(), MissingPrerequisite> {
    decide(ci(), what)
}

/// [`prerequisite_missing`] with the value of `CI` given.
fn decide(ci: Option<String>, what: &str) -> Result<(), MissingPrerequisite> {
    match ci {
        Some(ci) => Err(MissingPrerequisite {
            what: what.to_string(),
            ci,
        }),
        None => {
            eprintln!("SKIPPED: {what} (under CI=true this fails the run)");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_default_parse_and_survive_garbage() {
        assert_eq!(count_from("X", None, 64), 64);
        assert_eq!(count_from("X", Some(""), 64), 64);
        assert_eq!(count_from("X", Some(" 2000 "), 64), 2000);
        assert_eq!(count_from("X", Some("lots"), 64), 64);
        assert_eq!(count_from("X", Some("-1"), 7), 7);
    }

    #[test]
    fn ci_is_any_value_but_empty_zero_or_false() {
        assert_eq!(ci_from(None), None);
        for off in ["", "0", "false", "FALSE", " false "] {
            assert_eq!(ci_from(Some(off)), None, "{off:?}");
        }
        for on in ["true", "1", "yes", "True"] {
            assert_eq!(ci_from(Some(on)).as_deref(), Some(on), "{on:?}");
        }
    }

    #[test]
    fn a_missing_prerequisite_skips_outside_ci_and_fails_under_it() {
        assert_eq!(decide(None, "io_uring"), Ok(()));
        let e = decide(Some("true".into()), "io_uring").unwrap_err();
        assert_eq!(e.what, "io_uring");
        let msg = e.to_string();
        assert!(msg.contains("CI=true") && msg.contains("io_uring"), "{msg}");
    }
}
