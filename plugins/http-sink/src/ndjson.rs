//! The request body (one record's JSON per line) and what a response means.

/// How much of an error response's body goes into the error message.
pub const ERROR_EXCERPT_BYTES: usize = 300;

/// NDJSON: each record's JSON on a line of its own, each line ending in `\n`. The records'
/// JSON is compact already; a raw line break in one (only possible as insignificant
/// whitespace in valid JSON) is turned into a space so it cannot split the record.
pub fn body<'a>(records: impl IntoIterator<Item = &'a str>) -> Vec<u8> {
    let mut out = Vec::new();
    for json in records {
        let json = json.trim();
        if json.contains(['\n', '\r']) {
            out.extend(json.replace(['\n', '\r'], " ").into_bytes());
        } else {
            out.extend_from_slice(json.as_bytes());
        }
        out.push(b'\n');
    }
    out
}

/// `Ok` for a 2xx status; otherwise a sentence quoting the status and the start of the
/// body, with a hint for the common cases. `url` is the address as the operator wrote it.
pub fn outcome(url: &str, status: u16, body_excerpt: &str, records: usize) -> Result<(), String> {
    if (200..300).contains(&status) {
        return Ok(());
    }
    let hint = match status {
        401 | 403 => {
            "; check the credentials the headers setting sends (e.g. an Authorization header)"
        }
        404 | 405 => "; check the path in the url setting and the method setting",
        408 | 429 | 502..=504 => "; the remote is busy or unavailable, the batch will be retried",
        413 => "; the remote refused the size of the batch, raise its request size limit",
        415 => "; the remote does not take application/x-ndjson, set a content-type in headers",
        300..=399 => "; redirects are not followed, set url to the final address",
        _ => "",
    };
    Err(format!(
        "{url} answered {status} to a batch of {records} record(s): {body_excerpt}{hint}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_is_one_line_per_record() {
        let b = body(["{\"id\":\"a\"}", " {\"id\":\"b\",\n\"x\":1} "]);
        assert_eq!(
            String::from_utf8(b).unwrap(),
            "{\"id\":\"a\"}\n{\"id\":\"b\", \"x\":1}\n"
        );
        assert!(body([]).is_empty());
        let b = body(["{\"t\":\"é\\n\"}"]);
        assert_eq!(b, "{\"t\":\"é\\n\"}\n".as_bytes());
    }

    #[test]
    fn outcomes() {
        assert_eq!(outcome("http://x/", 200, "", 1), Ok(()));
        assert_eq!(outcome("http://x/", 204, "", 1), Ok(()));
        let err = outcome("http://x/in", 401, "{\"text\":\"Invalid token\"}", 3).unwrap_err();
        assert_eq!(
            err,
            "http://x/in answered 401 to a batch of 3 record(s): {\"text\":\"Invalid token\"}; \
             check the credentials the headers setting sends (e.g. an Authorization header)"
        );
        let err = outcome("http://x/", 500, "boom", 1).unwrap_err();
        assert_eq!(
            err,
            "http://x/ answered 500 to a batch of 1 record(s): boom"
        );
        assert!(
            outcome("http://x/", 301, "", 1)
                .unwrap_err()
                .contains("redirects")
        );
    }
}
