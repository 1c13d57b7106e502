//! Dates and times written as text (JSON Schema's `date`, `time` and `date-time`
//! formats) → the numbers Arrow stores: days since 1970-01-01, microseconds since
//! midnight, microseconds since the epoch.
//!
//! The forms producers write (`2026-03-04`, `12:34:56.789`, `2026-03-04T05:06:07.123456Z`
//! or with a `±HH:MM` offset) are read digit by digit here; anything else — other
//! separators, leap seconds, out-of-range fields, text that is no date at all — goes to
//! chrono, which accepts what it always accepted and words the error of a bad one. Both
//! paths give the same number for the same text (a test compares them).

use chrono::{DateTime, NaiveDate, NaiveTime};

/// Days from 0001-01-01 (chrono's day 1 of the common era) to 1970-01-01.
const EPOCH_DAYS_FROM_CE: i32 = 719_163;

/// A JSON Schema `date` (RFC 3339 `full-date`): days since 1970-01-01.
#[inline]
pub fn date(s: &str) -> Result<i32, String> {
    match fast_date(s.as_bytes()) {
        Some(days) => Ok(days),
        None => slow_date(s),
    }
}

/// A JSON Schema `time` (a trailing `Z` allowed): microseconds since midnight.
#[inline]
pub fn time(s: &str) -> Result<i64, String> {
    let s = s.trim_end_matches('Z');
    match fast_time(s.as_bytes()) {
        Some((micros, [])) => Ok(micros),
        _ => slow_time(s),
    }
}

/// A JSON Schema `date-time` (RFC 3339): microseconds since the epoch, UTC.
#[inline]
pub fn timestamp(s: &str) -> Result<i64, String> {
    match fast_timestamp(s.as_bytes()) {
        Some(micros) => Ok(micros),
        None => slow_timestamp(s),
    }
}

#[cold]
#[inline(never)]
fn slow_date(s: &str) -> Result<i32, String> {
    let d = NaiveDate::parse_from_str(s, "%Y-%m-%d").map_err(|e| format!("date {s:?}: {e}"))?;
    Ok(d.signed_duration_since(NaiveDate::default()).num_days() as i32)
}

#[cold]
#[inline(never)]
fn slow_time(s: &str) -> Result<i64, String> {
    let t = NaiveTime::parse_from_str(s, "%H:%M:%S%.f").map_err(|e| format!("time {s:?}: {e}"))?;
    Ok(t.signed_duration_since(NaiveTime::MIN).num_microseconds().unwrap_or(0))
}

#[cold]
#[inline(never)]
fn slow_timestamp(s: &str) -> Result<i64, String> {
    let t = DateTime::parse_from_rfc3339(s).map_err(|e| format!("date-time {s:?}: {e}"))?;
    Ok(t.timestamp_micros())
}

/// `n` ASCII digits as a number; `None` if one is not a digit.
#[inline]
fn digits(s: &[u8]) -> Option<u32> {
    s.iter().try_fold(0u32, |n, &b| b.is_ascii_digit().then(|| n * 10 + u32::from(b - b'0')))
}

/// `YYYY-MM-DD`, a real day: days since 1970-01-01.
#[inline]
fn fast_date(s: &[u8]) -> Option<i32> {
    let s: &[u8; 10] = s.try_into().ok()?;
    if s[4] != b'-' || s[7] != b'-' {
        return None;
    }
    let day = NaiveDate::from_ymd_opt(digits(&s[0..4])? as i32, digits(&s[5..7])?, digits(&s[8..10])?)?;
    Some(chrono::Datelike::num_days_from_ce(&day) - EPOCH_DAYS_FROM_CE)
}

/// `HH:MM:SS` and an optional fraction of up to nine digits (microseconds kept, the rest
/// cut), no leap second: microseconds since midnight, and the text after it.
#[inline]
fn fast_time(s: &[u8]) -> Option<(i64, &[u8])> {
    if s.len() < 8 || s[2] != b':' || s[5] != b':' {
        return None;
    }
    let (h, m, sec) = (digits(&s[0..2])?, digits(&s[3..5])?, digits(&s[6..8])?);
    if h > 23 || m > 59 || sec > 59 {
        return None;
    }
    let mut micros = i64::from(h * 3600 + m * 60 + sec) * 1_000_000;
    let mut rest = &s[8..];
    if let [b'.', after @ ..] = rest {
        let n = after.iter().take_while(|b| b.is_ascii_digit()).count();
        if n == 0 || n > 9 {
            return None;
        }
        let kept = n.min(6);
        micros += i64::from(digits(&after[..kept])? * 10u32.pow((6 - kept) as u32));
        rest = &after[n..];
    }
    Some((micros, rest))
}

