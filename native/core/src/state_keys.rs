//! Where a user key's state lives in the state column family: `engine/_scope.py`'s
//! `state_key`, `hash(key) u64 BE | len(key) u32 BE | key | tag`. The hash leads so
//! that a range of the 64-bit key-hash space (a key interval, or either half of one
//! being split) is one range of store keys.

use xxhash_rust::xxh3::xxh3_64;

/// `key`'s state `tag` (UTF-8); with an empty tag, the prefix of all of `key`'s state.
pub fn state_key(key: &[u8], tag: &[u8]) -> Vec<u8> {
    let mut out = vec![0; state_key_len(key, tag)];
    write_state_key(&mut out, key, tag);
    out
}

/// The length of `key`'s state key of `tag`.
pub fn state_key_len(key: &[u8], tag: &[u8]) -> usize {
    12 + key.len() + tag.len()
}

/// [`state_key`] into `out`, which is [`state_key_len`] long.
pub fn write_state_key(out: &mut [u8], key: &[u8], tag: &[u8]) {
    let (hash, rest) = out.split_at_mut(8);
    hash.copy_from_slice(&xxh3_64(key).to_be_bytes());
    let (length, rest) = rest.split_at_mut(4);
    // A key of 4 GiB or more cannot be a record's key (the wire refuses it long before).
    length.copy_from_slice(&(key.len() as u32).to_be_bytes());
    let (own, rest) = rest.split_at_mut(key.len());
    own.copy_from_slice(key);
    rest.copy_from_slice(tag);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_hash_leads_then_the_length_the_key_and_the_tag() {
        let made = state_key(b"abc", b"w:1/2");
        assert_eq!(&made[..8], &xxh3_64(b"abc").to_be_bytes());
        assert_eq!(&made[8..12], &[0, 0, 0, 3]);
        assert_eq!(&made[12..], b"abcw:1/2");
    }

    proptest! {
        #[test]
        fn a_key_with_its_tag_extends_its_prefix(key: Vec<u8>, tag: String) {
            let prefix = state_key(&key, b"");
            let made = state_key(&key, tag.as_bytes());
            prop_assert!(made.starts_with(&prefix));
            prop_assert_eq!(made.len(), 12 + key.len() + tag.len());
        }
    }
}
