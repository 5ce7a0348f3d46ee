//! Numbers every JSON reader keeps exact (I-JSON, RFC 7493). jq, JavaScript
//! and most JSON libraries read a number as an IEEE double, which holds every
//! integer up to 2^53 in magnitude and rounds the rest. A stream passed
//! through such a tool must come back unchanged, so an integer that the input
//! data controls (an object id, a header field) is written as a number when
//! it fits and as a decimal string when it does not. Readers take both forms
//! and refuse a bare number beyond 2^53: it may already have been rounded.

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serializer};
use std::fmt;

/// The largest magnitude every JSON reader holds exactly: 2^53.
pub const MAX_EXACT: i64 = 1 << 53;

/// True when `n` survives a round trip through an IEEE double.
pub fn is_exact(n: i64) -> bool {
    n.unsigned_abs() <= MAX_EXACT as u64
}

/// `#[serde(with = "ijson::int")]` for an `i64`.
pub mod int {
    use super::*;

    /// Write `n` as a number, or as a string beyond 2^53.
    pub fn serialize<S: Serializer>(n: &i64, s: S) -> Result<S::Ok, S::Error> {
        if is_exact(*n) {
            s.serialize_i64(*n)
        } else {
            s.collect_str(n)
        }
    }

    /// Read a number up to 2^53, or a string holding any `i64`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        d.deserialize_any(IntVisitor)
    }
}

/// `#[serde(with = "ijson::opt_int")]` for an `Option<i64>` (with
/// `default` and `skip_serializing_if = "Option::is_none"`).
pub mod opt_int {
    use super::*;

    /// Write the value as [`int`] does.
    pub fn serialize<S: Serializer>(n: &Option<i64>, s: S) -> Result<S::Ok, S::Error> {
        match n {
            Some(n) => int::serialize(n, s),
            None => s.serialize_none(),
        }
    }

    /// Read the value as [`int`] does; `null` is `None`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
        #[derive(Deserialize)]
        struct Wrap(#[serde(with = "int")] i64);
        Ok(Option::<Wrap>::deserialize(d)?.map(|w| w.0))
    }
}

struct IntVisitor;

fn too_large<E: de::Error>(shown: impl fmt::Display) -> E {
    E::custom(format!(
        "integer {shown} is beyond 2^53 and may have been rounded by a JSON tool; \
         pbf-stream(5) writes such integers as strings"
    ))
}

impl Visitor<'_> for IntVisitor {
    type Value = i64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an integer of at most 2^53 in magnitude, or a string holding a 64-bit integer")
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<i64, E> {
        is_exact(n).then_some(n).ok_or_else(|| too_large(n))
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<i64, E> {
        let n = i64::try_from(n).map_err(|_| too_large(n))?;
        self.visit_i64(n)
    }

    /// A tool that rewrites numbers may print `5.0` for 5: accept integral
    /// doubles within the exact range.
    fn visit_f64<E: de::Error>(self, x: f64) -> Result<i64, E> {
        if x.fract() == 0.0 && x.abs() <= MAX_EXACT as f64 {
            Ok(x as i64)
        } else if x.fract() == 0.0 {
            Err(too_large(x))
        } else {
            Err(E::custom(format!("{x} is not an integer")))
        }
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<i64, E> {
        s.parse()
            .map_err(|_| E::custom(format!("\"{s}\" is not a 64-bit integer")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Id {
        #[serde(with = "int")]
        id: i64,
        #[serde(default, with = "opt_int", skip_serializing_if = "Option::is_none")]
        seq: Option<i64>,
    }

    fn json(id: i64, seq: Option<i64>) -> String {
        serde_json::to_string(&Id { id, seq }).expect("serialize")
    }

    fn parse(s: &str) -> Result<Id, String> {
        serde_json::from_str(s).map_err(|e| e.to_string())
    }

    #[test]
    fn small_numbers_stay_numbers_large_ones_become_strings() {
        assert_eq!(json(-5, None), r#"{"id":-5}"#);
        assert_eq!(
            json(MAX_EXACT, Some(-MAX_EXACT)),
            format!(r#"{{"id":{MAX_EXACT},"seq":-{MAX_EXACT}}}"#)
        );
        assert_eq!(json(MAX_EXACT + 1, None), r#"{"id":"9007199254740993"}"#);
        assert_eq!(
            json(i64::MIN, Some(i64::MAX)),
            r#"{"id":"-9223372036854775808","seq":"9223372036854775807"}"#
        );
    }

    #[test]
    fn both_forms_read_back_exactly() {
        for n in [
            0,
            1,
            -1,
            MAX_EXACT,
            -MAX_EXACT,
            MAX_EXACT + 1,
            i64::MIN,
            i64::MAX,
        ] {
            assert_eq!(
                parse(&json(n, Some(n))),
                Ok(Id {
                    id: n,
                    seq: Some(n)
                })
            );
        }
        assert_eq!(
            parse(r#"{"id":"42","seq":null}"#),
            Ok(Id { id: 42, seq: None })
        );
        assert_eq!(parse(r#"{"id":42.0}"#), Ok(Id { id: 42, seq: None }));
    }

    #[test]
    fn bare_numbers_beyond_two_to_the_53_are_refused() {
        let e = parse(r#"{"id":9007199254740993}"#).expect_err("rounded");
        assert!(e.contains("beyond 2^53"), "{e}");
        let e = parse(r#"{"id":1.8e18}"#).expect_err("rounded");
        assert!(e.contains("beyond 2^53"), "{e}");
        assert!(parse(r#"{"id":"x"}"#).is_err());
        assert!(parse(r#"{"id":1.5}"#).is_err());
    }
}
