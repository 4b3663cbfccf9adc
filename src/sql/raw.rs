//! A client's statement text as the bytes it sent. Statements are read as Rust strings, but
//! a client may send bytes that are no UTF-8: binary data in a literal (`_binary'<FF>'`, as
//! PyMySQL escapes bytes), or text in its own character set (latin1 `é` is `E9`). Each such
//! byte is carried as one character of a range of Unicode's private use plane 16
//! (U+10FF00 + byte), and every text the proxy sends to a node, or reads a value from, is
//! turned back into the client's bytes. A client text that holds a character of that range
//! itself is refused: it could not be told from a carried byte.

use std::borrow::Cow;

/// The first character of the range that carries raw bytes.
const BASE: u32 = 0x10_FF00;

/// Why a text that holds a carried character itself is refused.
const RESERVED: &str =
    "a statement holding a character of U+10FF00-U+10FFFF, which shardproxy reserves";

/// The text of `bytes`: valid UTF-8 as it is, every other byte carried in the range.
/// `Err` for a valid text that holds a character of the range.
pub fn decode(bytes: &[u8]) -> Result<Cow<'_, str>, String> {
    if let Ok(s) = std::str::from_utf8(bytes) {
        // A carried character is 4 bytes from F4: most texts have no F4 at all.
        if memchr::memchr(0xF4, bytes).is_some() && s.chars().any(carried) {
            return Err(RESERVED.into());
        }
        return Ok(Cow::Borrowed(s));
    }
    let mut out = String::with_capacity(bytes.len() + 8);
    for chunk in bytes.utf8_chunks() {
        if chunk.valid().chars().any(carried) {
            return Err(RESERVED.into());
        }
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            out.push(char::from_u32(BASE + u32::from(*b)).unwrap_or('\u{FFFD}'));
        }
    }
    Ok(Cow::Owned(out))
}

fn carried(c: char) -> bool {
    (BASE..=BASE + 0xFF).contains(&u32::from(c))
}

/// The bytes a text stands for: carried characters back to the bytes they carry.
pub fn encode(s: &str) -> Cow<'_, [u8]> {
    // A carried character is 4 bytes in UTF-8 starting with F4: most texts have none.
    if memchr::memchr(0xF4, s.as_bytes()).is_none() {
        return Cow::Borrowed(s.as_bytes());
    }
    let mut out = Vec::with_capacity(s.len());
    let mut buf = [0u8; 4];
    for c in s.chars() {
        if carried(c) {
            out.push((u32::from(c) - BASE) as u8);
        } else {
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
    }
    Cow::Owned(out)
}

/// [`encode`] into an owned vector.
pub fn bytes(s: &str) -> Vec<u8> {
    encode(s).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_that_are_no_utf8_survive_the_round_trip() {
        for b in [
            &b"SELECT _binary'\xff\xfe' FROM t"[..],
            b"SELECT '\xe9t\xe9'",
            b"\xf0\x9d\x84",
            "plain é 𝄞".as_bytes(),
            b"",
        ] {
            let text = decode(b).unwrap();
            assert_eq!(encode(&text).as_ref(), b, "{text:?}");
        }
        assert!(matches!(decode(b"SELECT 1"), Ok(Cow::Borrowed(_))));
        assert!(decode("x \u{10FF41}".as_bytes()).is_err());
        assert!(decode(b"\xff x \xf4\x8f\xbd\x81").is_err());
    }
}
