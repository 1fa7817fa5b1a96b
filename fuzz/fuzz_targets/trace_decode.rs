//! Feeds arbitrary bytes to the I/O trace decoder (`geoflash trace replay`):
//! nothing may panic, and a trace that decodes re-encodes to a trace that
//! decodes to the same operations.
#![no_main]

use geoflash::storage::trace::Trace;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(trace) = Trace::decode(data) {
        let bytes = trace.encode().expect("a decoded trace re-encodes");
        let again = Trace::decode(&bytes).expect("a re-encoded trace decodes");
        assert_eq!(again, trace, "a trace changed through encode and decode");
    }
});
