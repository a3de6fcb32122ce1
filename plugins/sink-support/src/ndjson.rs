//! What a response to a batch of NDJSON means.

/// How much of an error response's body goes into the error message.
pub const ERROR_EXCERPT_BYTES: usize = 300;

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
