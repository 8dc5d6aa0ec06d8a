//! The plugin side (`weft-cni`): read `CNI_*` and stdin, validate them as the spec says, ask
//! the agent over its unix socket, print the result or the CNI error. Thin on purpose: every
//! decision is the agent's. A DEL while the agent is down is queued on disk (one file per
//! attachment) and replayed by the agent when it starts, like Cilium's deletion queue.

use std::{
    collections::HashMap,
    io,
    io::{BufRead as _, BufReader, Write as _},
    os::unix::net::UnixStream,
    path::{Path, PathBuf},
    time::Duration,
};

use super::{
    proto::{DEFAULT_DELETE_QUEUE, DEFAULT_SOCKET, PodRequest, Request, Response},
    types::{
        CniError, NetConf, SUPPORTED_VERSIONS, allowed_netns_path, code, netns_refused,
        parse_cni_args, valid_container_id, valid_ifname,
    },
};
use crate::error::chain;

/// What the plugin prints and its exit code.
#[derive(Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Text for stdout (result or error JSON; empty for a silent success).
    pub stdout: String,
    /// Process exit code.
    pub exit_code: i32,
}

/// Run one plugin invocation with environment `env` and configuration `stdin`.
#[must_use]
pub fn run<S: std::hash::BuildHasher>(env: &HashMap<String, String, S>, stdin: &[u8]) -> Outcome {
    match invoke(env, stdin) {
        Ok(stdout) => Outcome {
            stdout,
            exit_code: 0,
        },
        Err(error) => Outcome {
            stdout: serde_json::to_string(&error).unwrap_or_default(),
            exit_code: 1,
        },
    }
}

/// What one plugin invocation asks for, decided from `CNI_*` and stdin alone (no IO).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Invocation {
    /// `VERSION`: print this JSON and exit.
    Version(String),
    /// Ask the agent.
    Ask {
        /// `cniVersion` of the configuration.
        version: String,
        /// The request for the agent.
        request: Box<Request>,
        /// The agent socket (configuration, `WEFT_SOCK`, or the default).
        socket: String,
        /// Where a DEL is queued while the agent is down.
        delete_queue: String,
    },
}

/// Validate `CNI_*` and the configuration on stdin as the spec says and build the request;
/// the pure first half of [`run`].
///
/// # Errors
/// The CNI error to print: a missing or invalid variable, an undecodable or unsupported
/// configuration, an unknown command.
pub fn parse<S: std::hash::BuildHasher>(
    env: &HashMap<String, String, S>,
    stdin: &[u8],
) -> Result<Invocation, CniError> {
    let var = |k: &str| env.get(k).map(String::as_str).unwrap_or_default();
    let command = var("CNI_COMMAND");
    if command.is_empty() {
        return Err(CniError::new(
            "",
            code::INVALID_ENV,
            "CNI_COMMAND is not set",
            "the runtime must set CNI_COMMAND to ADD, DEL, CHECK, STATUS, GC or VERSION",
        ));
    }
    if command == "VERSION" {
        return Ok(Invocation::Version(version(stdin)));
    }
    let conf: NetConf = serde_json::from_slice(stdin).map_err(|e| {
        CniError::new(
            "",
            code::DECODE_FAILURE,
            "cannot decode the network configuration on stdin",
            e.to_string(),
        )
    })?;
    conf.validate()?;
    let version = conf.cni_version.clone();
    if !SUPPORTED_VERSIONS.contains(&version.as_str()) {
        return Err(CniError::new(
            SUPPORTED_VERSIONS[SUPPORTED_VERSIONS.len() - 1],
            code::INCOMPATIBLE_VERSION,
            format!("incompatible CNI version {version:?}"),
            format!("weft-cni supports {}", SUPPORTED_VERSIONS.join(", ")),
        ));
    }
    let request = match command {
        "ADD" => Request::Add(pod_request(env, &conf, true)?),
        "DEL" => Request::Del(pod_request(env, &conf, false)?),
        "CHECK" => Request::Check(pod_request(env, &conf, true)?),
        "STATUS" | "GC" if version != "1.1.0" => {
            return Err(CniError::new(
                &version,
                code::INCOMPATIBLE_VERSION,
                format!("{command} needs cniVersion 1.1.0"),
                format!("the configuration says {version}"),
            ));
        }
        "STATUS" => Request::Status {
            cni_version: version.clone(),
        },
        "GC" => Request::Gc {
            cni_version: version.clone(),
            valid: conf.valid_attachments.clone().unwrap_or_default(),
        },
        other => {
            return Err(CniError::new(
                &version,
                code::INVALID_ENV,
                format!("unknown CNI_COMMAND {other:?}"),
                "expected ADD, DEL, CHECK, STATUS, GC or VERSION",
            ));
        }
    };
    let socket = conf
        .agent_socket
        .clone()
        .or_else(|| env.get("WEFT_SOCK").cloned())
        .unwrap_or_else(|| DEFAULT_SOCKET.to_owned());
    let delete_queue = conf
        .delete_queue_dir
        .clone()
        .unwrap_or_else(|| DEFAULT_DELETE_QUEUE.to_owned());
    Ok(Invocation::Ask {
        version,
        request: Box::new(request),
        socket,
        delete_queue,
    })
}

