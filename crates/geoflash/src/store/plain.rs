//! PlainStore (in progress).
