//! The index's settings as command-line flags, made from the library's one
//! table of settings ([`IndexSpec::SETTINGS`]): a flag per setting
//! (`flush_percent` is `--flush-percent`, its aliases are aliases), its
//! help the setting's own, its value given to [`IndexSpec::set`] as
//! written. A new setting of the library is a flag here without a change
//! to this crate; the values are checked by the spec, which names the flag
//! at fault.
use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use geoflash::{IndexSpec, KeyStyle, SpecError};

/// The settings given as flags, by canonical key, in the table's order.
#[derive(Debug, Clone, Default)]
pub struct IndexFlags {
    given: Vec<(&'static str, String)>,
}

impl IndexFlags {
    /// The spec the flags give: each flag set as written (the product
    /// defaults stand for the rest), its messages spelling flags.
    pub fn spec(&self) -> Result<IndexSpec, SpecError> {
        let mut spec = IndexSpec::new(KeyStyle::Flag);
        for (key, value) in &self.given {
            spec.set(key, value)?;
        }
        Ok(spec)
    }
}

impl FromArgMatches for IndexFlags {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let given = IndexSpec::SETTINGS
            .iter()
            .filter_map(|s| Some((s.key, matches.get_one::<String>(s.key)?.clone())))
            .collect();
        Ok(IndexFlags { given })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = IndexFlags::from_arg_matches(matches)?;
        Ok(())
    }
}

impl Args for IndexFlags {
    fn augment_args(cmd: Command) -> Command {
        IndexSpec::SETTINGS.iter().fold(cmd, |cmd, s| {
            // `--flush-percent` without its dashes, as clap takes a long name.
            let flag = |name: &str| {
                let spelled = KeyStyle::Flag.spell(name);
                spelled.trim_start_matches('-').to_string()
            };
            let mut arg = Arg::new(s.key)
                .long(flag(s.key))
                .value_name(s.value_name)
                .help(s.help(KeyStyle::Flag).trim_end_matches('.').to_string())
                .action(ArgAction::Set);
            for alias in s.aliases {
                arg = arg.visible_alias(flag(alias));
            }
            if s.switch {
                arg = arg.num_args(0..=1).default_missing_value("on");
            }
            cmd.arg(arg)
        })
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        IndexFlags::augment_args(cmd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        flags: IndexFlags,
    }

    fn parse(args: &[&str]) -> IndexFlags {
        Cli::try_parse_from(std::iter::once("geoflash").chain(args.iter().copied()))
            .unwrap()
            .flags
    }

    #[test]
    fn every_setting_is_a_flag_and_the_spec_gets_what_was_written() {
        let given = parse(&[
            "--flush-percent",
            "10",
            "--reinsert",
            "20",
            "--kind",
            "rstar",
        ]);
        let spec = given.spec().unwrap();
        assert_eq!(spec.get("flush_percent"), Some("10"));
        assert_eq!(spec.get("reinsert_percent"), Some("20"));
        assert_eq!(spec.get("kind"), Some("rstar"));
        assert_eq!(spec.get("store"), None, "a flag not given is not set");
        for s in IndexSpec::SETTINGS {
            let flag = KeyStyle::Flag.spell(s.key);
            let value = if s.switch { "on" } else { "x" };
            let given = parse(&[&flag, value]);
            assert_eq!(given.given, vec![(s.key, value.to_string())], "{flag}");
        }
    }

    #[test]
    fn a_switch_given_alone_is_on_and_a_bad_value_names_its_flag() {
        let spec = parse(&["--fortree-original-root-counter", "--kind", "fortree"])
            .spec()
            .unwrap();
        assert_eq!(spec.get("fortree_original_root_counter"), Some("on"));
        let e = parse(&["--flush-percent", "lots"]).spec().unwrap_err();
        assert_eq!(e.key, Some("flush_percent"));
        assert!(e.to_string().contains("--flush-percent"), "{e}");
    }
}