fn invoke<S: std::hash::BuildHasher>(
    env: &HashMap<String, String, S>,
    stdin: &[u8],
) -> Result<String, CniError> {
    let (version, request, socket, dir) = match parse(env, stdin)? {
        Invocation::Version(json) => return Ok(json),
        Invocation::Ask {
            version,
            request,
            socket,
            delete_queue,
        } => (version, *request, socket, delete_queue),
    };
    match ask(Path::new(&socket), &request) {
        Ok(Response::Added(result)) => serde_json::to_string(&result).map_err(|e| {
            CniError::new(
                &version,
                code::IO_FAILURE,
                "cannot encode the result",
                e.to_string(),
            )
        }),
        Ok(Response::Done | Response::Explained(_) | Response::Status(_)) => Ok(String::new()),
        Ok(Response::Error(error)) => Err(error),
        Err(error) => {
            let reason = chain(&error);
            if let Request::Del(pod) = &request {
                return queue_delete(Path::new(&dir), pod).map(|()| String::new()).map_err(|e| {
                    CniError::new(&version, code::IO_FAILURE, format!("weft-agent is unreachable ({reason}) and the DEL could not be queued in {dir}"), e.to_string())
                });
            }
            // STATUS reports an unreachable agent as "not available" (50), the rest as "try again".
            let code = if matches!(request, Request::Status { .. }) {
                code::NOT_AVAILABLE
            } else {
                code::TRY_AGAIN_LATER
            };
            Err(CniError::new(
                &version,
                code,
                format!("weft-agent is not reachable at {socket}"),
                format!("{reason}; is the weft-agent DaemonSet running on this node?"),
            ))
        }
    }
}

fn version(stdin: &[u8]) -> String {
    let asked = serde_json::from_slice::<NetConf>(stdin)
        .map(|c| c.cni_version)
        .unwrap_or_default();
    let version = if SUPPORTED_VERSIONS.contains(&asked.as_str()) {
        asked
    } else {
        "1.1.0".to_owned()
    };
    serde_json::json!({"cniVersion": version, "supportedVersions": SUPPORTED_VERSIONS}).to_string()
}

