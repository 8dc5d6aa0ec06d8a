//! Questions to a running agent over its socket that are not CNI commands: its status report
//! (`weft-agent status`). The report itself ([`AgentStatus`]) is `crate::status`, a leaf
//! module that only holds, judges and renders it.

use std::path::{Path, PathBuf};

use super::{
    client::{AskError, ask},
    proto::{Request, Response},
};
use crate::{error::chain, status::AgentStatus};

/// Why the status could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// Nothing answers on the socket.
    #[error(
        "weft-agent is not running, or not answering, on {socket}: {}\n\
         Start it with `weft-agent run --node-name <node> --store <dir>` (or without --store \
         against Kubernetes; on a cluster it is the weft-agent DaemonSet pod on this node), or \
         pass --socket / WEFT_SOCK if it serves another socket",
        chain(cause)
    )]
    NotRunning {
        /// The socket asked.
        socket: PathBuf,
        /// Why the question got no answer (in the text, before the fix; not a `source`, so a
        /// printed chain does not say it twice).
        cause: AskError,
    },
    /// The agent answered something else (another weft version?).
    #[error(
        "weft-agent on {socket} answered {answer}; are weft-agent and this command the same version?"
    )]
    Unexpected {
        /// The socket asked.
        socket: PathBuf,
        /// The answer, abbreviated.
        answer: String,
    },
}

/// Ask the agent on `socket` for its status.
///
/// # Errors
/// The agent is not running (or not answering), or answered something unexpected.
pub fn agent_status(socket: &Path) -> Result<AgentStatus, StatusError> {
    match ask(socket, &Request::AgentStatus) {
        Ok(Response::Status(status)) => Ok(*status),
        Ok(other) => Err(StatusError::Unexpected {
            socket: socket.to_path_buf(),
            answer: format!("{other:?}").chars().take(200).collect(),
        }),
        Err(cause) => Err(StatusError::NotRunning {
            socket: socket.to_path_buf(),
            cause,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_agent_on_the_socket_says_how_to_start_one() {
        let socket =
            std::env::temp_dir().join(format!("weft-no-agent-{}.sock", std::process::id()));
        let error = agent_status(&socket).expect_err("nothing listens");
        let text = error.to_string();
        assert!(
            matches!(
                error,
                StatusError::NotRunning {
                    cause: AskError::Connect { .. },
                    ..
                }
            ),
            "{text}"
        );
        assert!(
            text.contains("No such file"),
            "the cause is in the text: {text}"
        );
        assert!(text.contains(&socket.display().to_string()), "{text}");
        assert!(text.contains("weft-agent run --node-name"), "{text}");
    }
}
