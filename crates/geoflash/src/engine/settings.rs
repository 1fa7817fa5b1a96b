//! The table of an index's settings: every key [`IndexSpec::set`] takes,
//! with its aliases, how its value is written and what it does.
//!
//! The one list the front ends share: the command line makes a flag of
//! each row (`--flush-percent`, its help from [`Setting::help`]), the
//! workbench's `[[index]]` keys and Python's keyword arguments are the same
//! names. A new setting is a row here and its parse and check in
//! [`IndexSpec`]; no front end changes.
//!
//! [`IndexSpec`]: super::IndexSpec
//! [`IndexSpec::set`]: super::IndexSpec::set
use super::KeyStyle;

/// One setting of a new index: a row of
/// [`IndexSpec::SETTINGS`](super::IndexSpec::SETTINGS), the one list of
/// settings the front ends share (the command line makes a flag of each
/// row, the workbench's keys and Python's keyword arguments are the same
/// names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// The canonical key: `flush_percent`.
    pub key: &'static str,
    /// Other names the key is taken under (`reinsert` for
    /// `reinsert_percent`).
    pub aliases: &'static [&'static str],
    /// How a value is written, for help texts: `PERCENT`, `SIZE`.
    pub value_name: &'static str,
    /// An on/off setting that a flag given without a value turns on
    /// (`--fortree-original-root-counter`).
    pub switch: bool,
    /// What the setting does and its default; other settings are named as
    /// `{key}`, spelled by [`Setting::help`] as the front end spells them.
    text: &'static str,
}

impl Setting {
    /// What the setting does, with the settings it names spelled in
    /// `style` (`{group_commit}` becomes `--group-commit` on the command
    /// line).
    pub fn help(&self, style: KeyStyle) -> String {
        let mut out = String::with_capacity(self.text.len());
        let mut rest = self.text;
        while let Some(open) = rest.find('{') {
            let Some(close) = rest[open..].find('}').map(|c| open + c) else {
                break;
            };
            out.push_str(&rest[..open]);
            out.push_str(&style.spell(&rest[open + 1..close]));
            rest = &rest[close + 1..];
        }
        out.push_str(rest);
        out
    }

    /// Whether `name` is this setting's key or one of its aliases.
    pub fn is_named(&self, name: &str) -> bool {
        self.key == name || self.aliases.contains(&name)
    }
}

/// A row of [`SETTINGS`].
const fn setting(key: &'static str, value_name: &'static str, text: &'static str) -> Setting {
    Setting {
        key,
        aliases: &[],
        value_name,
        switch: false,
        text,
    }
}

