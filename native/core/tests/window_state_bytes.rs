//! `window_state::fold` and `panes::on_time_pane` on stored bytes nobody checked:
//! arbitrary bytes and damaged valid states never panic; what `fold` writes is a state
//! it reads back, with the group counted once, and a pane is JSON.

use millrace_core::panes::{self, AfterPane, Fired};
use millrace_core::window_state::{self, Aggregate, Contribution, Outcome, Part};
use proptest::prelude::*;
use serde_json::Value;

fn count_sum() -> Aggregate {
    Aggregate {
        parts: vec![Part::Count, Part::Sum],
        combined: true,
    }
}

fn written(outcome: &Outcome) -> Option<&[u8]> {
    match outcome {
        Outcome::Folded(state) | Outcome::Opened(state) => Some(state),
        Outcome::Leave | Outcome::Python => None,
    }
}

fn valid_state() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<i32>(),
        any::<i32>(),
        any::<bool>(),
        0..5i64,
        0..1000i64,
        proptest::option::of(any::<i64>()),
    )
        .prop_map(|(count, sum, fired, pane, since, early_at)| {
            let early = early_at.map_or(String::new(), |t| format!(r#""early_at":{t},"#));
            format!(
                r#"{{"acc":[{count},{sum}],{early}"fired":{fired},"pane":{pane},"since":{since}}}"#
            )
            .into_bytes()
        })
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(raw in proptest::collection::vec(any::<u8>(), 0..64)) {
        let group = Contribution { count: 1, values: Some((5, 5, 5)) };
        let _ = window_state::fold(Some(&raw), &count_sum(), group, Some(3));
    }

    #[test]
    fn a_pane_from_any_bytes_is_json_or_no_pane(
        raw in proptest::collection::vec(any::<u8>(), 0..64),
        key in proptest::collection::vec(any::<u8>(), 0..8),
        start in any::<i64>(),
    ) {
        let names = ["count".to_string(), "sum".to_string()];
        let fired = panes::on_time_pane(Some(&raw), &key, (start, start), &count_sum(), &names, AfterPane::Accumulate);
        if let Fired::Pane(pane, kept) = fired {
            prop_assert!(serde_json::from_slice::<Value>(&pane).is_ok());
            prop_assert!(serde_json::from_slice::<Value>(&kept.unwrap_or_default()).is_ok());
        }
    }

    #[test]
    fn a_pane_from_a_damaged_state_is_json_or_no_pane(
        raw in valid_state(), at in any::<prop::sample::Index>(), byte in any::<u8>()
    ) {
        let mut raw = raw;
        let i = at.index(raw.len());
        raw[i] = byte;
        let names = ["count".to_string(), "sum".to_string()];
        let fired = panes::on_time_pane(Some(&raw), "k\u{e9}".as_bytes(), (0, 10), &count_sum(), &names, AfterPane::Forget);
        if let Fired::Pane(pane, _) = fired {
            let value: Value = serde_json::from_slice(&pane).unwrap();
            prop_assert_eq!(&value["key"], "k\u{e9}");
            prop_assert!(pane.is_ascii());
        }
    }

    #[test]
    fn a_damaged_state_never_panics(raw in valid_state(), at in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut raw = raw;
        let i = at.index(raw.len());
        raw[i] = byte;
        let group = Contribution { count: 2, values: Some((-7, -9, 2)) };
        let _ = window_state::fold(Some(&raw), &count_sum(), group, None);
    }

    #[test]
    fn a_folded_state_is_the_stored_one_with_the_group_added(
        raw in valid_state(), count in 1..100i64, sum in any::<i32>()
    ) {
        let group = Contribution { count, values: Some((i64::from(sum), 0, 0)) };
        let before: Value = serde_json::from_slice(&raw).unwrap();
        let outcome = window_state::fold(Some(&raw), &count_sum(), group, None);
        if before["fired"] == Value::Bool(true) {
            prop_assert_eq!(outcome, Outcome::Leave);
            return Ok(());
        }
        let state = written(&outcome).expect("a valid open state folds");
        let after: Value = serde_json::from_slice(state).unwrap();
        let n = |v: &Value| v.as_i64().unwrap();
        prop_assert_eq!(n(&after["acc"][0]), n(&before["acc"][0]) + count);
        prop_assert_eq!(n(&after["acc"][1]), n(&before["acc"][1]) + i64::from(sum));
        prop_assert_eq!(n(&after["since"]), n(&before["since"]) + count);
        prop_assert_eq!(&after["pane"], &before["pane"]);
        prop_assert_eq!(&after["early_at"], &before["early_at"]);
        // Sorted keys, no spaces: the bytes msgspec writes for the same state.
        let text = String::from_utf8(state.to_vec()).unwrap();
        let at: Vec<usize> = ["\"acc\":", "\"early_at\":", "\"fired\":", "\"pane\":", "\"since\":"]
            .iter()
            .filter_map(|key| text.find(key))
            .collect();
        prop_assert!(at.windows(2).all(|w| w[0] < w[1]), "{}", text);
        prop_assert!(!text.contains(' '));
    }
}