/// `YYYY-MM-DDTHH:MM:SS[.f]` then `Z` or `±HH:MM`: microseconds since the epoch.
#[inline]
fn fast_timestamp(s: &[u8]) -> Option<i64> {
    if s.len() < 20 || s[10] != b'T' {
        return None;
    }
    let days = i64::from(fast_date(&s[..10])?);
    let (micros, zone) = fast_time(&s[11..])?;
    let offset_seconds = match zone {
        [b'Z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let (h, m) = (digits(&[*h1, *h2])?, digits(&[*m1, *m2])?);
            if h > 23 || m > 59 {
                return None;
            }
            let seconds = i64::from(h * 3600 + m * 60);
            if *sign == b'-' { -seconds } else { seconds }
        }
        _ => return None,
    };
    Some((days * 86_400 - offset_seconds) * 1_000_000 + micros)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast path and chrono agree on every text, accepted or refused.
    fn agree(s: &str) {
        if let Some(days) = fast_date(s.as_bytes()) {
            assert_eq!(Ok(days), slow_date(s), "date {s:?}");
        }
        let t = s.trim_end_matches('Z');
        if let Some((micros, [])) = fast_time(t.as_bytes()) {
            assert_eq!(Ok(micros), slow_time(t), "time {s:?}");
        }
        if let Some(micros) = fast_timestamp(s.as_bytes()) {
            assert_eq!(Ok(micros), slow_timestamp(s), "date-time {s:?}");
        }
    }

    #[test]
    fn the_fast_path_gives_chronos_numbers() {
        for s in [
            "2026-03-04",
            "1970-01-01",
            "1969-12-31",
            "0001-01-01",
            "9999-12-31",
            "2024-02-29",
            "12:34:56",
            "00:00:00.5",
            "23:59:59.999999999",
            "12:34:56.1234567Z",
            "2026-03-04T05:06:07Z",
            "2026-03-04T05:06:07.123456Z",
            "2026-03-04T05:06:07.1+05:30",
            "1969-12-31T23:59:59.999999-00:00",
            "1900-01-01T00:00:00.000001-23:59",
            "2026-03-04T23:59:59.9999999+23:59",
        ] {
            agree(s);
        }
        // Every day of four years around the epoch, and times through a day.
        let mut day = NaiveDate::from_ymd_opt(1968, 1, 1).unwrap();
        let mut second = 0u32;
        while chrono::Datelike::year(&day) < 1972 {
            let t = format!(
                "{:02}:{:02}:{:02}.{:06}",
                second / 3600,
                second / 60 % 60,
                second % 60,
                second * 7 % 1_000_000
            );
            agree(&day.to_string());
            agree(&format!("{day}T{t}Z"));
            agree(&format!("{day}T{t}-07:00"));
            day = day.succ_opt().unwrap();
            second = (second + 3_607) % 86_400;
        }
    }

    #[test]
    fn other_forms_go_to_chrono_and_errors_name_the_text() {
        // Forms the fast path leaves to chrono, which accepts them.
        assert_eq!(timestamp("2026-03-04 05:06:07Z"), timestamp("2026-03-04T05:06:07Z"));
        assert_eq!(timestamp("2026-03-04t05:06:07z"), timestamp("2026-03-04T05:06:07Z"));
        assert_eq!(time("12:34:56Z"), Ok(45_296_000_000));
        for (bad, kind) in [
            (date("2026-02-30").map(|_| ()), "date \"2026-02-30\""),
            (date("2026-3-4x").map(|_| ()), "date \"2026-3-4x\""),
            (time("24:00:00").map(|_| ()), "time \"24:00:00\""),
            (time("12:34:56.").map(|_| ()), "time \"12:34:56.\""),
            (timestamp("2026-03-04T05:06:07").map(|_| ()), "date-time \"2026-03-04T05:06:07\""),
            (timestamp("2026-03-04T05:06:07+24:00").map(|_| ()), "date-time \"2026-03-04T05:06:07+24:00\""),
            (timestamp("2026-13-04T05:06:07Z").map(|_| ()), "date-time \"2026-13-04T05:06:07Z\""),
        ] {
            let e = bad.unwrap_err();
            assert!(e.starts_with(kind), "{e}");
        }
    }
}