fn pod_request<S: std::hash::BuildHasher>(
    env: &HashMap<String, String, S>,
    conf: &NetConf,
    need_netns: bool,
) -> Result<PodRequest, CniError> {
    let v = &conf.cni_version;
    let var = |k: &str| env.get(k).cloned().unwrap_or_default();
    let container_id = var("CNI_CONTAINERID");
    if !valid_container_id(&container_id) {
        return Err(CniError::new(
            v,
            code::INVALID_ENV,
            "CNI_CONTAINERID is missing or invalid",
            format!(
                "got {container_id:?}; it must start with a letter or digit and contain only letters, digits, '_', '.' and '-'"
            ),
        ));
    }
    let ifname = var("CNI_IFNAME");
    if !valid_ifname(&ifname) {
        return Err(CniError::new(
            v,
            code::INVALID_ENV,
            "CNI_IFNAME is missing or invalid",
            format!(
                "got {ifname:?}; an interface name has 1 to 15 characters and no '/', ':' or spaces"
            ),
        ));
    }
    let netns = var("CNI_NETNS");
    if need_netns && netns.is_empty() {
        return Err(CniError::new(
            v,
            code::INVALID_ENV,
            "CNI_NETNS is not set",
            "ADD and CHECK need the path of the container's network namespace",
        ));
    }
    if need_netns && !allowed_netns_path(&netns) {
        return Err(netns_refused(v, &netns));
    }
    let args = parse_cni_args(&var("CNI_ARGS"));
    let arg = |k: &str| {
        args.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    Ok(PodRequest {
        cni_version: v.clone(),
        container_id,
        ifname,
        netns: PathBuf::from(netns),
        pod_namespace: arg("K8S_POD_NAMESPACE"),
        pod_name: arg("K8S_POD_NAME"),
        mtu: conf.mtu,
    })
}

/// Why a question to the agent got no answer.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    /// Nothing accepts connections on the socket.
    #[error("connect {}", socket.display())]
    Connect {
        /// The socket.
        socket: PathBuf,
        /// What the connection attempt said.
        #[source]
        source: io::Error,
    },
    /// The request could not be sent (or the connection set up).
    #[error("send")]
    Send(#[source] io::Error),
    /// The request does not encode.
    #[error("encode the request")]
    Encode(#[source] serde_json::Error),
    /// No answer could be read.
    #[error("receive")]
    Receive(#[source] io::Error),
    /// The answer is not one this plugin understands.
    #[error("agent answered {answer:?}")]
    Decode {
        /// The answer as read.
        answer: String,
        /// Why it does not decode.
        #[source]
        source: serde_json::Error,
    },
}

/// Send `request` to the agent and read its response.
///
/// # Errors
/// [`AskError`]: the socket cannot be reached, or the exchange failed.
pub fn ask(socket: &Path, request: &Request) -> Result<Response, AskError> {
    let stream = UnixStream::connect(socket).map_err(|source| AskError::Connect {
        socket: socket.to_path_buf(),
        source,
    })?;
    stream
        .set_read_timeout(Some(Duration::from_mins(2)))
        .map_err(AskError::Send)?;
    let mut line = serde_json::to_string(request).map_err(AskError::Encode)?;
    line.push('\n');
    (&stream)
        .write_all(line.as_bytes())
        .map_err(AskError::Send)?;
    let mut answer = String::new();
    BufReader::new(&stream)
        .read_line(&mut answer)
        .map_err(AskError::Receive)?;
    serde_json::from_str(&answer).map_err(|source| AskError::Decode { answer, source })
}

/// Queue a DEL in `dir` (atomically: temp file + rename), to be replayed by the agent.
///
/// # Errors
/// The directory cannot be created or written.
pub fn queue_delete(dir: &Path, pod: &PodRequest) -> io::Result<()> {
    crate::fsutil::private_dir(dir)?;
    let name = format!("{}-{}.json", pod.container_id, pod.ifname);
    let body = serde_json::to_vec(&Request::Del(pod.clone())).map_err(io::Error::other)?;
    crate::fsutil::write_private(&dir.join(name), &body, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_that_is_not_there_is_a_connect_error_with_its_io_cause() {
        let socket = std::env::temp_dir().join(format!("weft-ask-{}.sock", std::process::id()));
        let error = ask(&socket, &Request::AgentStatus).expect_err("nothing listens");
        let AskError::Connect { source, .. } = &error else {
            panic!("{error:?}");
        };
        assert_eq!(source.kind(), io::ErrorKind::NotFound);
        assert!(
            chain(&error).starts_with(&format!("connect {}: No such file", socket.display())),
            "{}",
            chain(&error)
        );
    }

    /// A valid ADD environment: only the configuration on stdin decides.
    fn add_env() -> HashMap<String, String> {
        [
            ("CNI_COMMAND", "ADD"),
            ("CNI_CONTAINERID", "c1"),
            ("CNI_IFNAME", "eth0"),
            ("CNI_NETNS", "/var/run/netns/x"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    fn refused(stdin: &str) -> CniError {
        match parse(&add_env(), stdin.as_bytes()) {
            Ok(invocation) => panic!("accepted {stdin}: {invocation:?}"),
            Err(error) => error,
        }
    }

    #[test]
    fn a_configuration_without_name_or_type_is_invalid_config() {
        for (stdin, missing) in [
            (r#"{"cniVersion":"1.0.0","type":"weft-cni"}"#, "name"),
            (r#"{"cniVersion":"1.0.0","name":"weft"}"#, "type"),
            (
                r#"{"cniVersion":"1.0.0","name":"","type":"weft-cni"}"#,
                "name",
            ),
        ] {
            let error = refused(stdin);
            assert_eq!(error.code, code::INVALID_CONFIG, "{stdin}: {error}");
            assert!(
                error.msg.contains(&format!("\"{missing}\"")),
                "{stdin}: the error must name the missing field {missing:?}: {error}"
            );
        }
    }

    #[test]
    fn a_configuration_without_cni_version_says_so() {
        let error = refused(r#"{"name":"weft","type":"weft-cni"}"#);
        assert_eq!(error.code, code::INVALID_CONFIG, "{error}");
        assert!(
            error.msg.contains("cniVersion") && !error.msg.contains("\"\""),
            "the error must say cniVersion is missing: {error}"
        );
        assert!(
            error.details.contains("1.0.0"),
            "the fix names a supported version: {error}"
        );
    }

    #[test]
    fn a_conflist_given_as_a_plugin_configuration_says_what_it_is() {
        let list = String::from_utf8(super::super::install::conflist_bytes()).expect("utf-8");
        let error = refused(&list);
        assert_eq!(error.code, code::INVALID_CONFIG, "{error}");
        assert!(
            error.msg.contains("list") && error.details.contains("plugins"),
            "the error must say this is a configuration list: {error}"
        );
    }

    #[test]
    fn a_complete_configuration_is_asked() {
        let stdin = r#"{"cniVersion":"1.0.0","name":"weft","type":"weft-cni"}"#;
        let invocation = parse(&add_env(), stdin.as_bytes()).expect("valid");
        assert!(
            matches!(&invocation, Invocation::Ask { version, .. } if version == "1.0.0"),
            "{invocation:?}"
        );
    }
}
