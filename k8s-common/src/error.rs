//! Error formatting both programs use: [`chain`] writes an error and its sources on one line
//! (`outer: cause: root cause`), for logs, CNI error details and the `operator-status` a user
//! reads. It owns no error type and imports nothing, so any module may use it without
//! reaching up.

/// An error and its sources on one line.
#[must_use]
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::chain;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer {
        #[source]
        source: std::io::Error,
    }

    #[test]
    fn chain_joins_every_source() {
        let error = Outer {
            source: std::io::Error::other("inner"),
        };
        assert_eq!(chain(&error), "outer: inner");
    }
}
