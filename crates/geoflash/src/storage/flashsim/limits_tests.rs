//! Review tests: bad parameters that must be errors (never panics or
//! silently wrapped clocks), and stress at the edge of the validated
//! over-provisioning.
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::storage::PageDevice;

/// Channels × dies × planes beyond `u64` must be a configuration error, not
/// an arithmetic-overflow panic in `planes()`.
#[test]
fn huge_parallel_geometry_is_an_error() {
    let max = u32::MAX;
    let params = format!("channels={max}&dies={max}&planes={max}");
    let cfg = FlashSimConfig::from_params(&params).unwrap();
    let r = std::panic::catch_unwind(|| cfg.validate());
    assert!(matches!(r, Ok(Err(_))), "validate panicked or accepted it");
    let r = std::panic::catch_unwind(|| FlashSim::from_params(&params, 2048).map(drop));
    assert!(matches!(r, Ok(Err(_))), "new panicked or accepted it");
}

/// Latencies given in nanoseconds are bounded like those given in
/// microseconds: an absurd one is an error, not an overflow of the clock.
#[test]
fn huge_latencies_are_errors() {
    for ftl in ["page", "flashdbsim"] {
        for key in ["read_ns", "program_ns", "erase_ns"] {
            let params = format!("ftl={ftl}&{key}={}", u64::MAX);
            let r = FlashSimConfig::from_params(&params).and_then(|c| c.validate());
            assert!(r.is_err(), "{params} accepted");
        }
        let params = format!("ftl={ftl}&transfer_ns_per_byte=1e300");
        let r = FlashSimConfig::from_params(&params).and_then(|c| c.validate());
        assert!(r.is_err(), "{params} accepted");
    }
}

/// The largest accepted latencies never wrap the simulated clock: it
/// saturates rather than panicking (debug) or wrapping (release).
#[test]
fn the_clock_saturates_at_the_largest_accepted_latencies() {
    for ftl in ["page", "flashdbsim"] {
        let d = FlashSim::from_params(
            &format!(
                "ftl={ftl}&page_size=512&ppb=4&blocks=64&op=0.3&read_us=1e12&program_us=1e12&erase_us=1e12"
            ),
            512,
        )
        .unwrap();
        let page = vec![1u8; 512];
        let mut buf = vec![0u8; 512];
        for i in 0..40_000u64 {
            d.write(i % 50, &page).unwrap();
            d.read(i % 50, &mut buf).unwrap();
        }
        let t = d.stats().sim.unwrap().sim_time_ns;
        assert_eq!(t, u64::MAX, "{ftl}");
    }
}

/// At the smallest over-provisioning `validate` accepts, filling every
/// logical page and overwriting at random never runs out of space, for
/// several plane counts and GC thresholds.
#[test]
fn tight_devices_never_report_a_spurious_device_full() {
    let shapes = [
        (1, 1, 2, 4),
        (1, 1, 5, 4),
        (2, 1, 3, 8),
        (2, 2, 2, 4),
        (4, 1, 4, 4),
        (3, 1, 2, 8),
    ];
    for ((channels, planes, gc_threshold, ppb), gc) in shapes
        .into_iter()
        .flat_map(|s| [(s, "greedy"), (s, "cost-benefit")])
    {
        let nplanes = channels * planes;
        // Smallest op that validates for 64 blocks.
        let mut ok = None;
        for k in 1..200 {
            let op = f64::from(k) / 200.0;
            let params = format!(
                "page_size=512&ppb={ppb}&blocks=64&channels={channels}&planes={planes}\
                 &gc_threshold={gc_threshold}&op={op}&wl_threshold=2&gc={gc}"
            );
            if FlashSimConfig::from_params(&params)
                .and_then(|c| c.validate())
                .is_ok()
            {
                ok = Some(params);
                break;
            }
        }
        let params = ok.expect("some op validates");
        let d = FlashSim::from_params(&params, 512).unwrap();
        let cap = d.capacity();
        let page = vec![3u8; 512];
        for h in 0..cap {
            d.write(h, &page)
                .unwrap_or_else(|e| panic!("{params} ({nplanes} planes): fill {h}: {e}"));
        }
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for i in 0..20 * cap {
            let h = rng.gen_range(0..cap);
            d.write(h, &page)
                .unwrap_or_else(|e| panic!("{params}: overwrite {i}: {e}"));
        }
        d.check_invariants().unwrap();
    }
}
