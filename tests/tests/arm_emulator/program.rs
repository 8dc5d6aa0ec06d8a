//! The `arm-emulator` program as other processes use it: started with a scenario file (whose
//! relative `roleFile` is read beside it), its URL read from the first line of stdout, serving
//! IMDS and ARM there with RBAC from the role file, logging requests to stderr, and exiting 0 on
//! SIGTERM.

use std::{
    io::{BufRead as _, BufReader, Read as _},
    net::SocketAddr,
    process::{Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use nix::{
    sys::signal::{Signal, kill},
    unistd::Pid,
};
use weft_tests::unique;

use super::{Client, S, SCENARIO, v};

#[test]
fn program_prints_its_url_serves_and_exits_0_on_sigterm() {
    let dir = std::env::temp_dir().join(unique("arm-emulator-"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let role = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/azure/weft-ipam-vmss.json");
    std::fs::copy(&role, dir.join("role.json")).expect("copy the role");
    let file = dir.join("scenario.yaml");
    std::fs::write(
        &file,
        format!("{SCENARIO}roleFile: role.json\npageSize: 1\n"),
    )
    .expect("write the scenario");

    let mut child = Command::new(env!("CARGO_BIN_EXE_arm-emulator"))
        .arg("--scenario")
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start arm-emulator: {e}"));
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let read = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(read.map(|_| line));
    });
    let line = match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(Ok(line)) => line,
        other => {
            let _ = child.kill();
            panic!("no URL line from arm-emulator: {other:?}");
        }
    };
    let addr: SocketAddr = line
        .trim_end()
        .strip_prefix("http://")
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("not a URL line: {line:?}"));

    let mut client = Client::to(addr);
    let env = client.send(
        "GET",
        "/metadata/instance/compute/azEnvironment?api-version=2019-06-01&format=text",
        &[("Metadata", "true")],
        None,
    );
    assert_eq!(env.expect(200).text(), "AzurePublicCloud");
    let token = client
        .send(
            "GET",
            "/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https%3A%2F%2Fmanagement.azure.com%2F",
            &[("Metadata", "true")],
            None,
        )
        .expect(200)
        .json();
    client.token = token["access_token"].as_str().map(str::to_owned);
    // pageSize 1 from the file: the two scale set NICs come on two pages.
    let (nics, pages) = client.list(&v(&format!(
        "{S}/Microsoft.Compute/virtualMachineScaleSets/aks-nodepool1-12345678-vmss/networkInterfaces"
    )));
    assert_eq!((nics.len(), pages), (2, 2));
    // The role file (scale sets only) holds no NIC read.
    let refused = client
        .get(&v(&format!("{S}/Microsoft.Network/networkInterfaces")))
        .expect(403);
    assert_eq!(refused.code(), "AuthorizationFailed");

    let pid = Pid::from_raw(i32::try_from(child.id()).expect("a pid"));
    kill(pid, Signal::SIGTERM).expect("SIGTERM");
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "arm-emulator still runs 10 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("piped stderr")
        .read_to_string(&mut stderr)
        .expect("stderr");
    assert!(status.success(), "exit status {status}; stderr:\n{stderr}");
    assert!(
        stderr.contains("Interfaces.ListVirtualMachineScaleSetNetworkInterfaces"),
        "{stderr}"
    );
    assert!(stderr.contains("SIGTERM"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
