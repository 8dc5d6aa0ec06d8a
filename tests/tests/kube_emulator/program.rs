//! The `kube-emulator` program as other processes use it: started with `--kubeconfig-out`, its
//! address read from the first line of its stdout, driven by kubectl through that kubeconfig
//! (a CiliumPodIPPool at `cilium.io/v2`, a Lease in `kube-system`), and stopped by SIGTERM,
//! after which it must exit 0; the token checked on raw requests (kubectl sends none over plain
//! HTTP), and refused anonymous requests with `--require-token`.

use std::{
    io::{BufRead as _, BufReader, Read as _, Write as _},
    net::{SocketAddr, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use nix::{
    sys::signal::{Signal, kill},
    unistd::Pid,
};
use serde_json::Value;
use weft_tests::unique;

/// A started `kube-emulator`, killed on drop if the test did not stop it.
struct Program {
    child: Child,
    addr: SocketAddr,
    dir: PathBuf,
}

impl Program {
    fn start(dir: &Path, flags: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kube-emulator"))
            .arg("--kubeconfig-out")
            .arg(dir.join("kubeconfig"))
            .args(["--token", "program-token"])
            .args(flags)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start kube-emulator: {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let read = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(read.map(|_| line));
        });
        let line = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Ok(line)) => line,
            Ok(Err(e)) => panic!("reading kube-emulator's stdout: {e}"),
            Err(e) => {
                let _ = child.kill();
                panic!("no address line from kube-emulator: {e}");
            }
        };
        let addr = line
            .trim_end()
            .strip_prefix("listening on ")
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("not an address line: {line:?}"));
        Self {
            child,
            addr,
            dir: dir.to_owned(),
        }
    }

    /// `kubectl --kubeconfig <ours> ARGS` with `stdin`; its stdout, after checking it succeeded.
    fn kubectl(&self, args: &[&str], stdin: &str) -> String {
        let mut child = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(self.dir.join("kubeconfig"))
            .arg("--cache-dir")
            .arg(self.dir.join("cache"))
            .args(args)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run kubectl (it must be on PATH): {e}"));
        child
            .stdin
            .take()
            .expect("piped stdin")
            .write_all(stdin.as_bytes())
            .expect("kubectl's stdin");
        let out = child.wait_with_output().expect("kubectl's output");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "kubectl {args:?} failed ({}):\nstdout: {stdout}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }

    fn kubectl_json(&self, args: &[&str]) -> Value {
        let text = self.kubectl(&[args, &["-o", "json"]].concat(), "");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("kubectl {args:?}: {e}: {text}"))
    }

    /// The status code of `GET /api` with this `Authorization` header, if any.
    fn status_of_get(&self, authorization: Option<&str>) -> u16 {
        let mut stream = TcpStream::connect(self.addr).expect("connect");
        let header = authorization.map_or_else(String::new, |a| format!("Authorization: {a}\r\n"));
        write!(
            stream,
            "GET /api HTTP/1.1\r\nHost: {}\r\n{header}Connection: close\r\n\r\n",
            self.addr
        )
        .expect("send");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("answer");
        answer
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("not an HTTP answer: {answer:?}"))
    }

    /// Send SIGTERM and wait (at most 10 s) for the exit status.
    fn terminate(self) -> std::process::ExitStatus {
        self.signal(Signal::SIGTERM)
    }

    /// Send `signal` and wait (at most 10 s) for the exit status.
    fn signal(mut self, signal: Signal) -> std::process::ExitStatus {
        let pid = Pid::from_raw(i32::try_from(self.child.id()).expect("a pid"));
        kill(pid, signal).unwrap_or_else(|e| panic!("{signal}: {e}"));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "kube-emulator still runs 10 s after {signal}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const POOL: &str = "\
apiVersion: cilium.io/v2
kind: CiliumPodIPPool
metadata:
  name: blue
spec:
  ipv4:
    cidrs: [10.20.0.0/16]
    maskSize: 27
";

const LEASE: &str = "\
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: weft-operator
  namespace: kube-system
spec:
  holderIdentity: weft-operator-7d9f-abcde
  leaseDurationSeconds: 15
  acquireTime: \"2026-01-02T03:04:05.123456Z\"
  renewTime: \"2026-01-02T03:04:07.654321Z\"
  leaseTransitions: 0
";

#[test]
fn kubectl_creates_and_gets_pools_and_leases_and_sigterm_exits_zero() {
    let dir = std::env::temp_dir().join(unique("weft-kube-emulator-"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let program = Program::start(&dir, &[]);
    assert!(
        program.addr.ip().is_loopback() && program.addr.port() != 0,
        "{}",
        program.addr
    );
    let kubeconfig = std::fs::read_to_string(dir.join("kubeconfig")).expect("kubeconfig");
    assert!(
        kubeconfig.contains(&format!("server: http://{}", program.addr))
            && kubeconfig.contains("token: program-token"),
        "{kubeconfig}"
    );

    // No OpenAPI documents are served, so kubectl cannot validate on the client side.
    program.kubectl(&["create", "--validate=false", "-f", "-"], POOL);
    let pool = program.kubectl_json(&["get", "ciliumpodippools.v2.cilium.io", "blue"]);
    assert_eq!(pool["apiVersion"], "cilium.io/v2");
    assert_eq!(pool["spec"]["ipv4"]["cidrs"][0], "10.20.0.0/16");
    let old = program.kubectl_json(&["get", "ciliumpodippools.v2alpha1.cilium.io", "blue"]);
    assert_eq!(old["apiVersion"], "cilium.io/v2alpha1");
    assert_eq!(old["metadata"], pool["metadata"]);
    let listed = program.kubectl(&["get", "cpip"], "");
    assert!(listed.contains("blue"), "{listed}");

    program.kubectl(&["create", "--validate=false", "-f", "-"], LEASE);
    let table = program.kubectl(&["get", "leases", "-n", "kube-system"], "");
    assert!(table.contains("weft-operator"), "{table}");
    let lease = program.kubectl_json(&["get", "lease", "-n", "kube-system", "weft-operator"]);
    assert_eq!(lease["apiVersion"], "coordination.k8s.io/v1");
    assert_eq!(lease["spec"]["holderIdentity"], "weft-operator-7d9f-abcde");
    assert_eq!(lease["spec"]["acquireTime"], "2026-01-02T03:04:05.123456Z");
    assert_eq!(lease["spec"]["renewTime"], "2026-01-02T03:04:07.654321Z");

    assert_eq!(program.status_of_get(Some("Bearer program-token")), 200);
    assert_eq!(
        program.status_of_get(Some("Bearer weft-emulator-token")),
        401
    );
    assert_eq!(
        program.status_of_get(None),
        200,
        "anonymous, as kubectl comes"
    );

    let status = program.terminate();
    assert!(status.success(), "kube-emulator after SIGTERM: {status}");
}

#[test]
fn with_require_token_anonymous_requests_are_401_and_sigint_exits_zero() {
    let dir = std::env::temp_dir().join(unique("weft-kube-emulator-"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let program = Program::start(&dir, &["--require-token", "--listen", "127.0.0.1:0"]);
    assert_eq!(program.status_of_get(None), 401);
    assert_eq!(program.status_of_get(Some("Bearer program-token")), 200);
    let status = program.signal(Signal::SIGINT);
    assert!(status.success(), "kube-emulator after SIGINT: {status}");
}
