//! Error formatting both programs use: [`chain`] writes an error and its sources on one line
//! (`outer: cause: root cause`), for logs, CNI error details and the `operator-status` a user
//! reads. A source whose text the line already ends with (an error that prints its cause in its
//! own message, as Cilium's texts do) is not written twice. It owns no error type and imports
//! nothing, so any module may use it without reaching up.

/// An error and its sources on one line.
#[must_use]
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        let cause = s.to_string();
        if !text.ends_with(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
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

    #[derive(Debug, thiserror::Error)]
    #[error("unable to initialize IPv4 allocator: {source}")]
    struct Says {
        #[source]
        source: Outer,
    }

    #[test]
    fn a_cause_the_message_already_ends_with_is_written_once() {
        let error = Says {
            source: Outer {
                source: std::io::Error::other("inner"),
            },
        };
        assert_eq!(
            chain(&error),
            "unable to initialize IPv4 allocator: outer: inner"
        );
    }
}