/// Every setting of a new index, in the order help texts list them.
pub const SETTINGS: &[Setting] = &[
    setting(
        "kind",
        "KIND",
        "rstar (the default), rtree, hilbert, shrtree (an R*-tree whose internal nodes a \
         hybrid device keeps on its fast tier), fortree (the FOR-tree: overflow nodes instead \
         of splits, merge-back; on the plain store with its own buffer), xbr (the xBR+-tree of \
         points), or a grid file of points: grid, gffm, lbgrid or hgrid (its own buffers, no \
         node store; built by insertion).",
    ),
    setting(
        "split",
        "SPLIT",
        "Split of the R-tree: linear, quadratic (the default) or exponential.",
    ),
    setting("page_size", "BYTES", "Page (node) size (default 4096)."),
    setting(
        "max_entries",
        "M",
        "Maximum entries per node, M (default: as many as a page holds).",
    ),
    setting(
        "min_entries",
        "m",
        "Minimum entries per node, m ≥ 2 (default: half of M, rounded up; or give {min_fill}).",
    ),
    setting(
        "min_fill",
        "FILL",
        "Minimum fill: a fraction of M in (0, 0.5] (e.g. 0.4) or an entry count m ≥ 2.",
    ),
    Setting {
        aliases: &["reinsert"],
        ..setting(
            "reinsert_percent",
            "PERCENT",
            "R*-tree forced-reinsertion percentage (default 10; the paper's 30 builds by insertion about 1.3-1.6x slower, and windows then read up to 3 % fewer nodes and kNN 5-9 % fewer; 0 builds about 1.3-1.6x faster still, and windows and kNN then read up to 9 % more nodes than with 10).",
        )
    },
    setting(
        "hilbert_domain",
        "MINX,MINY,MAXX,MAXY",
        "Hilbert R-tree: the extent mapped onto the curve (default: the input's extent; \
         later objects outside it are clamped to its border cells).",
    ),
    setting(
        "store",
        "STORE",
        "Node store: efind or fast (the two flash-aware frameworks, crash-safe with their \
         log), or plain (the disk-based baseline of the papers). Default efind; plain for \
         the FOR-tree (the only store it takes).",
    ),
    setting(
        "buffer",
        "SIZE",
        "Memory budget of the store (0 only for the plain store: no buffer, written through \
         at each operation's end; the papers' experiments use 512KiB). The default is an \
         eighth of the machine's memory (or of the control group's limit), at least 256MiB \
         and at most 1GiB.",
    ),
    setting(
        "buffer_policy",
        "POLICY",
        "Replacement policy of the buffer (plain store) or the read buffer (efind): lru, \
         hlru, s2q, 2q or arc (default s2q); for efind with temporal control on also \
         s2q-festival, FESTIval's S2Q (an LRU of pages, cached at their second read while \
         their id is in temporal control's read queue).",
    ),
    setting(
        "device",
        "SPEC",
        "Device spec (file = direct I/O, file?direct=false, file:PATH?…, mem:, flashsim:…, \
         hddsim:…; default file?direct=false, through the OS page cache).",
    ),
    setting(
        "placement",
        "PLACEMENT",
        "Which nodes the store hints to the fast tier of a `hybrid:` device: none (the \
         default), internal-fast (the sHR-tree) or fast-from-level=N. Every store hints its \
         node writes; the eFIND and FAST logs stay on the slow tier.",
    ),
    setting(
        "journal",
        "on|off",
        "on (the default): the pages of an index written in place (the plain store, the \
         FOR-tree, the xBR+-tree, grid files) on its file are protected by a rollback \
         journal (journal.dat), so a crash returns to the last checkpoint. off: the papers' \
         in-place mode, for reproductions (not crash-safe; refuses acknowledgements).",
    ),
    setting(
        "crs",
        "CRS",
        "CRS of the coordinates (recorded in the manifest; default unknown).",
    ),
    setting(
        "units",
        "UNITS",
        "Units of the coordinates (kNN distances are in these units; default unit).",
    ),
    setting(
        "durability",
        "MODE",
        "eFIND and FAST: when operations become durable: sync (each one), group (every N \
         operations or T ms, see {group_commit}; the default) or none (the papers' mode). \
         With the default, a batch (the input of build, insert and delete without \
         acknowledgements) is durable when it ends (one checkpoint, as one SQL transaction); \
         sync and group:N,T are kept operation by operation.",
    ),
    setting(
        "group_commit",
        "N,T",
        "eFIND and FAST: group commit as N,T: sync every N operations or when the oldest \
         unsynced one is T milliseconds old (implies {durability} group).",
    ),
    setting(
        "flush_unit",
        "PAGES",
        "eFIND and FAST: pages per flushing unit (eFIND's s; FAST's unit, default 5).",
    ),
    setting(
        "log_capacity",
        "SIZE",
        "eFIND and FAST: bytes of records the log holds before compaction (default: 10MiB \
         for the per-change format, else the larger of 10MiB and 4 x the buffer, and at \
         least 64MiB for a log in its own file, log.dat on `file`).",
    ),
    setting(
        "checkpoint_interval",
        "TIME",
        "eFIND and FAST: a commit or group commit this long after the last checkpoint \
         checkpoints (after an operation: when the next one begins; bounds what a crash \
         leaves to replay by time): 90s, 5min, 500ms, a number of seconds, or off \
         (default 5min).",
    ),
    setting(
        "log_format",
        "FORMAT",
        "eFIND and FAST: log format, compact (the default: first-image flushes, and eFIND \
         logs each group commit as the net changes of its pages), first-image (a page image \
         only at a page's first flush after a compaction, one log sync per batch of \
         flushes, records per operation) or per-change (the papers': a page image and two \
         syncs at every flush).",
    ),
    setting(
        "flush_percent",
        "PERCENT",
        "eFIND: p, the percentage of oldest buffered pages a flush considers.",
    ),
    setting(
        "flush_policy",
        "POLICY",
        "eFIND: flushing policy m, mh, mha or mhao.",
    ),
    setting(
        "read_buffer_percent",
        "PERCENT",
        "eFIND: share of the buffer given to the read buffer, in percent.",
    ),
    setting(
        "read_buffer_mode",
        "MODE",
        "eFIND: adaptive (default: the read buffer takes what the write buffer leaves of the \
         budget, decoded views answer reads) or fixed (the paper's share).",
    ),
    setting(
        "temporal_control",
        "on|off",
        "eFIND: temporal control on or off.",
    ),
    setting(
        "temporal_queues",
        "PAGES",
        "eFIND: the length of temporal control's queues of the pages last read and last \
         written (RQ and WQ; default 64).",
    ),
    Setting {
        aliases: &["policy"],
        ..setting(
            "fast_policy",
            "POLICY",
            "FAST: flushing policy fast (most updates), fast-star (most updates, least \
             recently updated; the default), flush-all or random.",
        )
    },
    setting(
        "seed",
        "N",
        "FAST: the seed of the random flushing policy (default 24301).",
    ),
    setting(
        "fortree_write_read_ratio",
        "RATIO",
        "FOR-tree: C_w / C_r, the cost of a page write over a page read in the merge-back \
         threshold (default 10).",
    ),
    Setting {
        switch: true,
        ..setting(
            "fortree_original_root_counter",
            "on|off",
            "FOR-tree: reproduce the original root counter (insertions never count the unit \
             they insert into, so a leaf root never merges back: the seeds' failure). Off by \
             default: the fix counts it.",
        )
    },
    setting(
        "grid_queries",
        "plain|batched",
        "Grid files: queries plain (one page at a time) or batched (the default: the batch \
         algorithms).",
    ),
    setting(
        "grid_dir_share",
        "SHARE",
        "Grid files: share of the buffer given to directory pages (default 0.75).",
    ),
    setting(
        "grid_cold_pages",
        "PAGES",
        "Grid files: pages of each cold list, the size of every batch write (default: an \
         eighth of the buffer, at most 128; 1 for the kind grid).",
    ),
    setting(
        "grid_s",
        "S",
        "H-Grid: the selectivity constant s of its hot-region detector (default 1.5).",
    ),
    setting(
        "grid_special",
        "on|off",
        "H-Grid: every sub-directory on the fast tier (on or off; default off).",
    ),
];

/// The row of key or alias `name` (`None`: no such setting).
pub fn setting_named(name: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.is_named(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_spells_the_settings_it_names_as_the_front_end_does() {
        let group = setting_named("group_commit").unwrap();
        assert!(group
            .help(KeyStyle::Flag)
            .contains("(implies --durability group)"));
        assert!(group
            .help(KeyStyle::Key)
            .contains("(implies durability group)"));
        for s in SETTINGS {
            for style in [KeyStyle::Key, KeyStyle::Flag] {
                let help = s.help(style);
                assert!(!help.contains(['{', '}']), "{}: {help}", s.key);
            }
        }
    }

    #[test]
    fn every_name_belongs_to_one_setting() {
        let mut names: Vec<&str> = SETTINGS
            .iter()
            .flat_map(|s| std::iter::once(s.key).chain(s.aliases.iter().copied()))
            .collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "a name is used twice");
        assert_eq!(setting_named("reinsert").unwrap().key, "reinsert_percent");
        assert_eq!(setting_named("policy").unwrap().key, "fast_policy");
        assert!(setting_named("colour").is_none());
    }
}
